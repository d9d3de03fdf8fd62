"""Benchmark: what the gradient drill-down (trainer/grad_drill.py) costs a cpu-demo step.

Trains the same cpu-demo config (same seed) with the drill-down on and off, alternating
`--pairs` times, and reports the median step and update seconds of each and their ratio. The
drill-down's cost is its flat gradient copies and dot products plus the recorded episodes'
turns running in micro-batches of their own (16 recorded episodes of 128 a step).

    python bench/grad_drill.py --workflow voting --steps 3 --pairs 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

import torch

from bench.common import timed_steps_config, train_steps
from vocabulary.names import STEP_SECONDS_KEY, UPDATE_SECONDS_KEY


def run(config, drill: bool) -> tuple[list[float], list[float]]:
    reporter = train_steps(dataclasses.replace(config, episodes_grad_share=drill))
    return reporter.series(STEP_SECONDS_KEY)[1], reporter.series(UPDATE_SECONDS_KEY)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="voting")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="one step of 2 problems (CI)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.pairs = 1, 1
    config = timed_steps_config(
        args.workflow,
        args.steps,
        args.smoke,
        episodes_grad_share=True,
        **({"episodes_per_step": 1} if args.smoke else {}),
    )
    seconds = {True: ([], []), False: ([], [])}
    for _ in range(args.pairs):
        for drill in (False, True):
            step, update = run(config, drill)
            seconds[drill][0].extend(step)
            seconds[drill][1].extend(update)
    off_step, on_step = (statistics.median(seconds[d][0]) for d in (False, True))
    off_update, on_update = (statistics.median(seconds[d][1]) for d in (False, True))
    print(
        json.dumps(
            {
                "workflow": args.workflow,
                "steps": args.steps,
                "pairs": args.pairs,
                "recorded_episodes_per_step": config.episodes_per_step * config.group_size,
                "episodes_per_step": config.prompts_per_step * config.group_size,
                "median_step_seconds_off": off_step,
                "median_step_seconds_on": on_step,
                "median_update_seconds_off": off_update,
                "median_update_seconds_on": on_update,
                "step_ratio_on_off": on_step / off_step,
                "drill_share_of_step": (on_update - off_update) / off_step,
                "torch_threads": torch.get_num_threads(),
                "python": platform.python_version(),
                "smoke": args.smoke,
            },
            indent=None if args.json else 2,
        )
    )


if __name__ == "__main__":
    main()
