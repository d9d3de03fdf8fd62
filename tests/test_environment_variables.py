"""Every environment variable the code reads is documented, and every documented one is read.

The variables come from the source, never from a hand-kept list:

- Python: `os.environ.get(NAME)`, `os.environ[NAME]`, `os.getenv(NAME)`, `NAME in os.environ`,
  and `setdefault(NAME, …)` on the environment or on the copy a child process gets (a value a
  person set stays in force, so it is read all the same); NAME is a literal or a module
  constant (`GPUS_ENV = "TROUPE_WORKER_GPUS"`). A function that passes one of its parameters on
  as the name is a reader too (`webapp/env.py`'s `env_int`, the trainer's `_timeout`), and so
  are calls of it: the scan finds such readers itself.
- `docker-compose.yml`'s `${NAME}` and the Makefile's `NAME ?=` and `$(NAME)`.

The product's variables (manage.py, webapp/, trainer/, workers/, sandbox/, analysis/,
scripts/, the compose file and the Makefile) must each be a row of docs/configuration.md's table
and a line of .env.example (`NAME=`, or `# NAME=` for another tool's variable, where empty is
not unset), except the few a launcher sets (LAUNCHER_SET). The other way round, every name
listed must be read by the product, the tests or the benchmarks: the tests' own switch,
`TROUPE_REQUIRE_SERVICES`, is read in tests/.

No imports of the project: the AST of the working tree.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("webapp", "trainer", "workers", "sandbox", "analysis", "scripts")
ELSEWHERE = ("tests", "bench")  # read here too: a documented name read only here still counts
TABLE = ROOT / "docs" / "configuration.md"
ENV_EXAMPLE = ROOT / ".env.example"
NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")

# Read by the product, but set by a launcher and never by a person: documented in words in
# docs/configuration.md, not as settings.
LAUNCHER_SET = {
    "RANK": "torchrun, or the worker for its child ranks (workers/ranks.py)",
    "LOCAL_RANK": "torchrun, or the worker for its child ranks",
    "WORLD_SIZE": "torchrun (trainer/distributed.py reads how many ranks it started)",
    "TROUPE_RANK_PARENT": "the worker, for its child ranks: their parent's pid",
    "DJANGO_SETTINGS_MODULE": "every entry point sets webapp.settings",
}
# Product code that reads the environment under a name it computes: the file and why.
DYNAMIC_READS = {
    "workers/ranks.py": "keeps the rendezvous variables it sets for the child ranks, to restore",
}


def python_files(folders: tuple[str, ...]) -> list[Path]:
    files = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    return files + ([ROOT / "manage.py"] if folders == PRODUCT else [])


@functools.cache
def scan(folders: tuple[str, ...]) -> tuple[dict[str, set[str]], list[str]]:
    """python_reads over the folders' files, once a session."""
    return python_reads(python_files(folders))


def is_environment(node: ast.AST) -> bool:
    """`os.environ`, or a name that holds an environment (`environ`, a child's `env`)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id in ("environ", "env")


def module_constants(tree: ast.Module) -> dict[str, str]:
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    constants[target.id] = node.value.value
    return constants


def name_argument(node: ast.AST, readers: set[str]) -> ast.AST | None:
    """The expression naming the variable, if `node` reads the environment."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in ("get", "setdefault") and is_environment(func.value):
                return node.args[0]
            if func.attr == "getenv" or func.attr in readers:
                return node.args[0]
        if isinstance(func, ast.Name) and func.id in readers:
            return node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return node.slice if is_environment(node.value) else None
    if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
        return node.left if is_environment(node.comparators[0]) else None
    return None


Function = ast.FunctionDef | ast.AsyncFunctionDef


def sites(tree: ast.Module) -> list[tuple[ast.AST, Function | None]]:
    """Every call, subscript and comparison, with the function it is in (innermost)."""
    found = []

    def visit(node: ast.AST, function: Function | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Call, ast.Subscript, ast.Compare)):
                found.append((child, function))
            visit(child, child if isinstance(child, Function) else function)

    visit(tree, None)
    return found


def parameters(function: Function) -> set[str]:
    return {a.arg for a in (*function.args.posonlyargs, *function.args.args)}


def passes_a_parameter_on(node: ast.AST, function: Function | None, readers: set[str]) -> bool:
    arg = name_argument(node, readers)
    return function is not None and isinstance(arg, ast.Name) and arg.id in parameters(function)


def find_readers(all_sites: list[tuple[ast.AST, Function | None]]) -> set[str]:
    """Functions that read the variable one of their parameters names, to a fixed point."""
    readers: set[str] = set()
    while True:
        found = {f.name for node, f in all_sites if passes_a_parameter_on(node, f, readers)}
        if found <= readers:
            return readers
        readers |= found


def python_reads(files: list[Path]) -> tuple[dict[str, set[str]], list[str]]:
    """{variable: files reading it}, and the reads whose name the scan cannot tell."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in files}
    by_file = {path: sites(tree) for path, tree in trees.items()}
    readers = find_readers([site for found in by_file.values() for site in found])
    reads: dict[str, set[str]] = {}
    unknown = []
    for path, found in by_file.items():
        constants = module_constants(trees[path])
        rel = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name)
        for node, function in found:
            arg = name_argument(node, readers)
            if arg is None or passes_a_parameter_on(node, function, readers):
                continue  # not a read, or a reader's own: its callers name the variable
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                name = arg.value
            elif isinstance(arg, ast.Name) and arg.id in constants:
                name = constants[arg.id]
            else:
                unknown.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
                continue
            if NAME.match(name):
                reads.setdefault(name, set()).add(rel)
    return reads, unknown


def compose_variables() -> set[str]:
    return set(re.findall(r"\$\{(\w+)", (ROOT / "docker-compose.yml").read_text()))


MAKE_BUILTINS = {"CURDIR", "MAKE", "MAKEFLAGS", "MAKECMDGOALS"}


def make_variables() -> set[str]:
    """The Makefile's variables a person may set: `NAME ?=` and `$(NAME)` it never assigns."""
    text = (ROOT / "Makefile").read_text()
    defaults = set(re.findall(r"^(?:[\w-]+: )?(?:export )?(\w+) \?=", text, re.M))
    assigned = set(re.findall(r"^(\w+) :?=", text, re.M))
    used = {n for n in re.findall(r"\$\((\w+)\)", text) if NAME.match(n)}
    return defaults | (used - assigned - MAKE_BUILTINS)


def product_variables() -> dict[str, set[str]]:
    reads = {name: set(files) for name, files in scan(PRODUCT)[0].items()}
    for name in compose_variables():
        reads.setdefault(name, set()).add("docker-compose.yml")
    for name in make_variables():
        reads.setdefault(name, set()).add("Makefile")
    return reads


def table_variables() -> set[str]:
    return set(re.findall(r"^\| `(\w+)` \|", TABLE.read_text(), re.M))


def env_example_variables() -> set[str]:
    return set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=\S*$", ENV_EXAMPLE.read_text(), re.M))


def test_the_scan_finds_every_way_of_reading():
    reads = product_variables()
    assert "TROUPE_LOGIN_MAX_FAILURES" in reads  # env_int, a reader of webapp/env.py
    assert "TROUPE_WORKER_GPUS" in reads  # a module constant: GPUS_ENV
    assert "TROUPE_DIST_SLOW_TIMEOUT" in reads  # a local reader, a constant's name
    assert "TROUPE_VLLM_START_TIMEOUT" in reads  # the vLLM engine's _timeout
    assert "TROUPE_OFFLINE" in reads  # trainer/offline.py's _truthy
    assert "TROUPE_GPU_MEMORY_GB" in reads  # os.environ.get and `in os.environ`
    assert "TROUPE_SANDBOX_MIN_ISOLATION" in reads  # environ.get(CONSTANT) on a parameter
    assert "VLLM_CPU_KVCACHE_SPACE" in reads  # setdefault on a child's environment
    assert {"POSTGRES_PASSWORD", "PORT"} <= reads.keys()  # docker-compose.yml
    assert {"VENV", "VLLM_VENV", "PYTEST_ARGS"} <= reads.keys()  # the Makefile


def test_the_scan_reads_literals_constants_and_readers(tmp_path):
    path = tmp_path / "example.py"
    path.write_text(
        'import os\nFOO_ENV = "FOO"\n'
        "def _seconds(env, default):\n    return float(os.environ.get(env, default))\n"
        'def main(environ):\n    _seconds("BAR", 1)\n    os.getenv(FOO_ENV)\n'
        '    environ["BAZ"]\n    "QUX" in os.environ\n    os.environ.get(computed())\n'
    )
    reads, unknown = python_reads([path])
    assert set(reads) == {"FOO", "BAR", "BAZ", "QUX"}
    assert unknown == ["example.py:10: os.environ.get(computed())"]


def test_the_product_reads_no_variable_it_does_not_name():
    _, unknown = scan(PRODUCT)
    unexplained = [u for u in unknown if u.split(":")[0] not in DYNAMIC_READS]
    assert not unexplained, (
        "reads whose variable the scan cannot name (use a literal or a module constant):\n"
        + "\n".join(unexplained)
    )


def test_every_variable_the_product_reads_is_in_the_table_and_env_example():
    reads = product_variables()
    settings = {name: files for name, files in reads.items() if name not in LAUNCHER_SET}
    for listed, where in (
        (table_variables(), TABLE.name),
        (env_example_variables(), ".env.example"),
    ):
        missing = [
            f"{n} (read in {', '.join(sorted(settings[n]))})"
            for n in sorted(settings)
            if n not in listed
        ]
        assert not missing, f"{where} leaves out:\n" + "\n".join(missing)


def test_every_listed_variable_is_read():
    read = set(product_variables())
    read |= set(scan(ELSEWHERE)[0])
    for listed, where in (
        (table_variables(), TABLE.name),
        (env_example_variables(), ".env.example"),
    ):
        unread = sorted(listed - read)
        assert not unread, f"{where} lists variables nothing reads: {', '.join(unread)}"
    assert not (table_variables() | env_example_variables()) & LAUNCHER_SET.keys()


def test_the_launchers_variables_are_still_read():
    # A name that left the code leaves this list too, or the exception outlives its reason.
    assert LAUNCHER_SET.keys() <= product_variables().keys()
    assert all((ROOT / path).exists() for path in DYNAMIC_READS)


def test_the_table_names_what_compose_passes_on():
    text = " ".join(TABLE.read_text().split())
    sentence = text.split("only the variables `docker-compose.yml` names, `${NAME}`: ", 1)[1]
    named = set(re.findall(r"`(\w+)`", sentence.split(";", 1)[0]))
    assert named == compose_variables()
