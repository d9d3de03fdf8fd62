"""Hand-built experiments for the statistics page's tests: stored runs whose accuracy curves
and gradient norms make the answer known.

- `flat(peak)`: accuracy 0.2, then up to `peak` and staying there (peak = final, no cliff).
- `cliff()`: up to 0.6 at step 20, down to 0.1 from step 40: a cliff with onset 40.
- `amplified(onset)`: a role's grad_norm logged at steps 0–99, 1.0 before `onset`, 5.0 from
  it: amplification onset `onset` (so a run with `cliff()` has lead 40 − onset, and a random
  onset lies before its cliff with probability 40/100).
- `stored_run(experiment, …)`: a run of the cpu-demo preset in a cell, finished as told, with
  those points written (no radar).
"""

from __future__ import annotations

from trainer.config import make_config
from webapp.experiments.models import Run
from webapp.metrics import write_points
from webapp.runs.queueing import new_run

ACCURACY_STEPS = range(0, 100, 10)
CLIFF_ONSET = 40


def flat(peak: float) -> list[float]:
    return [0.2, (0.2 + peak) / 2] + [peak] * 8


def cliff() -> list[float]:
    return [0.2, 0.4, 0.6, 0.6] + [0.1] * 6


def amplified(onset: int) -> list[tuple[str, int, float]]:
    return [("role/voter/grad_norm", s, 1.0 if s < onset else 5.0) for s in range(100)]


def stored_run(
    experiment,
    *,
    seed: int,
    sharing: str,
    accuracy: list[float] | None,
    workflow: str = "voting",
    status: str = Run.SUCCEEDED,
    extra: list[tuple[str, int, float]] = (),
) -> Run:
    config = make_config("cpu-demo", seed=seed, sharing=sharing, workflow=workflow)
    run = new_run(experiment, config)
    run.status = status
    run.save()
    points = list(extra)
    if accuracy is not None:
        points += [("eval/accuracy", s, a) for s, a in zip(ACCURACY_STEPS, accuracy, strict=True)]
    if points:
        write_points(run.id, points)
    return run


def sharing_pairs(experiment, offsets, *, shared=0.5, shared_cliff=False, onset=25, **kw):
    """One shared and one per_role run per seed 0, 1, …: per_role peaks at `shared` + the
    seed's offset; shared runs either flat at `shared` or falling off a cliff (with
    amplification at `onset`)."""
    for seed, offset in enumerate(offsets):
        if shared_cliff:
            stored_run(
                experiment,
                seed=seed,
                sharing="shared",
                accuracy=cliff(),
                extra=amplified(onset),
                **kw,
            )
        else:
            stored_run(experiment, seed=seed, sharing="shared", accuracy=flat(shared), **kw)
        stored_run(experiment, seed=seed, sharing="per_role", accuracy=flat(shared + offset), **kw)
