"""Names that are a contract are written once, in `trainer/names.py`: read
from the source, no metric key of docs/design.md §5 that the pages and the analysis depend on
is spelled out anywhere else, no code builds a per-role, per-agent or per-policy key with an
f-string of its own, and no module writes the matrix's axes as a tuple. Tests may spell keys
(they check the contract's very strings); they may not spell the axes."""

import re
from pathlib import Path

from tests.helpers import ROOT
from trainer import names

VOCABULARY = Path("trainer/names.py")
PRODUCT = ("analysis", "bench", "sandbox", "scripts", "trainer", "webapp", "workers")
SUFFIXES = {".py", ".html", ".js"}

# A key as a string literal (or in a template's URL), not a mention in prose or a docstring.
KEY_LITERALS = re.compile(
    r"""["'](eval/accuracy|ckpt/best_step|ckpt/best_accuracy|train/frac_zero_std"""
    r"""|sandbox/verdict_disagreements)"""
    r"""|href="[^"]*eval/accuracy"""
)
KEY_FSTRINGS = re.compile(r"""\bf["'](role|agent|policy|grad_cos)/""")
AXES_TUPLE = re.compile(r"""["']workflow["'],\s*["']task["'],\s*["']model["'],\s*["']sharing["']""")
DEFINITIONS = re.compile(
    r"^\s*(ACCURACY_KEY|ACCURACY_SE_KEY|ZERO_STD_KEY|CELL_AXES|MATRIX_AXES|RADAR_KEYS)\s*=",
    re.M,
)


def files(folders) -> list[Path]:
    return [
        path
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in SUFFIXES and path.is_file() and ".venv" not in path.parts
    ]


def hits(pattern: re.Pattern, folders) -> list[str]:
    found = []
    for path in files(folders):
        rel = path.relative_to(ROOT)
        if rel == VOCABULARY:
            continue
        for line_no, line in enumerate(path.read_text().splitlines(), start=1):
            if pattern.search(line):
                found.append(f"{rel}:{line_no}: {line.strip()}")
    return found


def test_no_module_spells_a_contract_key_outside_the_vocabulary():
    assert hits(KEY_LITERALS, PRODUCT) == []


def test_no_module_builds_a_role_agent_or_policy_key_with_its_own_f_string():
    assert hits(KEY_FSTRINGS, PRODUCT) == []


def test_no_module_or_test_writes_the_matrix_axes_out():
    # Multi-line lists too: the pattern spans newlines once the file is read whole.
    found = [
        str(path.relative_to(ROOT))
        for path in files((*PRODUCT, "tests"))
        if path.relative_to(ROOT) != VOCABULARY and AXES_TUPLE.search(path.read_text())
    ]
    assert found == []


def test_each_name_is_defined_once():
    defined = {}
    for path in files((*PRODUCT, "tests")):
        for name in DEFINITIONS.findall(path.read_text()):
            defined.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert defined == {
        name: [str(VOCABULARY)]
        for name in (
            "ACCURACY_KEY",
            "ACCURACY_SE_KEY",
            "ZERO_STD_KEY",
            "CELL_AXES",
            "MATRIX_AXES",
            "RADAR_KEYS",
        )
    }


def test_the_patterns_catch_what_they_forbid():
    assert KEY_LITERALS.search('    yield "eval/accuracy", step, value')
    assert KEY_LITERALS.search('<a href="/dash/compare?runs=3&amp;key=eval/accuracy">')
    assert not KEY_LITERALS.search("    `eval/accuracy` is the held-out mean reward")
    assert KEY_FSTRINGS.search('    key = f"role/{role}/grad_norm"')
    assert AXES_TUPLE.search(
        'AXES = (\n    "workflow",\n    "task",\n    "model",\n    "sharing",\n)'
    )


def test_the_builders_make_the_design_names():
    assert names.role_key("generator", "grad_norm") == "role/generator/grad_norm"
    assert names.agent_key("generator0", "grad_norm") == "agent/generator0/grad_norm"
    assert names.policy_key("shared", "lr") == "policy/shared/lr"
    assert names.grad_cos_key("generator", "aggregator") == "grad_cos/generator|aggregator"
    assert names.role_accuracy_key("evaluator") == "eval/accuracy/evaluator"
    assert names.roles_in(["role/a/grad_norm", "role/b/entropy", "role/x", "train/kl"]) == [
        "a",
        "b",
    ]
    assert names.MATRIX_AXES == (*names.CELL_AXES, "seed")


def test_the_radar_reads_the_accuracy_the_zero_std_share_and_three_role_figures():
    read = [
        "eval/accuracy",
        "eval/accuracy_se",
        "train/frac_zero_std",
        "role/generator/grad_norm",
        "role/generator/grad_share",
        "role/generator/entropy",
    ]
    ignored = ["train/kl", "role/generator/kl", "policy/shared/grad_norm", "sys/step_seconds"]
    assert [names.radar_reads(k) for k in read] == [True] * len(read)
    assert [names.radar_reads(k) for k in ignored] == [False] * len(ignored)
