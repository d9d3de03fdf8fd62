"""Benchmark: one `single`-workflow GRPO training step, Troupe's trainer vs TRL's GRPOTrainer.

Both sides train the same random-init Qwen3 with the `tiny-s` architecture
(`trainer.tiny.SPECS`; no warm-start: the model is built directly, with a BPE tokenizer from
`trainer.tiny.train_tokenizer` trained on a few hundred synthetic transcripts) on the same
synthetic math prompts, the same batch (8 prompts × 8 generations, at most 24 new tokens,
temperature 0.7), LoRA r8/alpha16 on all linear layers, beta 0, clip 0.2/0.28, the `grpo` loss
(Troupe's `seq-mean-token-mean`), fp32, no gradient checkpointing, and the same reward
function in TRL's shape `(completions, **kwargs) -> list[float]` (the fraction of digit
characters in the completion, so groups have spread and advantages are non-zero).

- Troupe: `trainer.rollout.rollout` (batched sampling with a KV cache) → rewards →
  `compute_advantages` → `trainer.update.update_policies` (forward/backward/AdamW), as one
  step of `trainer/train.py` without evaluation, checkpoints or reporting.
- TRL 1.16: `GRPOTrainer.train()` for `--steps` steps; a callback takes the time from
  `on_step_begin` to `on_step_end` (generation with `model.generate`, reward, advantages,
  loss, backward, clipping, optimizer and scheduler) and the time spent in
  `_generate_and_score_completions` (generation + scoring), so "update only" is the rest.

The two run interleaved in one process: after each TRL step the callback runs one Troupe
step, so machine noise hits both alike. Reported: median wall time per step and per generated
token, for (a) the whole step and (b) the update only, over the steps after `--warmup`; the
ratio Troupe / TRL of those medians, and the median of the per-step ratios of back-to-back
steps (`paired_ratios_per_token`; below 1: Troupe is faster).

`--threads` sets torch's intra-op threads for both sides (on a loaded
2-core machine, 1 thread is faster and far steadier than 2).

    .venv/bin/python bench/trl_step.py --steps 12 --warmup 2 --threads 1
    .venv/bin/python bench/trl_step.py --smoke        # seconds: checks that it still runs

On a GPU (`--device cuda --shape qwen3-0.6b`): a random-weight Qwen3-0.6B-shaped model in
bf16 on both sides (LoRA adapters fp32, bf16 autocast: TRL's `bf16=True`, Troupe's
trainer/precision.py), the study's batch of 16 prompts × 8 generations and 96 new tokens,
one micro-batch on both sides, no vLLM (TRL generates with `model.generate`):

    python bench/trl_step.py --device cuda --shape qwen3-0.6b --steps 7 --warmup 2
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import print_row  # noqa: E402
from trainer.advantages import compute_advantages  # noqa: E402
from trainer.config import Config, make_config  # noqa: E402
from trainer.policies import PolicySet  # noqa: E402
from trainer.rollout import Codec, rollout  # noqa: E402
from trainer.tasks import load_task  # noqa: E402
from trainer.tiny import SPECS, train_tokenizer  # noqa: E402
from trainer.train import sample_problems  # noqa: E402
from trainer.transcripts import corpus  # noqa: E402
from trainer.update import update_policies  # noqa: E402
from trainer.workflows.prompts import TinyPrompts  # noqa: E402
from vocabulary.names import SHARED  # noqa: E402

SEED = 0
LR = 3e-3


def digit_reward(completions: list[str], **_kwargs) -> list[float]:
    """TRL's reward shape; Troupe's side calls the same function on its completions."""
    return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]


def build_tokenizer(problems_per_task: int):
    math = load_task("math", "synthetic", seed=0).sample("train", problems_per_task, SEED)
    code = load_task("code", "synthetic", seed=0).sample("train", problems_per_task, SEED)
    texts = [p + c for p, c in corpus(math, code, SEED)]
    return train_tokenizer(texts, 320)


def random_model(tokenizer, shape: str = "tiny-s", device: str = "cpu"):
    """A random-init Qwen3 of `shape` (tiny-s, or the published Qwen3-0.6B shape, bf16 on
    cuda); the same seed gives both sides the same weights."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trainer.memory import model_shape

    spec = dict(SPECS["tiny-s"]) if shape == "tiny-s" else dict(model_shape(SHAPES[shape]))
    spec["vocab_size"] = max(spec.get("vocab_size", 0), len(tokenizer))
    spec.pop("max_position_embeddings", None)
    torch.manual_seed(SEED)
    config = Qwen3Config(
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **{**spec, "tie_word_embeddings": True},
    )
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        return Qwen3ForCausalLM._from_config(config, dtype=dtype)


SHAPES = {
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "qwen3-1.7b": "Qwen/Qwen3-1.7B",
    "qwen3-4b": "Qwen/Qwen3-4B",
}


def _sync() -> None:
    """Wait for the GPU's queued work, so a timer stops when the step's work is done."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class TroupeSide:
    """One training step of trainer/train.py's loop: rollout → advantages → update (at beta 0
    the update skips the reference forward, as TRL does)."""

    def __init__(self, config: Config, tokenizer, task, shape: str = "tiny-s"):
        self.config = config
        model = random_model(tokenizer, shape, config.device)
        self.policies = PolicySet(model, config, [SHARED])
        self.codec = Codec(tokenizer, add_bos=True)
        self.prompts = TinyPrompts(config.task)
        self.task = task
        self.generation: list[float] = []  # rollout + rewards + advantages
        self.update: list[float] = []
        self.tokens: list[int] = []

    def step(self, step: int) -> None:
        c = self.config
        _sync()
        t0 = time.perf_counter()
        problems = sample_problems(self.task, c.prompts_per_step, c.seed, step)
        episodes, stats = rollout(
            problems,
            c.group_size,
            config=c,
            policies=self.policies,
            codec=self.codec,
            prompts=self.prompts,
            task=self.task,
            temperature=c.temperature,
            seed_parts=(c.seed, "train", step),
        )
        rewards = digit_reward([ep.turns[0].text for ep in episodes])
        for episode, reward in zip(episodes, rewards, strict=True):
            episode.reward = reward
        compute_advantages(episodes, c)
        turns = [turn for ep in episodes for turn in ep.turns]
        self.generation.append(time.perf_counter() - t0)
        started = time.perf_counter()
        update_policies(self.policies, turns, c, tokenizer_pad_id=self.codec.pad_id)
        _sync()
        self.update.append(time.perf_counter() - started)
        self.tokens.append(stats.tokens)


def trl_trainer(
    config: Config, tokenizer, dataset, out: str, steps: int, callback, shape: str = "tiny-s"
):
    """TRL's GRPOTrainer set up as Troupe's step above (see the module docstring)."""
    from peft import LoraConfig
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    class TimedGRPOTrainer(GRPOTrainer):
        """Records the time and the completion tokens of each generation + scoring call."""

        def _generate_and_score_completions(self, inputs):
            started = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            callback.generation.append(time.perf_counter() - started)
            callback.tokens.append(int(out["completion_mask"].sum()))
            return out

    args = GRPOConfig(
        output_dir=out,
        max_steps=steps,
        per_device_train_batch_size=config.prompts_per_step * config.group_size,
        gradient_accumulation_steps=1,
        num_generations=config.group_size,
        max_completion_length=config.max_new_tokens,
        temperature=config.temperature,
        beta=0.0,
        epsilon=config.clip_low,
        epsilon_high=config.clip_high,
        loss_type="grpo",
        learning_rate=config.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=config.grad_clip,
        disable_dropout=True,
        gradient_checkpointing=False,
        bf16=config.device == "cuda",
        use_cpu=config.device == "cpu",
        shuffle_dataset=False,  # step k trains on the same prompts as Troupe's step k
        report_to=[],
        logging_strategy="no",  # nothing to report to; keeps stdout clean for --json
        save_strategy="no",
        disable_tqdm=True,
        seed=SEED,
    )
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        target_modules="all-linear",
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    trainer = TimedGRPOTrainer(
        model=random_model(tokenizer, shape, config.device),
        reward_funcs=digit_reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[callback],
    )
    trainer.remove_callback(PrinterCallback)  # its end-of-training line would mix into stdout
    return trainer


def make_callback(troupe: TroupeSide):
    from transformers import TrainerCallback

    class Interleave(TrainerCallback):
        """Times TRL's steps and runs one Troupe step after each (interleaved A/B)."""

        def __init__(self):
            self.whole: list[float] = []
            self.generation: list[float] = []
            self.tokens: list[int] = []
            self._started = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            _sync()
            self._started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            _sync()
            self.whole.append(time.perf_counter() - self._started)
            troupe.step(state.global_step)

    return Interleave()


def summarize(generation, update, tokens, warmup: int) -> dict[str, float]:
    """Medians over the measured steps; a step is its generation plus its update."""
    keep = slice(warmup, None)
    generation, update, tokens = generation[keep], update[keep], tokens[keep]
    whole = [g + u for g, u in zip(generation, update)]
    return {
        "step_s": statistics.median(whole),
        "generation_s": statistics.median(generation),
        "update_s": statistics.median(update),
        "tokens": statistics.median(tokens),
        "step_ms_per_token": statistics.median(1e3 * w / n for w, n in zip(whole, tokens)),
        "update_ms_per_token": statistics.median(1e3 * u / n for u, n in zip(update, tokens)),
    }


def paired_ratio(ours: tuple, theirs: tuple, warmup: int) -> float:
    """Median over steps of (our time per token / TRL's) for the same step: each pair ran
    back to back, so slow drifts in the machine's load cancel out."""
    (a, n), (b, m) = ours, theirs
    pairs = list(zip(a, n, b, m))[warmup:]
    return round(statistics.median((x / k) / (y / j) for x, k, y, j in pairs), 3)


def main() -> None:
    args = _arguments()
    warnings.filterwarnings("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from datasets import Dataset

    config = make_config(
        "cpu-demo",
        workflow="single",
        task="math",
        sharing=SHARED,
        lora_r=8,
        lora_alpha=16,
        lr=LR,
        warmup_steps=0,
        schedule="constant",
        steps=args.steps,
        prompts_per_step=args.prompts,
        group_size=args.generations,
        max_new_tokens=args.max_new_tokens,
        micro_batch_size=args.prompts * args.generations,  # one forward/backward, as TRL's
        kl_beta=0.0,
        temperature=0.7,
        seed=SEED,
        device=args.device,
        grad_checkpointing="off",  # as TRL's side
    )
    tokenizer = build_tokenizer(60 if args.smoke else 300)
    task = load_task("math", "synthetic", seed=0)
    troupe = TroupeSide(config, tokenizer, task, args.shape)
    # TRL reads the prompts in order (no shuffling): step k's 8 prompts are Troupe's step k's.
    solve = TinyPrompts("math").solve
    rows = [
        tokenizer.bos_token + solve(problem)
        for step in range(1, args.steps + 1)
        for problem in sample_problems(task, config.prompts_per_step, config.seed, step)
    ]
    callback = make_callback(troupe)
    with tempfile.TemporaryDirectory() as out:
        trainer = trl_trainer(
            config,
            tokenizer,
            Dataset.from_dict({"prompt": rows}),
            out,
            args.steps,
            callback,
            args.shape,
        )
        trainer.train()
    row = _compared(args, troupe, callback)
    print_row(row, args.json)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="steps per side (>= warmup + 5)")
    parser.add_argument("--warmup", type=int, default=2, help="first steps left out")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--smoke", action="store_true", help="2 steps of 2×4, 8 tokens")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--shape", choices=("tiny-s", *SHAPES), default="tiny-s")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.warmup, args.prompts, args.generations = 2, 0, 2, 4
        args.max_new_tokens = 8
    return args


def _compared(args, troupe: TroupeSide, callback) -> dict:
    """The result row: each side's times per token, their ratios, and paired per-step ratios."""
    trl_update = [w - g for w, g in zip(callback.whole, callback.generation)]
    ours = summarize(troupe.generation, troupe.update, troupe.tokens, args.warmup)
    theirs = summarize(callback.generation, trl_update, callback.tokens, args.warmup)

    def ratio(a: dict, key: str) -> float:
        return round(a[key] / theirs[key], 3)

    def steps(generation, update):
        return [g + u for g, u in zip(generation, update)]

    trl_steps = (callback.whole, callback.tokens)
    trl_updates = (trl_update, callback.tokens)
    paired = {
        "step": paired_ratio(
            (steps(troupe.generation, troupe.update), troupe.tokens), trl_steps, args.warmup
        ),
        "update": paired_ratio((troupe.update, troupe.tokens), trl_updates, args.warmup),
    }
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads"
        + (f", {torch.cuda.get_device_name()}" if args.device == "cuda" else ""),
        "shape": args.shape,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "batch": f"{args.prompts} prompts x {args.generations} generations, "
        f"<= {args.max_new_tokens} new tokens",
        "steps_measured": len(troupe.update) - args.warmup,
        "troupe": {k: round(v, 4) for k, v in ours.items()},
        "trl": {k: round(v, 4) for k, v in theirs.items()},
        "ratio_step_per_token": ratio(ours, "step_ms_per_token"),
        "ratio_update_per_token": ratio(ours, "update_ms_per_token"),
        "paired_ratios_per_token": paired,
        "smoke": args.smoke,
    }


if __name__ == "__main__":
    main()
