"""Benchmark: what attributing a run's gain costs on the cpu-demo (evaluations and seconds).

Trains a cpu-demo run (voting, per_role by default; `--steps` of it), then runs the
attribution a worker runs (`workers/attribution.py` without the database): the plan's
coalitions, the two corners taken from the run's own evaluations, the others evaluated by
`trainer/mixed_eval.py` at the preset's full evaluation size (256 problems × 4 samples), and
the Shapley split with its bootstrap. Reports the evaluations planned and run, the seconds
to load the model and checkpoints, per evaluation and in all, the seconds of one of the
run's own evaluations for comparison, and the spread over problems of each role's
per-problem share (what the interval's width follows: docs/analysis.md, "Attribution").

    python bench/attribution.py --steps 10
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script
import numpy as np
import torch

from analysis.attribution import attribute, coalition_key, plan_coalitions
from trainer.config import make_config
from trainer.evaluate import read_per_problem
from trainer.mixed_eval import MixedEvaluator
from trainer.reporting import ListReporter
from trainer.role_sources import resolve_sources
from trainer.train import train
from vocabulary.names import (
    EVAL_SECONDS_KEY,
    PER_ROLE,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="voting")
    parser.add_argument("--sharing", default=PER_ROLE)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="2 steps, 8 problems (CI)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args()
    small = {"prompts_per_step": 2, "group_size": 2, "eval_problems": 8} if args.smoke else {}
    steps = 2 if args.smoke else args.steps
    config = make_config(
        "cpu-demo",
        workflow=args.workflow,
        sharing=args.sharing,
        steps=steps,
        eval_every=steps,
        checkpoint_every=steps,
        **small,
    )
    with tempfile.TemporaryDirectory() as out:
        reporter = ListReporter()
        trained = time.perf_counter()
        train(config, out, reporter)
        trained = time.perf_counter() - trained
        own_eval = statistics.fmean(reporter.series(EVAL_SECONDS_KEY)[1])
        roles = list(config.roles)
        own = read_per_problem(out)
        plans = {}
        for coalition in plan_coalitions(roles):
            specs = {r: "latest" if r in coalition else "base" for r in roles}
            plans[coalition] = resolve_sources(specs, config, out)
        corners = {frozenset(): own[0], frozenset(roles): own[steps]}
        fresh = [c for c in plans if c not in corners]
        started = time.perf_counter()
        evaluator = MixedEvaluator(config, [plans[c] for c in fresh])
        load = time.perf_counter() - started
        table, seconds = dict(corners), []
        for coalition in fresh:
            result = evaluator.evaluate(plans[coalition])
            table[coalition] = result["per_problem"]
            seconds.append(result["seconds"])
        result = attribute(roles, table)
        total = time.perf_counter() - started
    per_problem_sd = {}
    for role in roles:  # spread of a role's per-problem share (Shapley is linear in v)
        values = np.zeros(len(table[frozenset()]))
        for k in range(1000):  # exact per-problem shares: one problem's table at a time
            if k >= len(values):
                break
            one = {c: [v[k]] for c, v in table.items()}
            values[k] = attribute(roles, one, draws=1)["shares"][role]["value"]
        per_problem_sd[role] = round(float(values.std(ddof=1)), 3)
    row = {
        "workflow": args.workflow,
        "sharing": args.sharing,
        "steps": steps,
        "problems": result["problems"],
        "evaluations_planned": len(plans),
        "evaluations_run": len(fresh),
        "load_seconds": round(load, 1),
        "seconds_per_evaluation": round(statistics.fmean(seconds), 1),
        "own_eval_seconds": round(own_eval, 1),
        "attribution_seconds": round(total, 1),
        "train_seconds": round(trained, 1),
        "change": round(result["change"]["value"], 4),
        "shares": {
            r: [round(result["shares"][r][k], 4) for k in ("value", "low", "high")] for r in roles
        },
        "interaction": round(result["interaction"]["value"], 4),
        "accuracy": {
            coalition_key(c, roles): round(float(np.mean(v)), 4) for c, v in table.items()
        },
        "per_problem_sd": per_problem_sd,
        "threads": torch.get_num_threads(),
        "machine": platform.node(),
        "smoke": args.smoke,
    }
    print(json.dumps(row) if args.json else json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
