"""No product function longer than `LIMIT` lines, so each can be read in one sitting: a
longer one is split into named steps (the training loop into its phases, the update into
accumulation, tracking and the optimizer step). Measured from the source as the AST's
`end_lineno - lineno + 1` (decorators not counted, the docstring counted). Covers the
product: `trainer/`, `sandbox/`, `analysis/`, `webapp/`, `workers/` and `scripts/`; and the
benchmarks, `bench/`, whose results are only as good as code a reader can check (a bench's
`main` is its steps: parse the arguments, make the inputs, measure each side, summarise)."""

import ast

from tests.helpers import ROOT

LIMIT = 80
FOLDERS = ("trainer", "sandbox", "analysis", "webapp", "workers", "scripts", "bench")


def function_lengths(source: str) -> dict[str, int]:
    """Each function's (and method's, nested function's) length in lines, by `name:line`."""
    return {
        f"{node.name}:{node.lineno}": node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def too_long(folders: tuple[str, ...] = FOLDERS, limit: int = LIMIT) -> dict[str, int]:
    found = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for where, length in function_lengths(path.read_text()).items():
                if length > limit:
                    found[f"{path.relative_to(ROOT)}:{where}"] = length
    return found


def test_no_product_or_bench_function_is_longer_than_the_limit():
    assert too_long() == {}, f"split these into named steps (at most {LIMIT} lines each)"


def test_the_measure_counts_every_line_of_a_function_including_nested_ones():
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    nested = "    def inner():\n        return 1\n"
    source = f"def long():\n{body}\n{nested}\n\nclass A:\n    def short(self):\n        return 1\n"
    lengths = function_lengths(source)
    assert lengths == {"long:1": LIMIT + 3, f"inner:{LIMIT + 2}": 2, f"short:{LIMIT + 7}": 2}


def test_the_walk_reaches_every_folder_it_covers():
    # A renamed folder would otherwise leave the check passing over nothing.
    reached = {name.split("/")[0] for name in too_long(limit=20)}
    assert reached == set(FOLDERS)
