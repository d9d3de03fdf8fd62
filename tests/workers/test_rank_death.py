"""How rank 0 tells a dead child rank from its own failure (workers/ranks.py): a killed
child's sockets close before its parent can reap it, so the check waits a moment for the
exit status instead of reading it once."""

import subprocess
import sys
from pathlib import Path

from workers.ranks import _a_dead_child


def child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_child_that_dies_during_the_grace_is_found(tmp_path: Path):
    # Still running when the check starts: a single poll() would call it alive.
    dying = child("import time, os; time.sleep(1.0); os._exit(3)")
    assert dying.poll() is None
    found = _a_dead_child([(1, dying, tmp_path / "rank-1.log")], grace=60)
    assert found == (1, 3, tmp_path / "rank-1.log")


def test_children_still_running_after_the_grace_are_not_dead(tmp_path: Path):
    running = child("import time; time.sleep(60)")
    finished = child("pass")
    finished.wait()
    try:
        children = [(1, running, tmp_path / "a"), (2, finished, tmp_path / "b")]
        assert _a_dead_child(children, grace=0.3) is None  # a clean exit (0) is not a death
    finally:
        running.kill()
        running.wait()
