"""Benchmark: one update step on 2 data-parallel ranks (CPU, gloo) against 1 process.

The same Voting batch (3 generators + aggregator, `--problems` × `--samples` rollouts) on a
random model of a built-in tiny architecture: one process updates on all of it; two ranks
(spawned here, gloo on this machine) each update on their half of the problems, summing the
normaliser, the statistics and every agent segment's gradient (trainer/update.py). Reported:
median update seconds over `--repeats` steps, the speed-up, and the communication share: the
time rank 0 spends inside collectives (all-reduces of segment gradients, the plan and the
statistics; waiting for the slower rank included) over its step time.

With `--finetune full` the two ranks run twice: replicas (every rank holds every policy and
the update sums gradients by hand) and FSDP2 (trainer/sharding.py: each rank holds half of
each policy; its row also gives the trainable bytes one rank holds).

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
from trainer.sharding import local  # noqa: E402
from trainer.tiny import SPECS  # noqa: E402
from trainer.update import update_policies  # noqa: E402
from vocabulary.names import SHARED, SHARING_MODES  # noqa: E402

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


def measure(world: World, args, sharded: bool = False) -> tuple[list[float], list[float], int]:
    """Update-step seconds and communication seconds of each repeat on this rank, and the
    trainable bytes this rank holds. `sharded`: full fine-tuning under FSDP2 (else replicas)."""
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(
        Qwen3Config(vocab_size=VOCAB, max_position_embeddings=512, **SPECS[args.size])
    )
    config = _config(args)
    policies = PolicySet(model, config, policy_names(config), world if sharded else SOLO)
    held = sum(
        local(p).numel() * p.element_size() for n in policies.names for p in policies.parameters(n)
    )
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
    return steps, comms, held


def _rank(rank: int, port: int, args, queue) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2"
    )
    torch.set_num_threads(args.threads)
    base = World.start(2)
    world = TimedWorld(**{k: getattr(base, k) for k in base.__dataclass_fields__})
    results = {"replicas": measure(world, args)}
    if args.finetune == "full":
        results["fsdp2"] = measure(world, args, sharded=True)
    queue.put((rank, results))
    world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny-m", choices=sorted(SPECS))
    parser.add_argument("--sharing", default=SHARED, choices=SHARING_MODES)
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
    one, _, held_one = measure(SOLO, args)

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
    two, comm, _ = results[0]["replicas"]

    turns = args.problems * args.samples * len(AGENTS)
    m1, m2 = statistics.median(one), statistics.median(two)
    share = statistics.median(c / s for c, s in zip(comm, two))
    sharded = results[0].get("fsdp2")
    if args.json:
        row = {"one_s": m1, "two_s": m2, "comm_share": share, "turns": turns}
        if sharded:
            row["fsdp2_s"] = statistics.median(sharded[0])
            row["fsdp2_comm_share"] = statistics.median(
                c / s for c, s in zip(sharded[1], sharded[0])
            )
            row["fsdp2_held_ratio"] = sharded[2] / held_one
        print(json.dumps({**row, "size": args.size, "smoke": args.smoke}))
        return
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
        f"{torch.__version__}; {args.size} {args.sharing} {args.finetune}, {turns} turns "
        f"({args.prompt_len}+{args.completion_len} tokens), {args.threads} thread(s)/process"
    )
    print(
        f"{'':18}{'update s (median)':>18}{'min':>8}{'ratio':>8}{'in collectives':>16}{'held':>10}"
    )
    rows = [("1 process", one, None, held_one), ("2 ranks", two, comm, held_one)]
    if sharded:
        rows[1] = ("2 ranks, replicas", two, comm, held_one)
        rows.append(("2 ranks, FSDP2", *sharded))
    for label, times, comms, held in rows:
        median = statistics.median(times)
        collectives = statistics.median(c / t for c, t in zip(comms, times)) if comms else 0.0
        print(
            f"{label:18}{median:18.3f}{min(times):8.3f}{m1 / median:8.2f}x"
            f"{collectives:15.0%}{held / 2**20:8.1f}MB"
        )


if __name__ == "__main__":
    main()
