"""The trainer's modules import one another without a cycle, counting imports inside
functions: an import moved into a function to dodge a cycle hides it from Python
but not from this test. The tiny models' warm start lives in `trainer/transcripts/`, beside
the tasks rather than inside them, so a task module loads no warm-start code."""

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

PACKAGES = ("trainer", "sandbox")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of ours it imports anywhere in its source. A module's own
    packages are left out: Python has run them before the module, so they cannot be a cycle."""
    paths = {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module)
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {
            m for m in imported if m in paths and m != name and not name.startswith(m + ".")
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path (first module repeated at the end), or []."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = "open"
        path.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == "open":
                return path[path.index(dep) :] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[module] = "done"
        return []

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return []


def test_no_module_of_ours_imports_another_in_a_cycle_even_inside_a_function():
    cycle = find_cycle(import_graph())
    assert cycle == [], "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_sees_an_import_hidden_inside_a_function():
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert find_cycle(graph) == ["a", "b", "a"]
    assert "trainer.transcripts" not in import_graph()["trainer.tasks.math"]


def test_a_task_module_loads_no_warm_start_code():
    code = (
        "import json, sys\n"
        "import trainer.tasks.math, trainer.tasks.code, trainer.tasks.datasets\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('trainer.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(out.stdout)
    assert not [m for m in loaded if m.startswith(("trainer.transcripts", "trainer.workflows"))]
