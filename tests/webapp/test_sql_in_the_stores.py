"""SQL only in the stores: outside `webapp/metrics/` no web-app module opens a database
cursor or writes raw SQL through the ORM; a page, an API view or the MLflow store asks the
store's typed functions (`webapp.metrics`, `webapp.metrics.lookups`) and gets points or
models back. Read from the source, so a new module is covered the day it is added."""

import ast

from tests.helpers import ROOT

STORE = ROOT / "webapp" / "metrics"
RAW = {"cursor", "raw", "RawSQL", "extra"}  # connection.cursor(), Model.objects.raw(), …


def raw_sql_calls(source: str) -> list[str]:
    """The names of raw-SQL entry points a module calls or imports, with their lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in RAW:
                found.append(f"{node.func.attr}:{node.lineno}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [f"{a.name}:{node.lineno}" for a in node.names if a.name in RAW]
    return found


def test_only_the_stores_write_sql():
    outside = {}
    for path in sorted((ROOT / "webapp").rglob("*.py")):
        if STORE in path.parents or "migrations" in path.parts:
            continue
        if calls := raw_sql_calls(path.read_text()):
            outside[str(path.relative_to(ROOT))] = calls
    assert outside == {}, "move these into webapp/metrics/ behind a typed function"


def test_the_check_sees_a_cursor_a_raw_query_and_an_import():
    source = (
        "from django.db.models.expressions import RawSQL\n"
        "def f(connection, Model):\n"
        "    with connection.cursor() as c:\n"
        "        c.execute('SELECT 1')\n"
        "    return Model.objects.raw('SELECT 1')\n"
    )
    assert sorted(raw_sql_calls(source)) == ["RawSQL:1", "cursor:3", "raw:5"]


def test_the_stores_do_write_sql():
    # A moved store would otherwise leave the first check passing over nothing.
    assert any(raw_sql_calls(path.read_text()) for path in STORE.glob("*.py"))
