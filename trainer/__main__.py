"""Entry point: `python -m trainer run|eval|analyze` (see trainer/cli.py)."""

import sys

from trainer.cli import main

sys.exit(main())
