"""Which package may import which, read from the source: the Django project never
imports the workers (the Celery app is `webapp/celery.py`; workers import it, not the other
way round), and the panel's pages never import its entry module (`app.py` imports the pages
and registers them, so there is no cycle); the code sandbox (`sandbox/`) stands alone: it
imports neither Django, torch, nor any other package of ours.

The layers: `trainer` imports neither Django, Celery, the web app nor the
workers; `analysis` imports neither torch nor Django, and of ours only the vocabulary
(`trainer.names`); the web process never imports torch: no module of `webapp` names it,
and importing the URLs, views and task module loads none of it (`test_no_torch.py` imports
them all in one process; the probe here covers `analysis` and the vocabulary)."""

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


@pytest.mark.parametrize("forbidden", ["django", "celery", "webapp", "workers"])
def test_the_trainer_imports_no_web_layer(forbidden):
    assert offenders("trainer", forbidden) == {}


@pytest.mark.parametrize(
    "forbidden", ["torch", "transformers", "peft", "trl", "django", "celery", "webapp", "workers"]
)
def test_the_analysis_imports_neither_torch_nor_django(forbidden):
    assert offenders("analysis", forbidden) == {}


def test_the_analysis_imports_only_the_vocabulary_of_the_trainer():
    used = {
        str(path.relative_to(ROOT)): sorted(
            m for m in imported_modules(path) if m.split(".")[0] == "trainer"
        )
        for path in sorted((ROOT / "analysis").rglob("*.py"))
    }
    beyond = {
        path: [m for m in found if m != "trainer.names" and not m.startswith("trainer.names.")]
        for path, found in used.items()
    }
    assert {path: found for path, found in beyond.items() if found} == {}


@pytest.mark.parametrize("heavy", ["torch", "transformers", "peft", "trl"])
def test_no_module_of_the_web_app_names_torch(heavy):
    assert offenders("webapp", heavy) == {}


def test_importing_every_analysis_module_loads_neither_torch_nor_django():
    probe = (
        "import json, pkgutil, importlib, sys, analysis; "
        "[importlib.import_module(f'analysis.{m.name}') "
        "for m in pkgutil.iter_modules(analysis.__path__)]; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'torch', 'transformers', 'webapp', 'workers') "
        "or (m.startswith('trainer.') and m != 'trainer.names'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_the_scan_sees_an_import_inside_a_function(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from workers.tasks import ping\n")
    assert "workers.tasks" in imported_modules(source)
