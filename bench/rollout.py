"""Benchmark: batched multi-agent rollouts vs one generate call per agent turn.

Same model, same problems, same seeds (so the same tokens are generated either way); reports
completion tokens per second for both, and their ratio, as the median of several repeats run
interleaved in one process so machine noise hits both alike.

    python bench/rollout.py --workflow voting --problems 8 --samples 8 --repeats 5
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import print_row  # noqa: E402
from trainer.config import make_config
from trainer.models import load_model
from trainer.rollout import Codec, FrozenPolicies, make_prompts, rollout
from trainer.tasks import load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="voting")
    parser.add_argument("--task", default="math")
    parser.add_argument("--model", default="tiny-s")
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    torch.set_num_threads(max(1, torch.get_num_threads()))
    config = make_config("cpu-demo", workflow=args.workflow, task=args.task, model=args.model)
    loaded = load_model(config.model, "cpu")
    task = load_task(config.task, config.dataset, seed=0)
    problems = task.sample("train", args.problems, seed=7)
    env = dict(
        config=config,
        policies=FrozenPolicies(loaded.model),
        codec=Codec(loaded.tokenizer, add_bos=loaded.family == "tiny"),
        prompts=make_prompts(config, loaded.tokenizer, loaded.family),
        task=task,
        temperature=config.temperature,
        seed_parts=(0, "bench"),
    )
    rates = {True: [], False: []}
    calls = {}
    for _ in range(args.repeats):
        for batched in (True, False):
            started = time.perf_counter()
            _, stats = rollout(problems, args.samples, batched=batched, **env)
            rates[batched].append(stats.tokens / stats.seconds_generate)
            calls[batched] = (
                stats.generate_calls,
                stats.sequences,
                stats.tokens,
                time.perf_counter() - started,
            )
    batched, single = statistics.median(rates[True]), statistics.median(rates[False])
    row = {
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "workflow": args.workflow,
        "task": args.task,
        "model": args.model,
        "episodes": args.problems * args.samples,
        "sequences": calls[True][1],
        "tokens": calls[True][2],
        "calls_batched": calls[True][0],
        "calls_per_turn": calls[False][0],
        "tokens_per_s_batched": round(batched, 1),
        "tokens_per_s_per_turn": round(single, 1),
        "ratio": round(batched / single, 2),
        "repeats": args.repeats,
    }
    print_row(row, args.json)


if __name__ == "__main__":
    main()
