"""Which package may import which, read from the source: the Django project never
imports the workers (the Celery app is `webapp/celery.py`; workers import it, not the other
way round), and the panel's pages never import its entry module (`app.py` imports the pages
and registers them, so there is no cycle); the code sandbox (`sandbox/`) stands alone: it
imports neither Django, torch, nor any other package of ours.

The layers: `trainer` imports neither Django, Celery, the web app nor the
workers; `analysis` imports neither torch nor Django, and of ours only the vocabulary
(`vocabulary/`, the floor below the trainer and the analysis); the vocabulary imports nothing
of ours and nothing beyond the standard library; the web process never imports torch: no
module of `webapp` names it, and importing the URLs, views and task module loads none of it
(`test_no_torch.py` imports them all in one process; the probes here cover `analysis` and the
vocabulary)."""

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


OURS = (
    "analysis",
    "bench",
    "sandbox",
    "scripts",
    "tests",
    "trainer",
    "vocabulary",
    "webapp",
    "workers",
)


def ours_imported(folder: str) -> dict[str, list[str]]:
    """{file: the modules of ours it imports, beyond its own package}."""
    used = {
        str(path.relative_to(ROOT)): sorted(
            m
            for m in imported_modules(path)
            if m.split(".")[0] in OURS and m.split(".")[0] != folder
        )
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    return {path: found for path, found in used.items() if found}


def test_the_analysis_imports_of_ours_only_the_vocabulary():
    beyond = {
        path: [m for m in found if m.split(".")[0] != "vocabulary"]
        for path, found in ours_imported("analysis").items()
    }
    assert {path: found for path, found in beyond.items() if found} == {}


def test_the_vocabulary_imports_nothing_of_ours():
    assert ours_imported("vocabulary") == {}


def test_the_vocabulary_imports_only_the_standard_library():
    imported = {
        m.split(".")[0]
        for path in sorted((ROOT / "vocabulary").rglob("*.py"))
        for m in imported_modules(path)
    }
    assert sorted(m for m in imported if m not in sys.stdlib_module_names) == []


def test_the_trainer_keeps_no_copy_of_the_vocabulary():
    # The vocabulary moved below the trainer; a re-export left behind would be a second home.
    assert not (ROOT / "trainer" / "names.py").exists()
    assert [p for p, found in ours_imported("trainer").items() if "trainer.names" in found] == []


def test_importing_the_vocabulary_loads_no_other_package():
    probe = (
        "import json, sys; before = set(sys.modules); import vocabulary.names; "
        "print(json.dumps(sorted(m for m in set(sys.modules) - before "
        "if m.split('.')[0] not in ('vocabulary', *sys.stdlib_module_names))))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


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
        "or m.split('.')[0] == 'trainer')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_the_scan_sees_an_import_inside_a_function(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from workers.tasks import ping\n")
    assert "workers.tasks" in imported_modules(source)
