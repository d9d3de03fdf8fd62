"""One write path for metric points: every writer stores points through
`webapp.alerts.points.record_points`, which tells the live radar, so no writer can store points
the radar never hears of. Read from the source (the web app and the workers), so a new writer
is covered the day it is added; benches that time the store alone are not writers."""

import ast
from pathlib import Path

from django.test import TestCase

from tests.helpers import ROOT
from webapp.alerts import points as one_path
from webapp.experiments.models import Experiment, MetricPoint, Run

LOW_LEVEL = {"write_points", "after_points"}  # the store's write, the radar's hook
ALLOWED = {
    ROOT / "webapp" / "alerts" / "points.py",  # the one path
    ROOT / "webapp" / "alerts" / "radar.py",  # the hook's home
}
ALLOWED_FOLDERS = (ROOT / "webapp" / "metrics",)  # the store's home


def low_level_uses(source: str) -> list[str]:
    """The names of the store's write or the radar's hook a module imports or calls, with lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [f"{a.name}:{node.lineno}" for a in node.names if a.name in LOW_LEVEL]
        elif isinstance(node, ast.Attribute) and node.attr in LOW_LEVEL:
            found.append(f"{node.attr}:{node.lineno}")
    return found


def writers() -> list[Path]:
    files = [*(ROOT / "webapp").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]
    return sorted(
        path
        for path in files
        if path not in ALLOWED and not any(folder in path.parents for folder in ALLOWED_FOLDERS)
    )


def test_no_writer_stores_points_but_through_the_one_path():
    bypassing = {
        str(path.relative_to(ROOT)): uses
        for path in writers()
        if (uses := low_level_uses(path.read_text()))
    }
    assert bypassing == {}, "store points with webapp.alerts.points.record_points"


def test_the_check_sees_an_import_and_a_call_through_a_module():
    source = (
        "from webapp.metrics import write_points\n"
        "from webapp import alerts\n"
        "def f(run_id):\n"
        "    alerts.radar.after_points(run_id, {'eval/accuracy'})\n"
    )
    assert low_level_uses(source) == ["write_points:1", "after_points:4"]
    assert low_level_uses("from webapp.alerts.points import record_points\n") == []


class RecordPointsTests(TestCase):
    def test_it_stores_the_points_and_asks_the_radar_once_they_commit(self):
        from django.contrib.auth import get_user_model

        owner = get_user_model().objects.create_user("writer")
        experiment = Experiment.objects.create(owner=owner, name="one path")
        run = Run.objects.create(experiment=experiment, name="r", external=True)
        with self.captureOnCommitCallbacks() as callbacks:
            written = one_path.record_points(run.id, [("eval/accuracy", 1, 0.5), ("x", 1, 2.0)])
        assert written == 2
        assert MetricPoint.objects.filter(run=run).count() == 2
        assert len(callbacks) == 1  # the radar's evaluation, asked for after the commit

    def test_points_no_radar_key_touches_ask_for_nothing(self):
        from django.contrib.auth import get_user_model

        owner = get_user_model().objects.create_user("writer")
        experiment = Experiment.objects.create(owner=owner, name="one path")
        run = Run.objects.create(experiment=experiment, name="r", external=True)
        with self.captureOnCommitCallbacks() as callbacks:
            assert one_path.record_points(run.id, [("system/cpu", 1, 5.0)]) == 1
            assert one_path.record_points(run.id, []) == 0
        assert callbacks == []
