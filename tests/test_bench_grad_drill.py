"""bench/grad_drill.py still runs (`--smoke`): the drill-down's cost against the same run
without it. Its numbers live in BENCHMARKS.md; here only the shape and what holds at any
size."""

import pytest

from tests.test_bench_smoke import run_smoke

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_the_drill_down_bench_times_both_sides():
    row = run_smoke("grad_drill.py")
    assert row["smoke"] is True and row["recorded_episodes_per_step"] == 2
    for side in ("off", "on"):
        assert 0 < row[f"median_update_seconds_{side}"] <= row[f"median_step_seconds_{side}"]
    assert row["step_ratio_on_off"] > 0
