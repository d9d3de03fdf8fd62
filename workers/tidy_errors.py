"""A failed run's error as it is stored: no absolute path of the worker's disk in it.

The run page and the API show a failed run's message to every signed-in user and its
traceback to the run's owner and staff (docs/security.md). Neither needs to know where the
worker keeps its code, its Python or its data directory, so paths are stored relative to the
repository, and the other places named by what they are: `$TROUPE_DATA_DIR/…`,
`<site-packages>/…`, `<python>/…`.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from django.conf import settings


def _places() -> list[tuple[str, str]]:
    """(absolute prefix, what it is shown as), the longest first so the most specific wins."""
    paths = sysconfig.get_paths()
    places = {
        str(Path(settings.DATA_DIR)): "$TROUPE_DATA_DIR",
        paths["purelib"]: "<site-packages>",
        paths["platlib"]: "<site-packages>",
        paths["stdlib"]: "<python>",
        str(Path(settings.BASE_DIR)): ".",
    }
    return sorted(places.items(), key=lambda item: -len(item[0]))


def tidy(text: str) -> str:
    """`text` with every absolute path under a known place written relative to it."""
    for prefix, name in _places():
        text = text.replace(prefix + "/", name + "/").replace(prefix, name)
    return text
