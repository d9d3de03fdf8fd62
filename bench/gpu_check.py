"""GPU check (issue 22): a few training steps of each study shape, one table, ≤ 6 minutes.

On one GPU: random-weight Qwen3-0.6B- and 4B-shaped models (nothing is downloaded), `single`
and `voting`, `shared` and `per_role`, LoRA and full fine-tuning, each a few steps of the real
rollout → advantages → update path at the run's precision (fp32 trainable weights, bf16
autocast) and the config's gradient checkpointing. A configuration the memory estimate says
cannot fit is refused by `make_config` exactly as a run would be (4B full per_role), and shown
as refused. Columns: step seconds (median of the timed steps), rollout tokens/s (generated),
update tokens/s (prompt + completion tokens through forward and backward), MFU of the update
(6·N·tokens FLOPs against a measured bf16 matmul ceiling), peak memory of the update against
the estimate, whether every policy's parameters moved, whether the loss was finite. Random
weights solve nothing, so the advantages are set to alternating ±1 to give every policy a
gradient (the check measures the system, not learning).

    python bench/gpu_check.py                   # the check, on cuda (Python 3.12, torch 2.11)
    python bench/gpu_check.py --device cpu      # CI's smoke test: a tiny shape, seconds

Runs without trl and without Django: when trl is not installed, the three helpers
trainer/loss.py takes from it are defined here with TRL's semantics (naive, same maths).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

SHAPES = {
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "qwen3-4b": "Qwen/Qwen3-4B",
    "tiny": None,
}
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=512,
    tie_word_embeddings=True,
)


def _trl_stand_in() -> None:
    """Register `trl.trainer.utils` with the helpers trainer/loss.py uses, if trl is absent."""
    try:
        import trl.trainer.utils  # noqa: F401
    except ImportError:
        pass
    else:
        return

    def selective_log_softmax(logits, index):
        logps = torch.log_softmax(logits.float(), dim=-1)
        return torch.gather(logps, -1, index.unsqueeze(-1)).squeeze(-1)

    def entropy_from_logits(logits):
        logps = torch.log_softmax(logits.float(), dim=-1)
        return -(logps.exp() * logps).sum(-1)

    def pad(tensors, padding_value=0, padding_side="right"):
        length = max(t.shape[0] for t in tensors)
        out = torch.full((len(tensors), length), padding_value, dtype=tensors[0].dtype)
        for row, t in enumerate(tensors):
            if padding_side == "left":
                out[row, length - t.shape[0] :] = t
            else:
                out[row, : t.shape[0]] = t
        return out

    utils = types.ModuleType("trl.trainer.utils")
    utils.selective_log_softmax = selective_log_softmax
    utils.entropy_from_logits = entropy_from_logits
    utils.pad = pad
    for name in ("trl", "trl.trainer"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["trl.trainer.utils"] = utils


def matmul_ceiling(device: str) -> float:
    """Measured TFLOP/s of a large square matmul in the compute dtype (bf16 on cuda)."""
    n, dtype = (8192, torch.bfloat16) if device == "cuda" else (512, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    _sync(device)
    reps = 20 if device == "cuda" else 5
    started = time.perf_counter()
    for _ in range(reps):
        a @ b
    _sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - started) / 1e12


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def build_model(shape: dict, device: str, vocab: int):
    """A random-weight Qwen3 of `shape`, loaded as a real one would be (bf16 on cuda)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(max_position_embeddings=4096, **{**shape, "vocab_size": vocab})
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        return Qwen3ForCausalLM._from_config(config, torch_dtype=dtype)


def run_case(args, shape_name, finetune, sharing, workflow, tokenizer, codec, ceiling) -> dict:
    from trainer.advantages import compute_advantages
    from trainer.config import ConfigError, make_config
    from trainer.memory import estimate, model_shape
    from trainer.policies import PolicySet, policy_names
    from trainer.rollout import make_prompts, rollout
    from trainer.tasks import load_task
    from trainer.update import update_policies

    row = dict(shape=shape_name, finetune=finetune, sharing=sharing, workflow=workflow)
    hub_id = SHAPES[shape_name]
    try:
        config = make_config(
            "paper",
            workflow=workflow,
            task="math",
            dataset="synthetic",
            model=hub_id or "tiny-s",
            finetune=finetune,
            sharing=sharing,
            prompts_per_step=args.prompts,
            group_size=args.group,
            max_new_tokens=args.new_tokens,
            micro_batch_size=args.micro_batch,
            lr=2e-5,
            warmup_steps=0,
            device=args.device,
        )
    except ConfigError as exc:
        row["status"] = "refused: " + "; ".join(exc.errors.values())[:200]
        return row
    shape = model_shape(hub_id) if hub_id else TINY
    model = build_model(shape, args.device, max(shape["vocab_size"], len(tokenizer)))
    n_params = sum(p.numel() for p in model.parameters())
    policies = PolicySet(model, config, policy_names(config))
    task = load_task("math")
    prompts = make_prompts(config, tokenizer, "tiny")
    before = {n: [p.detach().clone() for p in policies.parameters(n)] for n in policies.names}
    step_s, rollout_tps, update_tps, losses, longest = [], [], [], [], (0, 0)
    peak = 0
    for step in range(args.steps + 1):
        _sync(args.device)
        t0 = time.perf_counter()
        problems = task.sample("train", args.prompts, seed=step)
        episodes, stats = rollout(
            problems,
            args.group,
            config=config,
            policies=policies,
            codec=codec,
            prompts=prompts,
            task=task,
            temperature=0.7,
            seed_parts=(0, step),
        )
        compute_advantages(episodes, config)
        turns = [t for ep in episodes for t in ep.turns]
        for i, turn in enumerate(turns):
            # Random weights never solve a problem: every reward is equal and every GRPO
            # advantage 0. Alternating ±1 gives every policy a gradient to apply.
            turn.advantage = 1.0 if i % 2 else -1.0
        _sync(args.device)
        t1 = time.perf_counter()
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        metrics = update_policies(policies, turns, config, tokenizer_pad_id=codec.pad_id)
        _sync(args.device)
        t2 = time.perf_counter()
        if args.device == "cuda":
            peak = max(peak, torch.cuda.max_memory_allocated())
        longest = max(longest, max((len(t.prompt_ids), len(t.completion_ids)) for t in turns))
        losses.append(metrics.get("train/loss", math.nan))
        if step == 0:
            continue  # the first step pays for kernels and allocator warm-up
        tokens = sum(len(t.prompt_ids) + len(t.completion_ids) for t in turns)
        step_s.append(t2 - t0)
        rollout_tps.append(stats.tokens / (t1 - t0))
        update_tps.append(tokens / (t2 - t1))
    moved = all(
        any(not torch.equal(a, b) for a, b in zip(before[n], policies.parameters(n)))
        for n in policies.names
    )
    need = estimate(config, shape, on_cuda=args.device == "cuda", sequence=longest).total
    tps = statistics.median(update_tps)
    row.update(
        status="ok",
        params=n_params,
        step_s=statistics.median(step_s),
        rollout_tps=statistics.median(rollout_tps),
        update_tps=tps,
        mfu=6 * n_params * tps / 1e12 / ceiling,
        peak_gib=peak / 2**30 if args.device == "cuda" else None,
        est_gib=need / 2**30,
        moved=moved,
        finite=all(math.isfinite(x) for x in losses),
    )
    del policies, model, before
    gc.collect()
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return row


def table(rows: list[dict], ceiling: float) -> str:
    head = (
        f"{'shape':<11}{'finetune':<9}{'sharing':<9}{'workflow':<9}{'step s':>8}"
        f"{'roll t/s':>10}{'upd t/s':>10}{'MFU':>7}{'peak GiB':>10}{'est GiB':>9}"
        f"{'moved':>7}{'finite':>7}"
    )
    lines = [f"matmul ceiling: {ceiling:.3g} TFLOP/s", head, "-" * len(head)]
    for r in rows:
        start = f"{r['shape']:<11}{r['finetune']:<9}{r['sharing']:<9}{r['workflow']:<9}"
        if r["status"] != "ok":
            lines.append(start + "  " + r["status"])
            continue
        peak = f"{r['peak_gib']:.1f}" if r["peak_gib"] is not None else "-"
        lines.append(
            start
            + f"{r['step_s']:>8.2f}{r['rollout_tps']:>10.0f}{r['update_tps']:>10.0f}"
            + f"{r['mfu']:>7.1%}{peak:>10}{r['est_gib']:>9.2f}"
            + f"{'yes' if r['moved'] else 'NO':>7}{'yes' if r['finite'] else 'NO':>7}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--shapes", help="comma-separated: qwen3-0.6b, qwen3-4b, tiny")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up")
    parser.add_argument("--budget-s", type=float, default=330, help="start no case after this")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        args.shapes = args.shapes or "tiny"
    elif not torch.cuda.is_available():
        parser.error("no CUDA GPU visible; use --device cpu for the smoke test")
    else:
        # The memory check compares against this GPU, as a worker's would.
        os.environ["TROUPE_GPU_MEMORY_GB"] = str(torch.cuda.mem_get_info()[1] / 2**30)
    shapes = (args.shapes or "qwen3-0.6b,qwen3-4b").split(",")
    _trl_stand_in()

    from trainer.rollout import Codec
    from trainer.tiny import train_tokenizer

    class FixedLengthCodec(Codec):
        """No end token: every completion runs to its budget, a fixed workload per step."""

        @property
        def eos_ids(self) -> list[int]:
            return [-1]

    tokenizer = train_tokenizer(["Q: (3*4)+(5+2) A: 12+7=\\boxed{19}"] * 50, vocab_size=200)
    codec = FixedLengthCodec(tokenizer, add_bos=True)
    started = time.perf_counter()
    ceiling = matmul_ceiling(args.device)
    rows = []
    for shape in shapes:
        for finetune in ("lora", "full"):
            for sharing in ("shared", "per_role"):
                for workflow in ("single", "voting"):
                    if time.perf_counter() - started > args.budget_s:
                        rows.append(
                            dict(shape=shape, finetune=finetune, sharing=sharing,
                                 workflow=workflow, status="skipped: time budget spent")
                        )  # fmt: skip
                        continue
                    row = run_case(
                        args, shape, finetune, sharing, workflow, tokenizer, codec, ceiling
                    )
                    rows.append(row)
                    print(row, file=sys.stderr, flush=True)
    print(table(rows, ceiling))
    print(f"total {time.perf_counter() - started:.0f} s")
    bad = [r for r in rows if r["status"] == "ok" and not (r["moved"] and r["finite"])]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
