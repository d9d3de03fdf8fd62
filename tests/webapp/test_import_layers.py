"""Which package may import which, read from the source (issue 14): the Django project never
imports the workers (the Celery app is `webapp/celery.py`; workers import it, not the other
way round), and the panel's pages never import its entry module (`app.py` imports the pages
and registers them, so there is no cycle); the code sandbox (`sandbox/`) stands alone: it
imports neither Django, torch, nor any other package of ours (issue 23)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name `path` imports, at any depth (function bodies included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def offenders(folder: str, forbidden: str) -> dict[str, list[str]]:
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        bad = sorted(
            m for m in imported_modules(path) if m == forbidden or m.startswith(forbidden + ".")
        )
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    return found


def test_the_django_project_never_imports_the_workers():
    assert offenders("webapp", "workers") == {}


def test_the_celery_app_is_the_django_projects():
    assert (ROOT / "webapp" / "celery.py").is_file()
    assert not (ROOT / "workers" / "celery_app.py").exists()
    assert "webapp.celery" in imported_modules(ROOT / "workers" / "tasks.py")


def test_the_panel_pages_never_import_its_entry_module():
    assert offenders("webapp/dashboards/pages", "webapp.dashboards.app") == {}


@pytest.mark.parametrize("forbidden", ["django", "torch", "trainer", "webapp", "workers"])
def test_the_sandbox_imports_no_other_layer(forbidden):
    assert offenders("sandbox", forbidden) == {}


def test_importing_the_sandbox_loads_neither_django_nor_torch_nor_the_trainer():
    probe = (
        "import json, sys, sandbox; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('django', 'torch', 'trainer', 'webapp', 'workers'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_the_scan_sees_an_import_inside_a_function(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from workers.tasks import ping\n")
    assert "workers.tasks" in imported_modules(source)
