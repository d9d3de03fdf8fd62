"""The web process never imports torch (docs/design.md §2): not through the URLs and their views,
the API, the forms, nor through the worker's task module, which only imports the trainer
inside the task that trains."""

import json
import subprocess
import sys

from tests.helpers import ROOT, service_env

PROBE = """
import json, sys
import django
django.setup()
import webapp.urls, webapp.api.views, webapp.runs.views, webapp.accounts.views
import webapp.runs.forms, webapp.runs.summaries, webapp.metrics
from django.urls import get_resolver
get_resolver().url_patterns  # every route resolved, every view module imported
import workers.tasks, workers.sweep, workers.reporter
import pkgutil, importlib, analysis
for found in pkgutil.iter_modules(analysis.__path__):
    importlib.import_module(f"analysis.{found.name}")
heavy = sorted(m for m in ("torch", "transformers", "peft", "trl") if m in sys.modules)
print(json.dumps(heavy))
"""


def test_importing_the_urls_views_and_task_module_imports_no_torch(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=service_env(DJANGO_SETTINGS_MODULE="webapp.settings", TROUPE_DATA_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
