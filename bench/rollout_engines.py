"""Rollout tokens/s of the two rollout engines on the same prompts, in one invocation.

    .venv/bin/python bench/rollout_engines.py                  # tiny-m shape, CPU
    .venv/bin/python bench/rollout_engines.py --shape qwen3-0.6b --device cuda --rows 512 \\
        --budget 2048                                          # the paper's batch, on a GPU

Both engines generate for the same LoRA policies (two adapters, as `per_role` Voting has,
`lora_r` 8, randomly moved away from zero so they differ), the same prompts (random token ids),
the same per-row budgets and temperature, every row to its budget (no end ids: the
same tokens to generate on both sides):
`hf` is the exact sampler on the trainer's peft model (`rollout_batch` 0: one call per
policy); `vllm` is the engine of `trainer/engines/vllm_engine.py`, both policies in one mixed
batch. The model is randomly initialised in the named shape (what is timed does not depend on
the weights). Reported per engine: generated tokens, seconds (median of `--repeats`),
tokens/s; for vLLM also its start-up and one weight sync (both adapters written and reloaded)
and that sync's share of a step (rollout + sync). Needs the vLLM venv (`make vllm-venv`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainer.config import make_config  # noqa: E402
from trainer.engines.hf import HFEngine  # noqa: E402
from trainer.engines.vllm_engine import VllmEngine  # noqa: E402
from trainer.policies import PolicySet  # noqa: E402
from trainer.routing import policy_names  # noqa: E402
from trainer.tiny import RECIPE, SPECS  # noqa: E402
from vocabulary.names import PER_ROLE  # noqa: E402

SHAPES = {
    # The tiny model's own shape and vocabulary; positions for the longer `--prompt-len` +
    # `--budget` a bench may ask for than the tiny models' 512.
    "tiny-m": dict(SPECS["tiny-m"], vocab_size=RECIPE["vocab_size"], max_position_embeddings=4096),
    "qwen3-0.6b": dict(
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=8192,
    ),
}


def build_model(shape: str, out: Path) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0, **SHAPES[shape]
    )
    Qwen3ForCausalLM(config).save_pretrained(out)


def main() -> None:
    args = _arguments()
    from transformers import AutoModelForCausalLM

    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    build_model(args.shape, work / "model")
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    config = make_config(
        "cpu-demo",
        model=str(work / "model"),
        workflow="voting",
        sharing=PER_ROLE,
        device=args.device,
        rollout_engine="vllm",
    )
    model = AutoModelForCausalLM.from_pretrained(work / "model", dtype=dtype).to(args.device)
    policies = PolicySet(model, config, policy_names(config))
    jobs = _jobs(args, policies)
    row: dict = {
        "shape": args.shape,
        "device": args.device,
        "policies": len(policies.names),
        "rows_per_policy": args.rows,
        "budget": args.budget,
        "smoke": args.smoke,
    }
    row["hf"] = _timed(HFEngine(policies, 0), jobs, args.repeats)
    started = time.perf_counter()
    engine = VllmEngine.start(config, policies, str(work / "model"), log_dir=work)
    try:
        startup = time.perf_counter() - started
        row["vllm"] = _timed(engine, jobs, args.repeats)
        engine.policies_changed(list(policies.names))
        row["vllm"].update(
            startup_s=round(startup, 2),
            sync_s=round(engine.sync_seconds, 3),
            sync_share=engine.sync_seconds / (engine.sync_seconds + row["vllm"]["seconds"]),
        )
    finally:
        engine.close()
    row["ratio_vllm_over_hf"] = row["vllm"]["tokens_per_s"] / row["hf"]["tokens_per_s"]
    if args.json:
        print(json.dumps(row))
        return
    _print_table(args, row, len(jobs))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny-m")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", type=int, default=64, help="sequences per policy")
    parser.add_argument("--prompt-len", type=int, default=48)
    parser.add_argument("--budget", type=int, default=64, help="new tokens per sequence")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a tiny workload (CI)")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.prompt_len, args.budget, args.repeats = 4, 8, 8, 1
    return args


def _jobs(args, policies: PolicySet) -> list[tuple]:
    """Each policy's weights nudged apart (seeded), and its generation job: `args.rows`
    random prompts, seeds and budgets."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name in policies.names:
            for p in policies.parameters(name):
                p.add_(torch.randn(p.shape, generator=generator).to(p.device) * 0.02)
    vocab = SHAPES[args.shape]["vocab_size"]
    prompts = [
        [1, *torch.randint(3, vocab, (args.prompt_len - 1,), generator=generator).tolist()]
        for _ in range(args.rows)
    ]
    return [
        (name, prompts, [1000 * i + k for k in range(args.rows)], [args.budget] * args.rows)
        for i, name in enumerate(policies.names)
    ]


def _timed(engine, jobs: list[tuple], repeats: int) -> dict:
    """The engine's median time over `repeats` runs of the jobs, and its tokens a second."""
    # No end id: every row runs to its budget on both engines.
    sample = dict(temperature=0.7, eos_ids=[], pad_id=0)
    seconds, tokens = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        out = engine.generate_many(jobs, **sample)
        seconds.append(time.perf_counter() - started)
        tokens = sum(len(s.completion_ids) for rows in out for s in rows)
    median = statistics.median(seconds)
    return {"tokens": tokens, "seconds": round(median, 3), "tokens_per_s": tokens / median}


def _print_table(args, row: dict, n_jobs: int) -> None:
    print(f"{args.shape} on {args.device}: {n_jobs} policies × {args.rows} rows × {args.budget}")
    for side in ("hf", "vllm"):
        r = row[side]
        print(
            f"  {side:5s} {r['tokens']:7d} tokens  {r['seconds']:8.2f} s  "
            f"{r['tokens_per_s']:9.1f}/s"
        )
    v = row["vllm"]
    print(
        f"  vLLM/hf: {row['ratio_vllm_over_hf']:.2f}×; vLLM start-up {v['startup_s']} s, "
        f"weight sync {v['sync_s']} s ({100 * v['sync_share']:.1f}% of rollout + sync)"
    )


if __name__ == "__main__":
    main()
