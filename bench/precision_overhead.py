"""Benchmark: seconds per cpu-demo training step (rollout + update), for comparing code versions.

The precision path keeps trainable weights in fp32 and forward passes under autocast on CUDA;
on the CPU the work is meant to be unchanged. Run this script from two checkouts (or two commits) in
turns and compare the medians; it prints one JSON line: wall seconds per step, and the
process's CPU seconds per step and per update (with OMP_NUM_THREADS=1, CPU time is what other
people's jobs on a shared machine disturb least).

    python bench/precision_overhead.py --workflow voting --sharing per_role --steps 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script
from vocabulary.names import PER_ROLE  # noqa: E402


def main() -> None:
    import torch

    from trainer.advantages import compute_advantages
    from trainer.config import make_config
    from trainer.models import load_model
    from trainer.policies import PolicySet, policy_names
    from trainer.rollout import Codec, make_prompts, rollout
    from trainer.tasks import load_task
    from trainer.train import sample_problems
    from trainer.update import update_policies

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="voting")
    parser.add_argument("--sharing", default=PER_ROLE)
    parser.add_argument("--steps", type=int, default=4, help="timed steps after one warm-up")
    args = parser.parse_args()

    config = make_config("cpu-demo", workflow=args.workflow, sharing=args.sharing)
    torch.manual_seed(0)
    loaded = load_model(config.model, "cpu")
    task = load_task(config.task, config.dataset)
    codec = Codec(loaded.tokenizer, add_bos=True)
    prompts = make_prompts(config, loaded.tokenizer, loaded.family)
    policies = PolicySet(loaded.model, config, policy_names(config))
    times, cpu, update_cpu = [], [], []
    for step in range(1, args.steps + 2):
        started, cpu0 = time.perf_counter(), time.process_time()
        problems = sample_problems(task, config.prompts_per_step, config.seed, step)
        episodes, _ = rollout(
            problems,
            config.group_size,
            config=config,
            policies=policies,
            codec=codec,
            prompts=prompts,
            task=task,
            temperature=config.temperature,
            seed_parts=(config.seed, "train", step),
        )
        compute_advantages(episodes, config)
        turns = [t for ep in episodes for t in ep.turns]
        cpu1 = time.process_time()
        update_policies(policies, turns, config, tokenizer_pad_id=codec.pad_id)
        if step > 1:  # the first step pays for warm-up
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu0)
            update_cpu.append(time.process_time() - cpu1)
    median = statistics.median
    result = {
        "step_s": median(times),
        "step_cpu_s": median(cpu),
        "update_cpu_s": median(update_cpu),
    }
    print(json.dumps({k: round(v, 3) for k, v in result.items()}))


if __name__ == "__main__":
    main()
