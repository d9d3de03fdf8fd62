"""The comparison benchmarks in bench/ still run: each on a tiny workload (`--smoke`).

Benchmarks are not tests — their numbers live in BENCHMARKS.md — but a script that stopped
running should be found by CI, not on the day someone wants the numbers. Each script runs as
a user runs it (a subprocess, `--smoke --json`) and its one JSON line is checked for shape and
for the properties that hold at any size (Troupe stores no duplicate on replay).
"""

import json
import os
import subprocess
import sys

import pytest

from bench.common import mlflow_available
from tests.helpers import ROOT

pytestmark = pytest.mark.slow

MLFLOW_PYTHON = os.environ.get("MLFLOW_PYTHON", "/tmp/mlflow-venv/bin/python")


def run_script(script: str, *args: str, timeout: int = 240) -> str:
    """Run bench/<script> with `args` as a user would; its standard output."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def run_smoke(script: str, *args: str, timeout: int = 240) -> dict:
    return last_json(run_script(script, "--smoke", "--json", *args, timeout=timeout))


@pytest.mark.timeout(300)
def test_trl_step_times_both_trainers_on_the_same_batch():
    row = run_smoke("trl_step.py")
    for side in ("troupe", "trl"):
        assert row[side]["tokens"] > 0
        assert 0 < row[side]["update_s"] <= row[side]["step_s"]
    assert row["ratio_step_per_token"] > 0
    assert row["smoke"] is True


@pytest.mark.timeout(300)
def test_tracking_runs_troupes_side_alone_without_mlflow(postgres_url):
    row = run_smoke("tracking_vs_mlflow.py", "--postgres", postgres_url, "--without-mlflow")
    assert "MLflow is not available" in row["note"]
    assert "mlflow" not in row
    troupe = row["troupe"]
    assert troupe["points_per_s"] > 0
    assert troupe["replay"]["after_identical_replays"] == troupe["replay"]["expected"]


@pytest.mark.timeout(300)
def test_tracking_compares_with_mlflow_where_it_is_installed(postgres_url):
    if not mlflow_available(MLFLOW_PYTHON):  # its venv, with mlflow and psycopg2
        pytest.skip(f"no MLflow venv at {MLFLOW_PYTHON} (see bench/tracking_vs_mlflow.py)")
    row = run_smoke("tracking_vs_mlflow.py", "--postgres", postgres_url)
    assert row["mlflow"]["points_per_s"] > 0
    assert row["mlflow"]["compare_points"] == row["troupe"]["compare_points"]
    assert set(row["ratios"]) >= {"ingestion (troupe / mlflow points/s)"}
    assert row["troupe"]["replay"]["after_identical_replays"] == row["troupe"]["replay"]["expected"]


@pytest.mark.timeout(300)
def test_scaling_measures_every_size(postgres_url):
    summary = run_smoke("scaling.py", "--postgres", postgres_url)
    assert [row["runs"] for row in summary["sizes"]] == [2, 4]
    for row in summary["sizes"]:
        assert row["ingest_points_per_s"] > 0
        assert row["compare_s"] > 0
        assert row["compare_one_request_s"] > 0
        assert row["matrix_cold_s"] > 0
        assert row["cells"] >= 1


@pytest.mark.timeout(400)
def test_cpu_demo_matrix_splits_each_runs_time_from_queue_to_finish(postgres_url, redis_url):
    summary = run_smoke(
        "cpu_demo_matrix.py", "--postgres", postgres_url, "--redis", redis_url, timeout=360
    )
    assert summary["runs"] == summary["succeeded"] == 2
    for row in summary["per_run"]:
        assert row["wall_s"] > 0
        assert row["rollout_s"] > 0 and row["update_s"] > 0 and row["evaluation_s"] > 0
        assert row["database_s"] > 0  # every step's sys/db_seconds reached the database
        assert row["other_s"] > 0  # start-up: torch and the model load outside any step
    # One worker, one run at a time: the runs' own wall times fit inside the matrix's.
    assert summary["parts_s"]["between runs"] >= 0
    assert summary["wall_s"] <= summary["client_wall_s"] + 1


@pytest.mark.timeout(300)
def test_decode_step_times_the_sampler_against_generate():
    row = run_smoke("decode_step.py")
    assert row["tokens_per_s"]["troupe"] > 0 and row["tokens_per_s"]["hf_generate"] > 0
    # 8 tokens: one look at `done` (before step 16) would be the only read; none is reached
    assert row["host_reads_per_token"]["troupe"] == 0
    assert row["host_reads_per_token"]["hf_generate"] >= 1  # generate syncs every token


@pytest.mark.timeout(300)
def test_rollout_batching_makes_fewer_generate_calls_for_the_same_turns():
    row = last_json(
        run_script("rollout.py", "--problems", "2", "--samples", "2", "--repeats", "1", "--json")
    )
    assert row["calls_per_turn"] == row["sequences"] == 2 * 2 * 4  # voting: 3 voters + 1
    assert row["calls_batched"] == 2  # one call per stage: the voters, then the aggregator
    assert row["tokens_per_s_batched"] > 0 and row["tokens_per_s_per_turn"] > 0


@pytest.mark.timeout(300)
def test_grad_overhead_times_and_sizes_every_sharing_mode():
    out = run_script(
        "grad_overhead.py",
        "--size",
        "tiny-s",
        "--repeats",
        "5",
        "--problems",
        "2",
        "--samples",
        "2",
    )
    assert "Update step time" in out and "Memory after one update" in out
    for sharing in ("shared", "per_role", "per_agent"):
        assert f"| {sharing} |" in out  # its row of the step-time table


@pytest.mark.timeout(300)
def test_ingest_measures_both_targets(postgres_url):
    out = run_script(
        "ingest.py",
        "--postgres",
        postgres_url,
        "--repeats",
        "1",
        "--batches",
        "2",
        "--reads",
        "2",
        "--clients",
        "2",
        "--workers",
        "2",
    )
    assert "| ingestion, points/s |" in out
    assert "| read 24 × 2,000 → 500, ms |" in out


@pytest.mark.timeout(300)
def test_matrix_view_times_every_size_cold_and_warm(postgres_url):
    summary = run_smoke("matrix_view.py", "--postgres", postgres_url)
    assert [row["runs"] for row in summary["sizes"]] == [2, 4]
    for row in summary["sizes"]:
        assert 0 < row["warm_s"] and 0 < row["cold_s"] and row["cells"] >= 1


@pytest.mark.timeout(300)
def test_login_throttle_times_the_api_with_and_without_the_throttle(postgres_url):
    row = run_smoke("login_throttle.py", "--postgres", postgres_url)
    for side in ("on", "off"):
        assert row[side]["quiet_ms"] > 0 and row[side]["attacked_ms"] > 0
        assert row[side]["attempts"] > 0  # the wrong-password loop ran
    assert row["off"]["refused"] == 0  # with the limits out of reach, nothing is refused


@pytest.mark.timeout(300)
def test_demo_learning_tabulates_held_out_accuracy_over_seeds():
    (summary,) = run_smoke("demo_learning.py", timeout=280)
    assert summary["label"] == "single"
    assert [row["step"] for row in summary["table"]] == [0, 1, 2]
    assert 0 <= summary["band"] < 1
    (run,) = summary["runs"]
    statuses = ("none", "cliff", "degradation", "insufficient")  # degradation: none beat base
    assert run["seed"] == 0 and run["cliff_status"] in statuses


@pytest.mark.timeout(300)
def test_episodes_measures_recording_time_and_size():
    row = run_smoke("episodes.py")
    assert row["episodes"] == 4 and row["smoke"] is True
    assert 0 < row["record_share_of_step"] < 1
    assert 0 < row["overhead_bytes_per_turn"] < row["bytes_per_turn"]


@pytest.mark.timeout(300)
def test_episode_view_times_the_view_and_the_api(postgres_url):
    row = run_smoke("episode_view.py", "--postgres", postgres_url)
    assert row["episodes"] == 8 and row["smoke"] is True
    for size in ("short", "paper"):
        assert row[size]["view_ms"] > 0 and row[size]["api_json_ms"] > 0
    # the view draws one episode's texts whole; the API sends every episode's
    assert row["paper"]["view_bytes"] < row["paper"]["api_json_bytes"]


@pytest.mark.timeout(300)
def test_attribution_counts_the_evaluations_it_runs_and_reuses():
    row = run_smoke("attribution.py")
    assert row["smoke"] is True and row["problems"] == 8
    assert (row["evaluations_planned"], row["evaluations_run"]) == (4, 2)
    assert set(row["shares"]) == {"generator", "aggregator"}
