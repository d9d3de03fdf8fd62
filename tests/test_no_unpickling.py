"""Nothing the product reads is unpickled in full (docs/security.md): every `torch.load` in
`trainer/`, `sandbox/`, `analysis/`, `webapp/`, `workers/`, `scripts/`, `bench/` and
`vocabulary/` passes `weights_only=True`, none says `weights_only=False`, and no module but
the checkpoint reader (`trainer/safe_load.py`, whose unpickler takes an allowlist of classes)
calls pickle's loaders. Read from the source, so a new loader cannot slip past."""

import ast

import pytest

from tests.helpers import ROOT

FOLDERS = ("trainer", "sandbox", "analysis", "webapp", "workers", "scripts", "bench", "vocabulary")
ALLOWED_UNPICKLER = "trainer/safe_load.py"


def _call_name(node: ast.Call) -> str:
    func = node.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def unsafe_loads(source: str, where: str) -> list[str]:
    """Each unsafe load in `source`: a torch.load without weights_only=True, a
    weights_only=False anywhere, a pickle loader outside the checkpoint reader."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        keywords = {k.arg: k.value for k in node.keywords}
        flag = keywords.get("weights_only")
        if isinstance(flag, ast.Constant) and flag.value is False:
            found.append(f"{where}:{node.lineno} weights_only=False")
        elif name.endswith("torch.load"):
            if not (isinstance(flag, ast.Constant) and flag.value is True):
                found.append(f"{where}:{node.lineno} {name} without weights_only=True")
        if name.split(".")[-1] in ("loads", "load", "Unpickler") and "pickle" in name:
            if where != ALLOWED_UNPICKLER:
                found.append(f"{where}:{node.lineno} {name}")
    return found


def test_no_product_code_unpickles_what_it_reads():
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            found += unsafe_loads(path.read_text(), where)
    assert found == [], "load with weights_only=True (trainer/safe_load.py), never a full pickle"


@pytest.mark.parametrize(
    "source",
    [
        "torch.load(path, weights_only=False)",
        "torch.load(path)",
        "import pickle\npickle.load(handle)",
        "pickle.loads(blob)",
        "state = load_it(path, map_location='cpu', weights_only=False)",
    ],
)
def test_the_guard_sees_each_unsafe_load(source):
    assert unsafe_loads(source, "trainer/example.py") != []


def test_the_guard_lets_a_weights_only_load_through():
    assert unsafe_loads("torch.load(path, map_location='cpu', weights_only=True)", "x.py") == []
