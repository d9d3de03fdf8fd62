"""Episodes recorded by a real worker: a cpu-demo run, cancelled and resumed, stores every
step's sampled GRPO groups and every evaluation's probe problems once each, with the rewards
and advantages the trainer used (recomputed here from the group), and loses them with the
run."""

import statistics
from collections import defaultdict

import pytest
from django.conf import settings

from tests.helpers import database_url, service_env, start_worker
from tests.runs import FAST_SWEEP, SMALL, run_in, steps_of, wait_for
from trainer.advantages import EPS
from webapp.episodes.codec import unpack
from webapp.episodes.models import Episode
from webapp.experiments.models import MetricPoint, Run
from webapp.runs.queueing import create_experiment
from webapp.runs.run_files import delete_runs

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

CONFIG = {
    **SMALL,
    "workflow": "voting",
    "steps": 6,
    "checkpoint_every": 2,
    "group_size": 4,
    "episodes_per_step": 4,  # = prompts_per_step: every episode, so the means can be checked
    "episodes_probe": 2,
}


@pytest.fixture
def worker_env(tiny_model) -> dict[str, str]:
    return service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        **FAST_SWEEP,
    )


def recompute_advantages(records: list[dict]) -> list[tuple[float, float]]:
    """(stored, recomputed) advantage of every turn: GRPO over (problem, role) groups."""
    groups = defaultdict(list)
    for ep in records:
        for turn in ep["turns"]:
            groups[(ep["problem_id"], turn["role"])].append(turn)
    pairs = []
    for turns in groups.values():
        rewards = [t["reward"] for t in turns]
        mean = statistics.fmean(rewards)
        std = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
        for t in turns:
            expected = (t["reward"] - mean) / (std + EPS) if std > 1e-8 else 0.0
            pairs.append((t["advantage"], expected))
    return pairs


def test_a_cancelled_and_resumed_run_records_each_episode_once_as_scored(client, alice, worker_env):
    experiment = create_experiment(alice, "episodes", preset="cpu-demo", config=CONFIG)
    run = experiment.runs.get()
    client.force_login(alice)
    with start_worker(worker_env):
        wait_for(lambda: Run.objects.get(id=run.id).step >= 3, what="step 3")
        client.post(f"/runs/{run.id}/cancel/")
        cancelled = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the cancel")
        assert cancelled.step < 6
        client.post(f"/runs/{run.id}/resume/")
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the resumed run")
    assert done.status == Run.SUCCEEDED and done.attempts == 2, done.error_message

    rows = Episode.objects.filter(run=run)
    slots = list(rows.values_list("kind", "step", "index"))
    assert len(slots) == len(set(slots))  # nothing twice
    train = sorted((s, i) for k, s, i in slots if k == "train")
    assert train == [(s, i) for s in range(1, 7) for i in range(4 * 4)]  # nothing missing
    evals = sorted((s, i) for k, s, i in slots if k == "eval")
    assert evals == [(s, i) for s in (0, 2, 4, 6) for i in range(2 * 4)]  # eval_samples 4

    rewards = dict(
        MetricPoint.objects.filter(run=run, key="train/reward").values_list("step", "value")
    )
    for step in range(1, 7):
        records = [unpack(row.data) for row in rows.filter(kind="train", step=step)]
        assert statistics.fmean(r["reward"] for r in records) == pytest.approx(rewards[step])
        for stored, expected in recompute_advantages(records):
            assert stored == pytest.approx(expected, abs=1e-6)
    probe = {
        s: list(rows.filter(kind="eval", step=s).values_list("problem_id", flat=True))
        for s in (0, 6)
    }
    assert probe[0] == probe[6]  # the same probe problems at every evaluation
    assert steps_of(run.id, "behav/voter_agreement") == list(range(1, 7))

    delete_runs(Run.objects.filter(id=run.id))
    assert not Episode.objects.filter(run_id=run.id).exists()
