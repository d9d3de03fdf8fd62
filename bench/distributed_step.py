"""Benchmark: one update step on 2 data-parallel ranks (CPU, gloo) against 1 process.

The same Voting batch (3 generators + aggregator, `--problems` × `--samples` rollouts) on a
random model of a built-in tiny architecture: one process updates on all of it; two ranks
(spawned here, gloo on this machine) each update on their half of the problems, summing the
normaliser, the statistics and every agent segment's gradient (trainer/update.py). Reported:
median update seconds over `--repeats` steps, the speed-up, and the communication share: the
time rank 0 spends inside collectives (all-reduces of segment gradients, the plan and the
statistics; waiting for the slower rank included) over its step time.

On a CPU each rank gets `--threads` threads, so the 2-rank run uses twice the cores: the
number says what splitting the batch buys when the cores are there, and what the exact
per-segment all-reduces cost. GPU scaling needs a node with several GPUs (one GPU cannot
show it).

    python bench/distributed_step.py --size tiny-m --repeats 5
    python bench/distributed_step.py --smoke --json    # CI: a tiny workload, one JSON line
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import socket
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from trainer.config import make_config  # noqa: E402
from trainer.distributed import SOLO, World, split_list  # noqa: E402
from trainer.episode import Turn  # noqa: E402
from trainer.policies import PolicySet, agent_policy, policy_names  # noqa: E402
from trainer.tiny import SPECS  # noqa: E402
from trainer.update import update_policies  # noqa: E402

PAD = 0
VOCAB = 320
AGENTS = [(f"generator{i}", "generator") for i in range(3)] + [("aggregator", "aggregator")]


def _config(args):
    return make_config(
        workflow="voting",
        sharing=args.sharing,
        finetune=args.finetune,
        lora_r=8,
        lora_alpha=16,
        warmup_steps=0,
        max_new_tokens=args.completion_len,
        micro_batch_size=args.micro_batch_size,
        device="cpu",
    )


def _problems(config, args) -> list[list[Turn]]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(args.problems):
        turns = []
        for _ in range(args.samples):
            for agent, role in AGENTS:
                turns.append(
                    Turn(
                        role,
                        agent,
                        agent_policy(config, agent, role),
                        0,
                        prompt_ids=torch.randint(
                            1, VOCAB, (args.prompt_len,), generator=gen
                        ).tolist(),
                        completion_ids=torch.randint(
                            1, VOCAB, (args.completion_len,), generator=gen
                        ).tolist(),
                        logprobs=[-5.0] * args.completion_len,
                        advantage=float(torch.randn((), generator=gen)),
                    )
                )
        out.append(turns)
    return out


class TimedWorld(World):
    """A World that adds up the seconds spent inside collectives."""

    comm_seconds = 0.0

    def _run(self, what, fn, *a, **kw):
        started = time.perf_counter()
        try:
            return super()._run(what, fn, *a, **kw)
        finally:
            TimedWorld.comm_seconds += time.perf_counter() - started


def measure(world: World, args) -> tuple[list[float], list[float]]:
    """Update-step seconds and communication seconds of each repeat on this rank."""
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(
        Qwen3Config(vocab_size=VOCAB, max_position_embeddings=512, **SPECS[args.size])
    )
    config = _config(args)
    policies = PolicySet(model, config, policy_names(config))
    problems = _problems(config, args)
    turns = [t for p in split_list(problems, world) for t in p]
    steps, comms = [], []
    for repeat in range(args.repeats + 1):  # the first is a warm-up
        TimedWorld.comm_seconds = 0.0
        started = time.perf_counter()
        update_policies(policies, turns, config, tokenizer_pad_id=PAD, world=world)
        if repeat:
            steps.append(time.perf_counter() - started)
            comms.append(TimedWorld.comm_seconds)
    return steps, comms


def _rank(rank: int, port: int, args, queue) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2"
    )
    torch.set_num_threads(args.threads)
    base = World.start(2)
    world = TimedWorld(**{k: getattr(base, k) for k in base.__dataclass_fields__})
    queue.put((rank, measure(world, args)))
    world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny-m", choices=sorted(SPECS))
    parser.add_argument("--sharing", default="shared", choices=["shared", "per_role", "per_agent"])
    parser.add_argument("--finetune", default="lora", choices=["lora", "full"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=48)
    parser.add_argument("--completion-len", type=int, default=32)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--smoke", action="store_true", help="a tiny workload (CI)")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    if args.smoke:
        args.size, args.repeats, args.problems, args.samples = "tiny-s", 1, 2, 2
        args.prompt_len, args.completion_len = 8, 8

    torch.set_num_threads(args.threads)
    one, _ = measure(SOLO, args)

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=_rank, args=(r, port, args, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get() for _ in procs)
    for p in procs:
        p.join()
    two, comm = results[0]

    turns = args.problems * args.samples * len(AGENTS)
    m1, m2 = statistics.median(one), statistics.median(two)
    share = statistics.median(c / s for c, s in zip(comm, two))
    if args.json:
        row = {"one_s": m1, "two_s": m2, "comm_share": share, "turns": turns}
        print(json.dumps({**row, "size": args.size, "smoke": args.smoke}))
        return
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
        f"{torch.__version__}; {args.size} {args.sharing} {args.finetune}, {turns} turns "
        f"({args.prompt_len}+{args.completion_len} tokens), {args.threads} thread(s)/process"
    )
    print(f"{'':10}{'update s (median)':>20}{'min':>10}")
    print(f"{'1 process':10}{m1:20.3f}{min(one):10.3f}")
    print(f"{'2 ranks':10}{m2:20.3f}{min(two):10.3f}")
    print(f"speed-up {m1 / m2:.2f}x; rank 0 in collectives: {share:.0%} of its step")


if __name__ == "__main__":
    main()
