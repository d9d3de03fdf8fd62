"""Data parallel on CPU (gloo, 2 processes): the same step gives the same figures as one process.

Two ranks split 3 problems 2:1 (an uneven split; the lone rank's problem has no aggregator
turn, so it has no turns for that segment and, under per_agent, for that policy) and run two
updates; one process runs the same two updates on all the turns. Loss, token statistics,
per-role and per-agent gradient norms, shares and cosines, and the parameters must agree
within float tolerance (the sums run in another order: exact floats are not promised), for
each sharing mode × LoRA / full fine-tuning (sharded with FSDP2 on 2 ranks), and with the
coherence regulariser on. Sharded checkpoints (every rank its shards) resume, load in one
process, and a one-process checkpoint loads on 2 ranks. Ranks
that disagree on the update plan fail with a message; a rank missing from a collective makes
the other fail within the collective timeout instead of hanging. The CLI's `--world-size 2`
(torchrun) logs every metric once, as one process would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.trainer import dist_ranks
from trainer.config import ConfigError, make_config
from trainer.distributed import SOLO, CollectiveError, World, shares, split_problems
from trainer.tasks.base import Problem
from trainer.train import merge_evaluations

MODES = [
    (sharing, finetune, {})
    for sharing in ("shared", "per_role", "per_agent")
    for finetune in ("lora", "full")
]
MODES.append(("shared", "lora", {"coherence_lambda": 0.5}))
# Packed micro-batches on sharded ranks: every rank runs each segment's largest pass count.
MODES.append(("per_role", "full", {"micro_batch_tokens": 24}))
ROOT = Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-5, 1e-6  # figures: sums of the same terms in another order
# Weights after two AdamW steps at lr 1e-2: Adam divides by sqrt(v), which magnifies rounding
# in a coordinate whose gradient is near zero (seen: 2e-6 on one of 1024).
PARAM_ATOL = 1e-5


def _all_modes(world: World) -> list[dict]:
    return [
        dist_ranks.two_steps(world, dist_ranks.step_config(s, f, **extra)) for s, f, extra in MODES
    ]


@pytest.fixture(scope="module")
def two_ranks() -> list[list[dict]]:
    """Every mode's two updates on 2 ranks (one launch for all of them)."""
    results = dist_ranks.launch(_all_modes, 2)
    for rank, (status, value) in enumerate(results):
        assert status == "ok", f"rank {rank}: {value}"
    return [value for _, value in results]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("mode", range(len(MODES)), ids=lambda i: "-".join(map(str, MODES[i][:2])))
def test_two_ranks_give_the_figures_and_weights_of_one_process(two_ranks, mode):
    sharing, finetune, extra = MODES[mode]
    one = dist_ranks.two_steps(SOLO, dist_ranks.step_config(sharing, finetune, **extra))
    for rank, results in enumerate(two_ranks):
        got = results[mode]
        assert got["sharded"] == (finetune == "full")  # FSDP2 for full fine-tuning
        for step, (want, have) in enumerate(zip(one["metrics"], got["metrics"]), start=1):
            keys = {k for k in want if not k.startswith("sys/")}  # memory, not figures
            assert keys == {k for k in have if not k.startswith("sys/")}, (rank, step)
            assert any(k.startswith("grad_cos/") for k in keys) or sharing == "per_agent"
            for key in sorted(keys):
                assert have[key] == pytest.approx(want[key], rel=RTOL, abs=ATOL), (rank, step, key)
        for name, params in one["params"].items():
            for p, q in zip(params, got["params"][name]):
                torch.testing.assert_close(q, p, rtol=1e-4, atol=PARAM_ATOL)


SHARINGS = ("shared", "per_role")


def _round_trips(world: World, root: str) -> list[dict]:
    """Each sharing mode: resumed from its own sharded checkpoint, and from one process's."""
    out = []
    for sharing in SHARINGS:
        config = dist_ranks.step_config(sharing, "full")
        (Path(root) / f"two-{sharing}").mkdir(exist_ok=True)
        (Path(root) / f"again-{sharing}").mkdir(exist_ok=True)
        own = dist_ranks.resumed(world, config, f"{root}/two-{sharing}")
        solo = f"{root}/one-{sharing}"
        loaded = dist_ranks.resumed(world, config, f"{root}/again-{sharing}", load_from=solo)
        out.append({"own": own, "loaded": loaded})
    return out


def _assert_states_equal(have: dict, want: dict) -> None:
    assert have.keys() == want.keys() and have["names"] == want["names"]
    for name in want["names"]:
        assert have["weights"][name].keys() == want["weights"][name].keys()
        for key, value in want["weights"][name].items():
            torch.testing.assert_close(have["weights"][name][key], value, rtol=1e-4, atol=1e-5)
        h, w = have["optimizers"][name], want["optimizers"][name]
        assert h["param_groups"] == w["param_groups"]
        assert h["state"].keys() == w["state"].keys()
        for i, moments in w["state"].items():
            for key, value in moments.items():
                torch.testing.assert_close(h["state"][i][key], value, rtol=1e-4, atol=1e-5)
        assert have["schedulers"][name] == want["schedulers"][name]


def _read(config, where: Path):
    policies = dist_ranks.build(config)
    policies.load_state_dict(torch.load(where / "state.pt", weights_only=True), where)
    return policies


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_sharded_checkpoints_resume_and_load_in_one_process_and_back(tmp_path):
    """2 ranks write their shards (torch.distributed.checkpoint) and resume from them; one
    process reads that checkpoint whole; 2 ranks resume from one process's checkpoint."""
    solo = {}
    for sharing in SHARINGS:
        (tmp_path / f"one-{sharing}").mkdir()
        config = dist_ranks.step_config(sharing, "full")
        solo[sharing] = dist_ranks.resumed(SOLO, config, str(tmp_path / f"one-{sharing}"))
    results = dist_ranks.launch(_round_trips, 2, str(tmp_path))
    for rank, (status, value) in enumerate(results):
        assert status == "ok", f"rank {rank}: {value}"
    for k, sharing in enumerate(SHARINGS):
        config = dist_ranks.step_config(sharing, "full")
        sharded = tmp_path / f"two-{sharing}"
        assert (sharded / "shards").is_dir()
        assert "weights" not in torch.load(sharded / "state.pt", weights_only=True)
        # Read by one process, the sharded checkpoint holds what one process's holds.
        _assert_states_equal(
            _read(config, sharded).state_dict(),
            _read(config, tmp_path / f"one-{sharing}").state_dict(),
        )
        for got in (results[0][1][k]["own"], results[0][1][k]["loaded"]):
            for name, params in solo[sharing].items():
                for p, q in zip(params, got[name]):
                    torch.testing.assert_close(q, p, rtol=1e-4, atol=PARAM_ATOL)


def test_the_coherence_regulariser_is_refused_for_sharded_full_fine_tuning():
    with pytest.raises(ConfigError, match="coherence regulariser is not available"):
        make_config("cpu-demo", world_size=2, finetune="full", coherence_lambda=0.5)
    make_config("cpu-demo", world_size=2, coherence_lambda=0.5)  # LoRA replicas: fine


def _disagree(world: World) -> None:
    """Rank 1 plans one segment fewer than rank 0: both must refuse to go on."""
    from trainer import update

    if world.rank == 1:
        real = update.update_plan

        def short(*args, **kw):
            plan = real(*args, **kw)
            return {name: [batch[:-1] for batch in batches] for name, batches in plan.items()}

        update.update_plan = short
    dist_ranks.two_steps(world, dist_ranks.step_config("shared", "lora"))


@pytest.mark.slow
def test_ranks_that_disagree_on_the_update_plan_fail_with_a_message():
    results = dist_ranks.launch(_disagree, 2, timeout=30, limit=120)
    for status, text in results:
        assert status == "error"
        assert "CollectiveError: ranks disagree on the update plan" in text
        assert "rank 0:" in text and "rank 1:" in text


def _absent(world: World) -> tuple[float, str]:
    """Rank 1 never joins the update; rank 0 must fail once the collective timeout passes."""
    if world.rank == 1:
        time.sleep(12)
        raise RuntimeError("rank 1 stayed away")
    started = time.monotonic()
    try:
        dist_ranks.two_steps(world, dist_ranks.step_config("shared", "lora"))
    except CollectiveError as exc:
        return time.monotonic() - started, str(exc)
    return time.monotonic() - started, "no error"


@pytest.mark.slow
def test_a_rank_missing_from_a_collective_fails_within_the_timeout_instead_of_hanging():
    results = dist_ranks.launch(_absent, 2, timeout=3, limit=120)
    status, (elapsed, message) = results[0]
    assert status == "ok"
    assert "failed (collective timeout 3s)" in message, message
    assert "the update plan" in message
    assert elapsed < 10  # the timeout, not rank 1's return after 12 s


def test_a_run_launched_with_another_number_of_ranks_is_refused(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ValueError, match="world_size is 2 but 1 process"):
        World.start(2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="world_size is 1 but 2 process"):
        World.start(1)


def test_resuming_with_another_number_of_ranks_is_refused_with_a_message(tmp_path):
    from trainer.train import prepare_out_dir

    prepare_out_dir(make_config("cpu-demo", world_size=2), tmp_path)
    with pytest.raises(ValueError, match="trained on 2 rank.*--world-size 2"):
        prepare_out_dir(make_config("cpu-demo"), tmp_path)


def test_world_size_is_validated_like_other_fields():
    assert make_config("cpu-demo").world_size == 1
    with pytest.raises(ConfigError) as info:
        make_config("cpu-demo", world_size=0)
    assert "world_size" in info.value.errors
    with pytest.raises(ConfigError, match="every rank needs at least one problem"):
        make_config("cpu-demo", world_size=8, prompts_per_step=4)
    assert make_config("cpu-demo", world_size=2).hash() != make_config("cpu-demo").hash()


def test_shares_are_contiguous_and_as_even_as_whole_items_allow():
    assert shares([1] * 5, 2) == [range(0, 3), range(3, 5)]
    assert shares([1] * 7, 3) == [range(0, 3), range(3, 5), range(5, 7)]
    assert shares([1], 2) == [range(0, 1), range(1, 1)]


def test_a_problem_drawn_twice_stays_on_one_rank():
    ids = ["a", "b", "a", "c", "d", "b"]
    problems = [Problem(id=i, question=i, compact=i, answer="1") for i in ids]
    parts = [split_problems(problems, World(rank=r, size=2)) for r in range(2)]
    assert sorted(p.id for part in parts for p in part) == sorted(ids)
    for pid in set(ids):
        assert sum(any(p.id == pid for p in part) for part in parts) == 1
    assert all(parts)


def test_merged_evaluations_equal_one_evaluation():
    def result(per_problem, roles, counts):
        return {
            "accuracy": sum(per_problem) / len(per_problem),
            "per_problem": per_problem,
            "episodes": len(per_problem),
            "turns": 4 * len(per_problem),
            "tokens": 10 * len(per_problem),
            "seconds": 1.0,
            "roles": roles,
            "role_counts": counts,
        }

    merged = merge_evaluations(
        [
            result([1.0, 0.0, 1.0], {"voter": 2 / 3}, {"voter": 9}),
            result([0.0], {"voter": 0.0}, {"voter": 3}),
        ]
    )
    assert merged["accuracy"] == pytest.approx(0.5)
    assert merged["per_problem"] == [1.0, 0.0, 1.0, 0.0]
    assert merged["roles"]["voter"] == pytest.approx(6 / 12)
    assert merged["accuracy_se"] == pytest.approx(0.57735026919 / 2)
    assert merged["episodes"] == 4 and merged["turns"] == 16


def _metrics(path) -> dict:
    rows = [json.loads(line) for line in open(path)]
    points = {(r["step"], r["key"]): r["value"] for r in rows}
    assert len(points) == len(rows), "a metric logged twice"
    return points


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.parametrize("finetune", ["lora", "full"])  # full: sharded with FSDP2
def test_the_cli_on_two_ranks_logs_what_one_process_logs_once(tmp_path, finetune):
    flags = [
        *("--preset", "cpu-demo", "--workflow", "voting", "--device", "cpu"),
        *("--finetune", finetune),
        *("--steps", "2", "--prompts-per-step", "3", "--group-size", "4"),
        *("--eval-problems", "5", "--eval-samples", "1", "--eval-every", "2"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name, extra in (("one", []), ("two", ["--world-size", "2"])):
        command = [sys.executable, "-m", "trainer", "run", *flags, *extra]
        done = subprocess.run(
            [*command, "--out", str(tmp_path / name)], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["status"] == "succeeded"
        assert len(done.stdout.strip().splitlines()) == 1  # rank 0 alone prints
    one, two = _metrics(tmp_path / "one/metrics.jsonl"), _metrics(tmp_path / "two/metrics.jsonl")
    assert set(one) == set(two)
    # Full fine-tuning moves every weight: rounding-level differences after the first update
    # (sums in another order, magnified by Adam) can flip a sampled token later, so later
    # steps' values are only compared under LoRA.
    last = 2 if finetune == "lora" else 1
    for key, value in one.items():
        if not key[1].startswith("sys/") and key[0] <= last:
            assert two[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    assert (tmp_path / "two/checkpoints/step-000002").is_dir()
    if finetune == "full":  # every rank wrote its shards; one process evaluates from them
        assert (tmp_path / "two/checkpoints/step-000002/shards").is_dir()
        command = [sys.executable, "-m", "trainer", "eval", "--problems", "3"]
        done = subprocess.run(
            [*command, "--checkpoint", "latest", "--out", str(tmp_path / "two")],
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_bench_still_runs_on_a_tiny_workload():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "distributed_step.py"), "--smoke", "--json"]
        + ["--finetune", "full"],  # replicas and FSDP2
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["one_s"] > 0 and row["two_s"] > 0 and 0 <= row["comm_share"] <= 1
    assert row["fsdp2_s"] > 0 and row["fsdp2_held_ratio"] == 0.5  # each rank holds half


def test_shards_a_killed_rank_left_in_staging_are_no_checkpoint(tmp_path):
    """Ranks write their shards into a staging directory rank 0 renames only once all have
    written: a rank killed mid-write leaves no checkpoint to resume from, only staging, which
    the next save of that checkpoint starts afresh (trainer/train.py `_write_shards`)."""
    from trainer.checkpoint import shard_staging
    from trainer.checkpoint_index import list_checkpoints, resume_point

    staging = shard_staging(tmp_path, "step", 4)
    (staging / "shards").mkdir(parents=True)
    (staging / "shards" / "__0_0.distcp").write_bytes(b"half")
    assert staging.parent == tmp_path / "checkpoints"
    assert shard_staging(tmp_path, "step", 4) == staging  # every rank names it alike
    assert list_checkpoints(tmp_path) == [] and resume_point(tmp_path) is None
