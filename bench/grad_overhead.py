"""Benchmark: the cost of exact per-role gradient figures, and the memory of each sharing mode.

1. Update-step time with and without the gradient instrumentation (trainer/gradients.py), for
   each sharing mode, on a Voting batch (3 generators + aggregator) and a random model with
   a built-in tiny architecture. Instrumented and plain steps run interleaved (ABBA) in one
   process, so machine noise hits both alike; the table shows medians of `--repeats` steps,
   the ratio of the fastest ones (the least disturbed by other load) and — the number to
   trust on a shared machine — the time spent inside the tracker itself, which is the whole
   of the instrumentation's extra work (no extra forward or backward pass is made).
2. Memory of shared LoRA, per_role LoRA and per_role full copies after one update: frozen
   weights, trainable weights, AdamW state, and the peak held by the gradient snapshots —
   counted from the tensors themselves (the machine's RSS is shared with other work).
3. What one snapshot vector costs at the paper's scales (LoRA r64, all linear layers).

    python bench/grad_overhead.py --size tiny-m --repeats 7
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script
from trainer.config import make_config  # noqa: E402
from trainer.episode import Turn  # noqa: E402
from trainer.gradients import GradientTracker  # noqa: E402
from trainer.policies import PolicySet, agent_policy, policy_names  # noqa: E402
from trainer.tiny import SPECS  # noqa: E402
from trainer.update import update_policies  # noqa: E402
from vocabulary.names import (  # noqa: E402
    GRAD_SNAPSHOT_KEY,
    PER_AGENT,
    PER_ROLE,
    SHARED,
)

PAD = 0
VOCAB = 320
AGENTS = [(f"generator{i}", "generator") for i in range(3)] + [("aggregator", "aggregator")]

# Qwen3 shapes (config.json of each model): hidden, intermediate, layers, q heads, kv heads.
PAPER_SHAPES = {
    "Qwen3-0.6B": (1024, 3072, 28, 16, 8),
    "Qwen3-1.7B": (2048, 6144, 28, 16, 8),
    "Qwen3-4B": (2560, 9728, 36, 32, 8),
}


def random_model(size: str) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=VOCAB, max_position_embeddings=512, tie_word_embeddings=True, **SPECS[size]
    )
    return Qwen3ForCausalLM(config)


def voting_turns(config, problems: int, samples: int, prompt_len: int, completion_len: int):
    gen = torch.Generator().manual_seed(0)
    turns = []
    for _ in range(problems * samples):
        for agent, role in AGENTS:
            # the aggregator reads three answers: a longer prompt, a shorter completion
            p = prompt_len * (3 if role == "aggregator" else 1)
            n = int(torch.randint(completion_len // 2, completion_len + 1, (1,), generator=gen))
            n = n // 2 if role == "aggregator" else n
            turns.append(
                Turn(
                    role,
                    agent,
                    agent_policy(config, agent, role),
                    0,
                    prompt_ids=torch.randint(3, VOCAB, (p,), generator=gen).tolist(),
                    completion_ids=torch.randint(3, VOCAB, (n,), generator=gen).tolist(),
                    logprobs=[-5.0] * n,
                    advantage=float(torch.randn((), generator=gen)),
                )
            )
    return turns


def config_for(args, sharing: str, finetune: str = "lora"):
    return make_config(
        workflow="voting",
        sharing=sharing,
        finetune=finetune,
        lora_r=args.lora_r,
        lora_alpha=2 * args.lora_r,
        lr=1e-4,
        warmup_steps=0,
        max_new_tokens=args.completion_len,
        micro_batch_size=args.micro_batch_size,
    )


TRACKER_SECONDS = [0.0]  # time spent inside GradientTracker, the whole instrumentation cost


def _timed(method):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            TRACKER_SECONDS[0] += time.perf_counter() - start

    return wrapper


# end_segment includes the role closing (norms, agent cosines); finish the role cosines.
GradientTracker.end_segment = _timed(GradientTracker.end_segment)
GradientTracker.finish = _timed(GradientTracker.finish)


def step_times(args, sharing: str) -> dict[str, list[float] | float]:
    config = config_for(args, sharing)
    policies = PolicySet(random_model(args.size), config, policy_names(config))
    turns = voting_turns(config, args.problems, args.samples, args.prompt_len, args.completion_len)
    update_policies(policies, turns, config, tokenizer_pad_id=PAD)  # warm-up
    timed: dict[bool, list[float]] = {True: [], False: []}
    tracker: list[float] = []
    snapshot_mb = 0.0
    for repeat in range(args.repeats):
        # ABBA order, so a drift in machine load does not favour either side
        for instrument in (True, False) if repeat % 2 == 0 else (False, True):
            TRACKER_SECONDS[0] = 0.0
            start = time.perf_counter()
            metrics = update_policies(
                policies, turns, config, tokenizer_pad_id=PAD, instrument=instrument
            )
            timed[instrument].append(time.perf_counter() - start)
            if instrument:
                tracker.append(TRACKER_SECONDS[0])
            snapshot_mb = max(snapshot_mb, metrics.get(GRAD_SNAPSHOT_KEY, 0.0))
    return {"with": timed[True], "without": timed[False], "tracker": tracker, "mb": snapshot_mb}


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (tied weights counted once)."""
    seen = {}
    for t in tensors:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def memory(args, sharing: str, finetune: str) -> dict[str, float]:
    config = config_for(args, sharing, finetune)
    policies = PolicySet(random_model(args.size), config, policy_names(config))
    turns = voting_turns(config, args.problems, args.samples, args.prompt_len, args.completion_len)
    metrics = update_policies(policies, turns, config, tokenizer_pad_id=PAD)
    trainable = [p for n in policies.names for p in policies.parameters(n)]
    if finetune == "lora":
        every = list(policies.model.parameters())
    else:
        every = [p for name in policies.names for p in policies._models[name].parameters()]
    trainable_ids = {p.untyped_storage().data_ptr() for p in trainable}
    frozen = [p for p in every if p.untyped_storage().data_ptr() not in trainable_ids]
    adam = [
        v
        for n in policies.names
        for state in policies.optimizer(n).state.values()
        for v in state.values()
        if torch.is_tensor(v) and v.dim() > 0
    ]
    mb = 2**20
    return {
        "frozen": storage_bytes(frozen) / mb,
        "trainable": storage_bytes(trainable) / mb,
        "adam": storage_bytes(adam) / mb,
        "snapshots": metrics[GRAD_SNAPSHOT_KEY],
        "params": policies.trainable_parameter_count(),
    }


def lora_params(hidden: int, inter: int, layers: int, heads: int, kv: int, r: int) -> int:
    head_dim = 128  # every Qwen3 size
    q, kv_out = heads * head_dim, kv * head_dim
    pairs = [(hidden, q), (hidden, kv_out), (hidden, kv_out), (q, hidden)]  # q k v o
    pairs += [(hidden, inter), (hidden, inter), (inter, hidden)]  # gate up down
    return layers * r * sum(a + b for a, b in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny-m", choices=sorted(SPECS))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=48)
    parser.add_argument("--completion-len", type=int, default=32)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--lora-r", type=int, default=16)
    args = parser.parse_args()
    if args.repeats < 5:
        parser.error("--repeats must be at least 5 (the table reports medians)")

    turns = args.problems * args.samples * len(AGENTS)
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; model {args.size} (random weights), "
        f"Voting, {turns} turns/step, LoRA r{args.lora_r}, micro-batch {args.micro_batch_size}"
    )
    print(f"\n## Update step time (median of {args.repeats})\n")
    print(
        "| sharing | instrumented s | plain s | in tracker s | tracker share | "
        "min-vs-min overhead | snapshot MB |"
    )
    print("|---|---|---|---|---|---|---|")
    for sharing in (SHARED, PER_ROLE, PER_AGENT):
        r = step_times(args, sharing)
        a, b = statistics.median(r["with"]), statistics.median(r["without"])
        inside = statistics.median(r["tracker"])
        low = min(r["with"]) / min(r["without"]) - 1
        print(
            f"| {sharing} | {a:.3f} | {b:.3f} | {inside:.4f} | {100 * inside / a:.2f}% "
            f"| {100 * low:+.1f}% | {r['mb']:.2f} |"
        )

    print("\n## Memory after one update (MB)\n")
    print("| policies | trainable params | frozen | trainable | AdamW | snapshot peak |")
    print("|---|---|---|---|---|---|")
    for label, sharing, finetune in (
        ("shared LoRA", SHARED, "lora"),
        ("per_role LoRA", PER_ROLE, "lora"),
        ("per_role full copies", PER_ROLE, "full"),
    ):
        m = memory(args, sharing, finetune)
        print(
            f"| {label} | {m['params']:,} | {m['frozen']:.2f} | {m['trainable']:.2f} | "
            f"{m['adam']:.2f} | {m['snapshots']:.2f} |"
        )

    print("\n## One fp32 snapshot vector at the paper's scales (LoRA r64, all linear)\n")
    print("| model | LoRA params | MB per vector | Voting/shared peak (7 vectors) MB |")
    print("|---|---|---|---|")
    for name, shape in PAPER_SHAPES.items():
        n = lora_params(*shape, r=64)
        print(f"| {name} | {n:,} | {n * 4 / 2**20:.0f} | {7 * n * 4 / 2**20:.0f} |")


if __name__ == "__main__":
    main()
