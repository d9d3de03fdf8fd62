"""The floors of the web app, read from the source: each app or package of `webapp/` stands on
a floor, and a module imports only from floors below its own (or from its own unit). The
models of every app are the bottom floor but one (Django's apps reference each other's models,
and every service reads them), the metric store stands on them, and the pages that gather
everything are at the top. Which is which is written once, in docs/design.md §2 (its
`floors` block), where a maintainer reads it; `FLOORS` below is that list.

Run as a script (`python -m tests.webapp.test_app_layers [root]`) it prints the counts the
layout is judged by: the modules and lines of `webapp/experiments/`, the import arrows
between the web app's packages, the pairs of packages that import each other, and how many
arrows run up a floor or lie on a cycle.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from tests.helpers import ROOT
from tests.webapp.test_import_layers import imported_modules

DESIGN = ROOT / "docs" / "design.md"


def read_floors(text: str) -> list[list[str]]:
    """The floors of the `floors` block in docs/design.md §2, lowest first. Each line is a
    floor; each word of it a unit: a package, a module, or "models" (every app's `models`
    module and `migrations` package, and the experiments app, which is nothing else). Units
    on one floor are siblings: neither imports the other. `#` starts a comment."""
    block = re.search(r"^ *```floors\n(.*?)^ *```", text, flags=re.M | re.S)
    assert block, "docs/design.md has no ```floors block"
    lines = (line.split("#", 1)[0].split() for line in block.group(1).splitlines())
    return [units for units in lines if units]


FLOORS: list[list[str]] = read_floors(DESIGN.read_text())

MODELS_PARTS = ("models", "migrations")
MODELS_APPS = ("experiments",)  # apps that hold nothing but models, migrations and admin


def floor_of() -> dict[str, int]:
    return {unit: level for level, units in enumerate(FLOORS) for unit in units}


def is_models(module: str) -> bool:
    parts = module.split(".")
    return len(parts) > 2 and parts[2] in MODELS_PARTS


def declared_unit(module: str, units: dict[str, int]) -> str | None:
    """The longest declared unit that `module` is, or lies in."""
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in units:
            return ".".join(parts[:end])
    return None


def unit_of(module: str, units: dict[str, int] | None = None) -> str | None:
    """The unit `module` (a dotted name under `webapp`) belongs to: "models", or the longest
    declared prefix; None outside the web app or where no unit is declared."""
    parts = module.split(".")
    if parts[0] != "webapp" or len(parts) < 2:
        return None
    if parts[1] in MODELS_APPS or is_models(module):
        return "models"
    return declared_unit(module, floor_of() if units is None else units)


def measured_unit(module: str, units: dict[str, int]) -> str | None:
    """The unit the counts use, on any tree, today's or an older one: "models" for every app's
    models, a declared unit, or else the module's package."""
    if module.split(".")[0] != "webapp" or len(module.split(".")) < 2:
        return None
    if is_models(module):
        return "models"
    return declared_unit(module, units) or package_of(module)


def package_of(module: str) -> str | None:
    """The second part of a web app module's name: its app, package or top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "webapp" and len(parts) > 1 else None


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files(root: Path) -> list[Path]:
    return sorted((root / "webapp").rglob("*.py"))


def most_specific(names: set[str]) -> set[str]:
    """`from webapp.tracking import keymap` names both the package and `keymap`; what it uses
    is `keymap`, so a name is dropped where a longer one extends it."""
    return {n for n in names if not any(other.startswith(n + ".") for other in names)}


def imports_by_file(root: Path = ROOT) -> dict[str, set[str]]:
    """{module name: the web app modules it imports}, for every module under webapp/."""
    return {
        module_name(path, root): most_specific(
            {m for m in imported_modules(path) if m.startswith("webapp.")}
        )
        for path in source_files(root)
    }


def upward_imports(root: Path = ROOT) -> dict[str, list[str]]:
    """{file: the modules it imports from its own floor's siblings or from a higher floor}."""
    units = floor_of()
    found = {}
    for path in source_files(root):
        here = unit_of(module_name(path, root), units)
        bad = []
        for target in sorted(most_specific(imported_modules(path))):
            there = unit_of(target, units)
            if here is None or there is None or there == here:
                continue
            if units[there] >= units[here]:
                bad.append(f"{target} ({there}, floor {units[there]} >= {units[here]})")
        if bad:
            found[str(path.relative_to(root))] = bad
    return found


def package_arrows(root: Path = ROOT) -> set[tuple[str, str]]:
    """(importer, imported) between the web app's packages and top-level modules, the way the
    layout is counted: one arrow however many files or names make it."""
    arrows = set()
    for module, targets in imports_by_file(root).items():
        source = package_of(module)
        for target in targets:
            dest = package_of(target)
            if source and dest and dest != source and (root / Path(*dest.split("."))).is_dir():
                arrows.add((source, dest))
    return arrows


def unit_arrows(root: Path = ROOT) -> set[tuple[str, str]]:
    """(importer, imported) between units as `measured_unit` draws them: every app's models
    one unit, the declared units, and otherwise packages."""
    units = floor_of()
    arrows = set()
    for module, targets in imports_by_file(root).items():
        source = measured_unit(module, units)
        for target in targets:
            dest = measured_unit(target, units)
            if source and dest and dest != source:
                arrows.add((source, dest))
    return arrows


def arrows_on_cycles(arrows: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The arrows that lie on a cycle: whatever the floors, each of them runs up one."""
    after = defaultdict(set)
    for a, b in arrows:
        after[a].add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(after[node])
        return False

    return {(a, b) for a, b in arrows if reaches(b, a)}


def two_way_pairs(arrows: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The pairs of packages that import each other, each once (in name order)."""
    return {(a, b) for a, b in arrows if (b, a) in arrows and a < b}


def measure(root: Path = ROOT) -> dict:
    hub = [
        p for p in (root / "webapp" / "experiments").rglob("*.py") if "migrations" not in p.parts
    ]
    units = unit_arrows(root)
    return {
        "experiments modules (without migrations)": len(hub),
        "experiments lines (without migrations)": sum(len(p.read_text().splitlines()) for p in hub),
        "arrows between packages": len(package_arrows(root)),
        "package pairs importing each other": sorted(
            f"{a} <-> {b}" for a, b in two_way_pairs(package_arrows(root))
        ),
        "arrows between units (models apart)": len(units),
        "unit arrows on a cycle": sorted(f"{a} -> {b}" for a, b in arrows_on_cycles(units)),
    }


def packages(root: Path = ROOT) -> set[str]:
    """Every package under webapp/ (a folder with `__init__.py`) and every top-level module."""
    found = {module_name(p, root) for p in (root / "webapp").rglob("__init__.py")}
    found |= {f"webapp.{p.stem}" for p in (root / "webapp").glob("*.py") if p.stem != "__init__"}
    return found - {"webapp"}


def test_no_module_of_the_web_app_imports_from_its_own_floor_or_above():
    assert upward_imports() == {}


def test_every_package_of_the_web_app_has_a_floor():
    assert {p for p in packages() if unit_of(p) is None} == set()


def test_every_declared_unit_names_something_that_exists():
    present = {unit_of(module_name(p, ROOT)) for p in source_files(ROOT)}
    assert {unit for units in FLOORS for unit in units} - present == set()


def test_no_arrow_between_the_web_apps_units_lies_on_a_cycle():
    assert arrows_on_cycles(unit_arrows()) == set()


def test_no_two_packages_of_the_web_app_import_each_other():
    """Counted by folder, models included: a package's floor is its folder's, so the folders
    show the floors."""
    assert two_way_pairs(package_arrows()) == set()


def test_the_floors_are_read_from_the_design_docs_block():
    text = "x\n  ```floors\n  a  b   # the a and the b\n\n  models\n  ```\n```floors\nlater\n```\n"
    assert read_floors(text) == [["a", "b"], ["models"]]
    assert FLOORS[2] == ["models"] and FLOORS[-1] == ["webapp.urls", "webapp.wsgi"]


def test_the_pair_count_finds_two_packages_that_import_each_other(tmp_path):
    for package, imported in (("runs", "tracking"), ("tracking", "runs"), ("alerts", "runs")):
        (tmp_path / "webapp" / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / "webapp" / package / f"to_{imported}.py").write_text(
            f"from webapp.{imported} import x\n"
        )
    assert two_way_pairs(package_arrows(tmp_path)) == {("webapp.runs", "webapp.tracking")}


def test_the_layer_check_fails_on_an_import_up_a_floor(tmp_path):
    """The check finds what it is for: a models module importing a page, named by its file."""
    (tmp_path / "webapp" / "runs").mkdir(parents=True)
    (tmp_path / "webapp" / "runs" / "models.py").write_text("from webapp.runs import views\n")
    (tmp_path / "webapp" / "runs" / "views.py").write_text("from webapp.metrics import x\n")
    (tmp_path / "webapp" / "metrics").mkdir()
    (tmp_path / "webapp" / "metrics" / "store.py").write_text("from webapp.alerts import radar\n")
    found = upward_imports(tmp_path)
    assert sorted(found) == ["webapp/metrics/store.py", "webapp/runs/models.py"]
    runs, models = floor_of()["webapp.runs"], floor_of()["models"]
    assert found["webapp/runs/models.py"] == [
        f"webapp.runs.views (webapp.runs, floor {runs} >= {models})"
    ]


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    for name, value in measure(target).items():
        print(f"{name}: {len(value) if isinstance(value, list) else value}")
        if isinstance(value, list):
            print("".join(f"  {line}\n" for line in value), end="")
    up = sum(map(len, upward_imports(target).values()))
    print(f"imports up a floor (FLOORS; the experiments app = models): {up}")
