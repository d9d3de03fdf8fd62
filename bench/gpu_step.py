"""Benchmark: one training step of each workflow on a Qwen3-architecture model in bf16.

Nothing can be downloaded on the GPU node either, so the model is randomly initialised with
the published Qwen3-0.6B or Qwen3-4B shapes; the prompts come from the synthetic tasks and
the completions are forced to a fixed length, so the numbers measure the system (rollout,
GRPO update with exact per-role gradients), not the model's answers. Reports, per workflow:
step seconds, generated tokens/s, peak GPU memory and the fraction of the GPU's bf16 peak the
update reaches (6·N·tokens FLOPs per forward+backward).

    python bench/gpu_step.py --arch qwen3-0.6b --workflows single,voting,eval_opt,orch_workers
    python bench/gpu_step.py --arch tiny --device cpu --steps 1      # smoke test on a CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

ARCHS = {
    # Published Qwen3 shapes (config.json of Qwen/Qwen3-0.6B and Qwen/Qwen3-4B).
    "qwen3-0.6b": dict(
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen3-4b": dict(
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=512,
        tie_word_embeddings=True,
    ),
}
BF16_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}


def _peak_tflops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in BF16_PEAK_TFLOPS.items() if k in name), None)


def main() -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trainer.advantages import compute_advantages
    from trainer.config import make_config
    from trainer.policies import PolicySet, policy_names
    from trainer.rollout import Codec, make_prompts, rollout
    from trainer.tasks import load_task
    from trainer.tiny import train_tokenizer
    from trainer.update import update_policies

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(ARCHS), default="qwen3-0.6b")
    parser.add_argument("--workflows", default="single,voting,eval_opt,orch_workers")
    parser.add_argument("--sharing", default="per_role")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    device = args.device
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    tokenizer = train_tokenizer(["Q: (3*4)+(5+2) A: 12+7=\\boxed{19}"] * 50, vocab_size=200)
    torch.manual_seed(0)
    arch = dict(ARCHS[args.arch])
    arch["vocab_size"] = max(arch["vocab_size"], len(tokenizer))
    model = Qwen3ForCausalLM(Qwen3Config(max_position_embeddings=4096, **arch))
    model.to(device=device, dtype=dtype)
    n_params = sum(p.numel() for p in model.parameters())

    class FixedLengthCodec(Codec):
        """No end token: every completion runs to its budget, a fixed workload per step."""

        @property
        def eos_ids(self) -> list[int]:
            return [-1]

    codec = FixedLengthCodec(tokenizer, add_bos=True)

    rows = []
    for workflow in args.workflows.split(","):
        config = make_config(
            "paper",
            workflow=workflow,
            task="math",
            dataset="synthetic",
            model="tiny-s",
            sharing=args.sharing,
            prompts_per_step=args.prompts,
            group_size=args.group,
            max_new_tokens=args.new_tokens,
            device="cpu" if device == "cpu" else "cuda",
        )
        task = load_task("math")
        policies = PolicySet(model, config, policy_names(config))
        prompts = make_prompts(config, tokenizer, "tiny")
        times, tokens = [], 0
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        for step in range(args.steps + 1):
            if device == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
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
            update_policies(policies, turns, config, tokenizer_pad_id=codec.pad_id)
            if device == "cuda":
                torch.cuda.synchronize()
            if step > 0:  # the first step pays for kernels and allocator warm-up
                times.append(time.perf_counter() - started)
                tokens += sum(len(t.prompt_ids) + len(t.completion_ids) for t in turns)
        seconds = sorted(times)[len(times) // 2]
        per_step_tokens = tokens / len(times)
        achieved = 6 * n_params * per_step_tokens / seconds / 1e12
        peak = _peak_tflops()
        rows.append(
            {
                "arch": args.arch,
                "workflow": workflow,
                "sharing": args.sharing,
                "step_seconds": round(seconds, 3),
                "tokens_per_second": round(per_step_tokens / seconds, 1),
                "peak_memory_mb": round(torch.cuda.max_memory_allocated() / 2**20)
                if device == "cuda"
                else None,
                "update_tflops": round(achieved, 2),
                "fraction_of_bf16_peak": round(achieved / peak, 4) if peak else None,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        model = policies.model if hasattr(policies, "model") else model
        if hasattr(model, "unload"):
            model = model.unload()  # drop this workflow's adapters before the next


if __name__ == "__main__":
    main()
