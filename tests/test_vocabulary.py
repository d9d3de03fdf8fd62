"""Names that are a contract are written once, in `vocabulary/names.py`, and product code writes
and reads them from there.

The guard reads the vocabulary itself: every whole key (each `*_KEY` string, each string of a
`*_KEYS` tuple), every metric name under a role, an agent or a policy (the `*_METRICS` tuples)
and every key prefix (`*_PREFIX`). Then it reads the product's source — Python, templates and
JavaScript — and fails on a quoted literal of any of them outside the vocabulary: a whole key
(or one below it, `eval/accuracy/<role>`, or in a URL, `key=eval/accuracy`), a key spelt out
under a prefix (`"role/solver/grad_norm"`), a prefix, an f-string that builds a key of its own
(`f"role/{role}/…"`, `f"train/{name}"`), and a metric name where it names a metric: passed to a
key builder (`role_key(role, "kl")`), listed among other metric names only, or a dict's value
where every value is one (the key-map's targets). Prose does not count: docstrings and comments
are skipped. A metric name such as `kl` or `lr` is also an ordinary word (a config field, a
loss's own statistics), so outside those places it is left alone; a whole key never is.

Tests may spell keys (they check the contract's very strings); they may not spell the axes.
`python -m tests.test_vocabulary [root]` prints every literal the guard finds under `root`: how
the before/after counts of this change were measured.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.helpers import ROOT
from vocabulary import names

VOCABULARY = Path("vocabulary/names.py")
PRODUCT = ("analysis", "bench", "sandbox", "scripts", "trainer", "vocabulary", "webapp", "workers")
SUFFIXES = {".py", ".html", ".js"}


# --- what the vocabulary declares -----------------------------------------------------------------


def constants(module=names) -> dict[str, object]:
    return {name: value for name, value in vars(module).items() if name.isupper()}


def vocabulary_keys(module=names) -> set[str]:
    """Every whole metric key the vocabulary declares."""
    keys = set()
    for name, value in constants(module).items():
        if name.endswith("_KEY"):
            keys.add(value)
        elif name.endswith("_KEYS"):
            keys.update(value)
    return keys


def vocabulary_metrics(module=names) -> set[str]:
    """Every metric name under a role, an agent or a policy."""
    return {
        m for name, value in constants(module).items() if name.endswith("_METRICS") for m in value
    }


def vocabulary_modes(module=names) -> set[str]:
    """The config's mode values that code compares against: sharing modes, reward modes."""
    return {
        m for name, value in constants(module).items() if name.endswith("_MODES") for m in value
    }


def vocabulary_prefixes(module=names) -> set[str]:
    """The prefixes of the built keys (`role/`) and the namespaces of the whole ones (`train/`)."""
    built = {value for name, value in constants(module).items() if name.endswith("_PREFIX")}
    return built | {key.split("/")[0] + "/" for key in vocabulary_keys(module)}


# --- reading the product's source ---------------------------------------------------------------


class Terms:
    """The vocabulary's strings, and the tests a literal is put to."""

    def __init__(self, module=names):
        self.keys = vocabulary_keys(module)
        self.metrics = vocabulary_metrics(module)
        self.prefixes = vocabulary_prefixes(module)
        self.built = {v for n, v in constants(module).items() if n.endswith("_PREFIX")}
        alternatives = "|".join(re.escape(k) for k in sorted(self.keys, key=len, reverse=True))
        self.key_in_text = re.compile(rf"(?:^|[=?&])(?:{alternatives})(?:$|[/&#])")

    def spells_a_key(self, text: str) -> bool:
        """A whole key, a key below one, one in a URL, or a key spelt out under a prefix."""
        return bool(self.key_in_text.search(text)) or any(
            text.startswith(prefix) for prefix in self.built
        )

    def starts_a_key(self, text: str) -> bool:
        """The opening of an f-string that builds a key of its own: a namespace or prefix and
        then the name (`f"train/{name}"`), or anything under a built prefix. (A benchmark's
        made-up keys, `f"train/k{i}"`, name nothing of the vocabulary.)"""
        return text in self.prefixes or any(text.startswith(prefix) for prefix in self.built)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _metric_positions(tree: ast.AST, metrics: set[str]) -> set[int]:
    """The string constants that stand where a metric name goes: a key builder's argument, or
    one of a collection (or a dict's values) made of metric names only."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else None
            callee = node.func.id if isinstance(node.func, ast.Name) else callee
            if callee and callee.endswith("_key"):
                found.update(id(arg) for arg in node.args if _is_str(arg))
        else:
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                group = node.elts
            elif isinstance(node, ast.Dict):
                group = node.values
            else:
                continue
            if group and all(_is_str(e) and e.value in metrics for e in group):
                found.update(id(e) for e in group)
    return found


def _prefix_constant(part: ast.AST | None) -> str | None:
    """The name of a vocabulary prefix that opens an f-string (`f"{GRAD_COS_PREFIX}{pair}"`):
    a key built by hand around the builder, which would fix the pair order or the separator."""
    if isinstance(part, ast.FormattedValue):
        value = part.value
        name = value.id if isinstance(value, ast.Name) else getattr(value, "attr", None)
        if name and name.endswith("_PREFIX"):
            return name
    return None


def python_hits(source: str, terms: Terms) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    prose = _docstrings(tree)
    metric_slots = _metric_positions(tree, terms.metrics)
    in_fstring = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            if first is not None and _is_str(first) and terms.starts_a_key(first.value):
                hits.append((node.lineno, f'f"{first.value}…"'))
            elif (prefix := _prefix_constant(first)) is not None:
                hits.append((node.lineno, f'f"{{{prefix}}}…"'))
        elif _is_str(node) and id(node) not in prose and id(node) not in in_fstring:
            text = node.value
            if terms.spells_a_key(text) or (text in terms.metrics and id(node) in metric_slots):
                hits.append((node.lineno, repr(text)))
    return sorted(hits)


QUOTED = re.compile(r"""(["'])((?:(?!\1).)*)\1""")


def markup_hits(source: str, terms: Terms) -> list[tuple[int, str]]:
    """Templates and scripts: each quoted string on a line (an attribute, a JS string)."""
    return [
        (line_no, repr(found[2]))
        for line_no, line in enumerate(source.splitlines(), start=1)
        for found in QUOTED.finditer(line)
        if terms.spells_a_key(found[2])
    ]


def files(root: Path, folders) -> list[Path]:
    return [
        path
        for folder in folders
        for path in sorted((root / folder).rglob("*"))
        if path.suffix in SUFFIXES and path.is_file() and ".venv" not in path.parts
    ]


def literals(root: Path = ROOT, folders=PRODUCT, terms: Terms | None = None) -> list[str]:
    """Every literal of the vocabulary under `folders`, outside the vocabulary module."""
    terms = terms or Terms()
    found = []
    for path in files(root, folders):
        rel = path.relative_to(root)
        if rel in (VOCABULARY, Path("trainer/names.py")):  # its home, before and after the move
            continue
        text = path.read_text()
        hits = python_hits(text, terms) if path.suffix == ".py" else markup_hits(text, terms)
        found.extend(f"{rel}:{line_no}: {literal}" for line_no, literal in hits)
    return found


# --- the guard ------------------------------------------------------------------------------------


def test_no_product_module_spells_a_name_of_the_vocabulary():
    assert literals() == []


def test_the_vocabulary_declares_only_keys_metric_names_prefixes_axes_and_labels():
    # A constant outside these shapes would escape the guard, which reads names by their shape.
    shapes = {
        name: type(value).__name__
        for name, value in constants().items()
        if not (
            (name.endswith(("_KEY", "_PREFIX")) and isinstance(value, str))
            or (
                name.endswith(("_KEYS", "_METRICS", "_AXES", "_COUNTS", "_KINDS"))
                and isinstance(value, tuple)
            )
            or (isinstance(value, str) and value in vocabulary_metrics())
            or (name.endswith("_MODES") and isinstance(value, tuple))
            or (isinstance(value, str) and value in vocabulary_modes())
            or name == "BEHAVIOURS"
        )
    }
    assert shapes == {}
    assert set(names.BEHAVIOUR_COUNTS) <= set(names.BEHAVIOUR_KEYS)
    assert names.ROLE_PREFIX in vocabulary_prefixes() and "train/" in vocabulary_prefixes()


def test_the_guard_finds_a_planted_literal_and_leaves_prose_alone(tmp_path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "planted.py").write_text(
        '"""Logs `train/loss` and role/<role>/kl (prose)."""\n'
        "# a comment naming 'train/loss'\n"
        'out = {"train/loss": 1.0}\n'
        'out[role_key(role, "kl")] = 2.0\n'
        'ROLE_KEYS = ("grad_norm", "entropy")\n'
        'MAP = {"pg_clipfrac": "clip_frac"}\n'
        'WATCHED = ["role/solver/grad_norm", "eval/accuracy/generator"]\n'
        'key = f"train/{name}"\n'
        'cos = f"{GRAD_COS_PREFIX}{pair}"\n'
        'config = {"lr": 1e-5, "kl": None}\n'
        "def f():\n"
        '    """The `sys/step_seconds` of a step."""\n'
        '    return key.startswith("agent/")\n'
    )
    (tmp_path / "webapp").mkdir()
    (tmp_path / "webapp" / "page.html").write_text(
        '<a href="/dash/compare?runs=3&amp;key=eval/accuracy">compare</a>\n'
        "<p>The eval/accuracy of the run (prose).</p>\n"
    )
    (tmp_path / "webapp" / "page.js").write_text('var k = "behav/voter_agreement";\n')
    found = literals(tmp_path, ("trainer", "webapp"))
    assert found == [
        "trainer/planted.py:3: 'train/loss'",
        "trainer/planted.py:4: 'kl'",
        "trainer/planted.py:5: 'entropy'",
        "trainer/planted.py:5: 'grad_norm'",
        "trainer/planted.py:6: 'clip_frac'",
        "trainer/planted.py:7: 'eval/accuracy/generator'",
        "trainer/planted.py:7: 'role/solver/grad_norm'",
        'trainer/planted.py:8: f"train/…"',
        'trainer/planted.py:9: f"{GRAD_COS_PREFIX}…"',
        "trainer/planted.py:13: 'agent/'",
        "webapp/page.html:1: '/dash/compare?runs=3&amp;key=eval/accuracy'",
        "webapp/page.js:1: 'behav/voter_agreement'",
    ]


def test_the_guard_reaches_every_product_folder_and_kind_of_file():
    scanned = files(ROOT, PRODUCT)
    assert {path.relative_to(ROOT).parts[0] for path in scanned} == set(PRODUCT)
    assert {path.suffix for path in scanned} == SUFFIXES
    assert ROOT / VOCABULARY in scanned  # read, then skipped as the vocabulary's own home


def test_the_design_lists_every_behaviour_metric():
    design = (ROOT / "docs" / "design.md").read_text()
    assert [key for key in names.BEHAVIOUR_KEYS if f"| `{key}` |" not in design] == []


def mode_literals(root: Path = ROOT, folders=PRODUCT) -> list[str]:
    """Every string constant in product Python that spells a sharing or reward mode
    (`run.sharing == "shared"`), outside the vocabulary; docstrings are prose."""
    modes = vocabulary_modes()
    found = []
    for path in files(root, folders):
        rel = path.relative_to(root)
        if path.suffix != ".py" or rel == VOCABULARY:
            continue
        tree = ast.parse(path.read_text())
        prose = _docstrings(tree)
        found.extend(
            f"{rel}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if _is_str(node) and node.value in modes and id(node) not in prose
        )
    return sorted(found)


def test_no_product_module_spells_a_sharing_or_reward_mode():
    assert mode_literals() == []


def test_the_mode_guard_finds_a_planted_mode(tmp_path):
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "planted.py").write_text(
        '"""Capture is looked for under "shared" (prose)."""\n'
        'if run.sharing == "shared" or config.reward_mode == "per_role":\n'
        '    COLOURS = {"per_agent": "#fff"}\n'
        'folder = "shared/"\n'
    )
    assert mode_literals(tmp_path, ("analysis",)) == [
        "analysis/planted.py:2: 'per_role'",
        "analysis/planted.py:2: 'shared'",
        "analysis/planted.py:3: 'per_agent'",
    ]


def test_every_alert_kind_the_radar_raises_is_in_the_vocabulary():
    from analysis.radar import NON_FINITE_KINDS

    tree = ast.parse((ROOT / "analysis" / "radar.py").read_text())
    raised = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "_event"
        and node.args
        and _is_str(node.args[0])
    }
    assert raised and raised <= set(names.ALERT_KINDS)
    assert set(NON_FINITE_KINDS.values()) <= set(names.ALERT_KINDS)


def test_no_script_or_template_lists_the_alert_kinds_again():
    # The experiment page's script ranks by the list the page hands it (data-radar-severity).
    spelled = [
        str(path.relative_to(ROOT))
        for path in files(ROOT, ("webapp",))
        if path.suffix in (".js", ".html") and '"entropy_collapse"' in path.read_text()
    ]
    assert spelled == []


# --- the axes, the definitions, the builders ----------------------------------------------------

AXES_TUPLE = re.compile(r"""["']workflow["'],\s*["']task["'],\s*["']model["'],\s*["']sharing["']""")
DEFINED = [n for n in constants() if n.endswith(("_KEY", "_KEYS", "_AXES", "_METRICS", "_PREFIX"))]
DEFINITIONS = re.compile(rf"^\s*({'|'.join(DEFINED)})\s*=", re.M)


def test_no_module_or_test_writes_the_matrix_axes_out():
    # Multi-line lists too: the pattern spans newlines once the file is read whole.
    found = [
        str(path.relative_to(ROOT))
        for path in files(ROOT, (*PRODUCT, "tests"))
        if path.relative_to(ROOT) != VOCABULARY and AXES_TUPLE.search(path.read_text())
    ]
    assert found == []


def test_each_name_is_defined_once():
    defined = {}
    for path in files(ROOT, (*PRODUCT, "tests")):
        for name in DEFINITIONS.findall(path.read_text()):
            defined.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert defined == {name: [str(VOCABULARY)] for name in DEFINED}


def test_the_axes_pattern_catches_a_tuple_over_several_lines():
    assert AXES_TUPLE.search(
        'AXES = (\n    "workflow",\n    "task",\n    "model",\n    "sharing",\n)'
    )


def test_the_builders_make_the_design_names():
    assert names.role_key("generator", names.GRAD_NORM) == "role/generator/grad_norm"
    assert names.agent_key("generator0", names.GRAD_NORM) == "agent/generator0/grad_norm"
    assert names.policy_key("shared", names.LR) == "policy/shared/lr"
    # One key per pair, whichever order a writer meets the two in.
    assert names.grad_cos_key("generator", "aggregator") == "grad_cos/aggregator|generator"
    assert names.grad_cos_key("aggregator", "generator") == "grad_cos/aggregator|generator"
    assert names.role_accuracy_key("evaluator") == "eval/accuracy/evaluator"
    assert names.roles_in(["role/a/grad_norm", "role/b/entropy", "role/x", "train/kl"]) == [
        "a",
        "b",
    ]
    assert names.MATRIX_AXES == (*names.CELL_AXES, "seed")


def test_the_keys_are_the_designs():
    # The stored names are a contract (docs/design.md §5): moving them must not change a byte.
    # (The behaviour keys are spelt by their own tests, tests/trainer/test_behaviour.py.)
    assert (names.LOSS_KEY, names.KL_KEY, names.ENTROPY_KEY, names.CLIP_FRAC_KEY) == (
        "train/loss",
        "train/kl",
        "train/entropy",
        "train/clip_frac",
    )
    assert names.ROLE_METRICS == (
        "grad_norm",
        "grad_share",
        "entropy",
        "kl",
        "tokens",
        "resp_len",
        "opt_steps",
        "pg_loss",
        "clip_frac",
        "coherence_scale",
        "coherence_cos",
        "trunc_frac",
        "verdict_disagreement_rate",
    )
    assert names.POLICY_METRICS == ("grad_norm", "lr", "skipped")
    design = (ROOT / "docs" / "design.md").read_text()
    assert [key for key in sorted(vocabulary_keys()) if f"`{key}`" not in design] == []


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


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    found = literals(root)
    print("\n".join(found))
    print(f"{len(found)} literals in {len({hit.split(':')[0] for hit in found})} files")
