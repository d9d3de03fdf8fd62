"""Template tags only format or render: a tag module reads no table and no metric itself; what
a tag shows is built by a plain module of its app (`webapp/alerts/panels.py`,
`webapp/attribution/panel.py`, …), which views and tests can call directly."""

import ast

from tests.helpers import ROOT

READS = ("models", "webapp.metrics")  # an app's models module, or the metric store


def reads_of(path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.endswith(".models") or node.module.startswith("webapp.metrics"):
                found.append(node.module)
        elif isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append(".objects")
    return found


def test_no_template_tag_module_reads_the_database():
    tags = sorted((ROOT / "webapp").glob("*/templatetags/*.py"))
    assert tags
    reading = {str(p.relative_to(ROOT)): reads_of(p) for p in tags if reads_of(p)}
    assert reading == {}


def test_the_guard_sees_a_planted_query(tmp_path):
    planted = tmp_path / "radar.py"
    planted.write_text(
        "from webapp.experiments.models import Alert\n"
        "from webapp.metrics import read_series\n"
        "def tag(run):\n    return Alert.objects.filter(run=run)\n"
    )
    assert reads_of(planted) == ["webapp.experiments.models", "webapp.metrics", ".objects"]
