"""GPU check: a few training steps of each study shape, one table, within a short GPU slot.

On one GPU: random-weight Qwen3-0.6B- and 4B-shaped models (nothing is downloaded), `single`
and `voting`, `shared` and `per_role`, LoRA and full fine-tuning, each a few steps of the real
rollout → advantages → update path at the run's precision (fp32 trainable weights, bf16
autocast) and the config's gradient checkpointing. A configuration the memory estimate says
cannot fit is refused by `make_config` exactly as a run would be, and shown as refused.
Columns: step seconds (median of the timed steps), rollout tokens/s (generated), update
tokens/s (prompt + completion tokens through forward and backward), MFU of the update
(6·N·tokens FLOPs against a measured bf16 matmul ceiling), the peak memory of the whole step
(rollout and update) against the estimate and their ratio (the estimate must be an upper
bound: 1.0 ≤ est/peak ≤ 1.3), whether every policy's parameters moved, whether the loss was
finite. Random weights solve nothing, so the advantages are set to alternating ±1 to give
every policy a gradient (the check measures the system, not learning). No completion ends
early (there is no end token), so every step does the same work.

A case is `shape:finetune:sharing:workflow:PROMPTSxGROUP`, e.g. `qwen3-0.6b:lora:shared:single:
16x8` (128 sequences a step). The default list reaches the 4B shapes and full fine-tuning in
about 6 minutes on an H200. Before the cases, the sampler check decodes 128 (0.6B) and 64 (4B)
sequences of 96 tokens with CUDA graphs and without, and compares their tokens.

    python bench/gpu_check.py                           # the default cases, on cuda
    python bench/gpu_check.py --cases qwen3-4b:full:shared:single:8x8 --profile top-ops.txt
    python bench/gpu_check.py --device cpu              # CI's smoke test: a tiny shape, seconds

On a GPU image without Troupe's requirements (Python 3.12, torch with CUDA and Triton, an
older transformers), carry these wheels (≈ 18 MB: `bash bench/gpu_round.sh wheels` downloads
them into ./wheels where a registry is reachable, the round installs them) and install them
first; Troupe says at start when transformers is too old:

    pip install --no-deps --target /tmp/site wheels/*.whl && export PYTHONPATH=/tmp/site

The round of per-role update, kernel and study measurements (`bash bench/gpu_round.sh
updates`, then `... study`: each part inside one 10-minute device call) runs, among others:

    python bench/gpu_check.py --compare-packing --micro-batch 16 --micro-batch-tokens 16384 \
        --cases qwen3-0.6b:lora:per_role:voting:4x4,qwen3-0.6b:full:per_role:voting:4x4
    python bench/gpu_check.py --compare-passes --micro-batch-tokens 16384 --no-sampler-check \
        --cases qwen3-0.6b:lora:per_role:voting:4x4,qwen3-4b:lora:per_role:voting:4x4
    python bench/gpu_check.py --compare-kernels --kernels liger --micro-batch-tokens 16384 \
        --no-sampler-check --cases qwen3-0.6b:lora:shared:single:16x8   # or --kernels compile
    python bench/gpu_check.py --compare-logprobs --micro-batch-tokens 16384 --new-tokens 512 \
        --no-sampler-check --cases qwen3-0.6b:lora:shared:single:16x8
    python bench/gpu_check.py --study --study-size 16x8 --micro-batch-tokens 16384 \
        --budget-s 420 --no-sampler-check            # cases smallest first, TRL beside each
    python bench/gpu_check.py --device cpu --study --cases tiny:lora:per_role:voting:2x2 \
        --steps 1 --new-tokens 4 --eval-problems 2 --budget-s 850   # the CPU's dry run

`--study` sets the cases: Voting, Eval-Opt and Orch-Workers × per_role and shared × LoRA and
full on the 0.6B, 1.7B and 4B shapes, at `--study-size` (the paper's 64x8 by default, which
a 15-minute slot cannot finish: the budget ends the list, and what was skipped says so). Per
case it adds the phases (rollout = generation, scoring, update: medians of the timed steps;
evaluation of `--eval-problems` held-out problems and one checkpoint save, once) and after
the first case of each shape and workflow runs bench/trl_step.py: TRL's GRPOTrainer on the
single-agent equivalent (prompts × turns per episode, the same group and new tokens, so the
same generated tokens), whose step time stands beside the case's.

GPU wheel set for the kernels (`--kernels liger`, trainer/kernels.py) and the fused sampler:
the node's CUDA torch with its own Triton (3.6.0 on the H200 of 2026-12-04; Triton 3.9.0 is
what the CPU machines' tests use), plus `liger-kernel==0.8.5` (pure Python, ≈ 1 MB) installed
with `pip install --no-deps` so it never replaces torch.

Runs without trl and without Django: when trl is not installed, the three helpers
trainer/loss.py takes from it are defined here with TRL's semantics (naive, same maths).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import statistics
import sys
import time
import traceback
import types
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from trainer.kernels import KERNELS  # noqa: E402  (torch only)
from vocabulary.names import PER_ROLE, SHARED  # noqa: E402

SHAPES = {
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "qwen3-1.7b": "Qwen/Qwen3-1.7B",
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


@dataclass(frozen=True)
class Case:
    shape: str
    finetune: str
    sharing: str
    workflow: str
    prompts: int
    group: int

    @classmethod
    def parse(cls, text: str) -> Case:
        try:
            shape, finetune, sharing, workflow, size = text.split(":")
            prompts, group = (int(n) for n in size.lower().split("x"))
        except ValueError:
            raise ValueError(
                f"case {text!r}: expected shape:finetune:sharing:workflow:PROMPTSxGROUP"
            ) from None
        if shape not in SHAPES:
            raise ValueError(f"case {text!r}: shape must be one of {', '.join(SHAPES)}")
        return cls(shape, finetune, sharing, workflow, prompts, group)

    def __str__(self) -> str:
        return f"{self.shape}:{self.finetune}:{self.sharing}:{self.workflow}:" + (
            f"{self.prompts}x{self.group}"
        )


# The targets: 0.6B rollouts at 128 sequences, 4B at 64; updates at ≥ 8,192 tokens a
# micro-batch (up to 128 sequences of ~115 tokens: one micro-batch a step); full fine-tuning
# of both sizes; the per-role voting case whose peak the estimate once missed.
DEFAULT_CASES = [
    "qwen3-0.6b:lora:shared:single:16x8",
    "qwen3-0.6b:full:shared:single:16x8",
    "qwen3-0.6b:lora:per_role:voting:4x4",
    "qwen3-0.6b:full:per_role:voting:4x4",
    "qwen3-4b:lora:shared:single:8x8",
    "qwen3-4b:full:shared:single:8x8",
]
# The study's setting (docs/design.md §1): every multi-agent workflow × sharing mode × LoRA and
# full fine-tuning on the three model sizes, smallest first (a slot's time budget ends the
# list where it ends); the batch is the paper's 64 prompts × 8 rollouts unless --study-size.
STUDY_WORKFLOWS = ("voting", "eval_opt", "orch_workers")
TURNS_PER_EPISODE = {"single": 1, "voting": 4, "eval_opt": 2, "orch_workers": 3}


def study_cases(device: str, size: str) -> list[str]:
    """`--study`'s cases on `device` (the CPU's dry run: the tiny shape)."""
    shapes = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b") if device == "cuda" else ("tiny",)
    return [
        f"{shape}:{finetune}:{sharing}:{workflow}:{size}"
        for shape in shapes
        for workflow in STUDY_WORKFLOWS
        for sharing in (PER_ROLE, SHARED)
        for finetune in ("lora", "full")
    ]


CPU_CASES = [
    f"tiny:{f}:{s}:{w}:2x2"
    for f in ("lora", "full")
    for s in (SHARED, PER_ROLE)
    for w in ("single", "voting")
]


def _peak_reset(device: str) -> None:
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def _peak(device: str) -> int:
    return torch.cuda.max_memory_allocated() if device == "cuda" else 0


def run_case(args, case: Case, tokenizer, codec, ceiling, profile_to=None) -> dict:
    _peak_reset(args.device)
    from trainer.config import ConfigError
    from trainer.memory import model_shape
    from trainer.policies import PolicySet, policy_names
    from trainer.rollout import make_prompts
    from trainer.tasks import load_task

    row = dict(
        case=str(case),
        shape=case.shape,
        finetune=case.finetune,
        sharing=case.sharing,
        workflow=case.workflow,
    )
    hub_id = SHAPES[case.shape]
    try:
        config = _case_config(args, case, hub_id)
    except ConfigError as exc:
        row["status"] = "refused: " + "; ".join(exc.errors.values())[:200]
        return row
    shape = model_shape(hub_id) if hub_id else TINY
    model = build_model(shape, args.device, max(shape["vocab_size"], len(tokenizer)))
    from trainer.kernels import use_kernels

    row["kernels"] = args.kernels if use_kernels(model, args.kernels) else "exact"
    n_params = sum(p.numel() for p in model.parameters())
    policies = PolicySet(model, config, policy_names(config))
    task = load_task("math")
    prompts = make_prompts(config, tokenizer, "tiny")
    # On the host: a GPU copy of every trainable weight would count in the measured peaks (it
    # added 15 GiB to 4B full fine-tuning's before 2026-12-04's third run was corrected).
    before = {
        n: [p.detach().to("cpu", copy=True) for p in policies.parameters(n)] for n in policies.names
    }
    timing = _run_steps(args, case, config, policies, codec, prompts, task, profile_to)
    moved = all(
        any(not torch.equal(a, b.detach().cpu()) for a, b in zip(before[n], policies.parameters(n)))
        for n in policies.names
    )
    row.update(_measured(args, config, shape, n_params, ceiling, timing), moved=moved)
    row["finite"] = all(math.isfinite(x) for x in timing["losses"])
    row["phases_s"] = timing["phases"]
    row["generated_tokens"] = timing["generated"]
    if args.study:
        row["phases_s"].update(_eval_and_checkpoint(args, config, policies, codec, prompts, task))
    del policies, model, before
    gc.collect()
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return row


def _case_config(args, case: Case, hub_id: str | None):
    """The paper preset's config for one case (raises ConfigError where it refuses it)."""
    from trainer.config import make_config

    return make_config(
        "paper",
        workflow=case.workflow,
        task="math",
        dataset="synthetic",
        model=hub_id or "tiny-s",
        finetune=case.finetune,
        sharing=case.sharing,
        prompts_per_step=case.prompts,
        group_size=case.group,
        max_new_tokens=args.new_tokens,
        micro_batch_size=args.micro_batch,
        micro_batch_tokens=args.micro_batch_tokens,
        fused_logprobs=args.fused_logprobs,
        rollout_batch=0,  # one generation call a stage: 96-token turns need no chunking
        lr=2e-5,
        warmup_steps=0,
        device=args.device,
    )


def _run_steps(args, case: Case, config, policies, codec, prompts, task, profile_to) -> dict:
    """Train `args.steps` timed steps after an untimed warm-up (and, with `profile_to`, one
    profiled step); their times, throughputs, losses, memory peaks and generation calls."""
    from trainer.advantages import compute_advantages
    from trainer.rollout import rollout
    from trainer.update import update_policies
    from vocabulary.names import LOSS_KEY

    step_s, rollout_tps, update_tps, losses, longest, calls = [], [], [], [], (0, 0), []
    phases: dict[str, list[float]] = {"rollout": [], "scoring": [], "update": []}
    peaks = {"rollout": 0, "update": 0}
    extra = 1 if profile_to else 0  # an untimed step to profile: the profiler slows it
    for step in range(args.steps + 1 + extra):
        _sync(args.device)
        _peak_reset(args.device)
        t0 = time.perf_counter()
        problems = task.sample("train", case.prompts, seed=step)
        episodes, stats = rollout(
            problems,
            case.group,
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
        rollout_peak = _peak(args.device)
        _peak_reset(args.device)
        profiling = step == args.steps + 1
        with _profiled(profile_to, args.device, str(case)) if profiling else nullcontext():
            metrics = update_policies(policies, turns, config, tokenizer_pad_id=codec.pad_id)
            _sync(args.device)
        t2 = time.perf_counter()
        losses.append(metrics.get(LOSS_KEY, math.nan))
        if step == 0 or profiling:
            continue  # the first step pays for kernels and allocator warm-up
        peaks["rollout"] = max(peaks["rollout"], rollout_peak)
        peaks["update"] = max(peaks["update"], _peak(args.device))
        longest = max(longest, max((len(t.prompt_ids), len(t.completion_ids)) for t in turns))
        calls += _generation_calls(episodes)
        tokens = sum(len(t.prompt_ids) + len(t.completion_ids) for t in turns)
        step_s.append(t2 - t0)
        phases["rollout"].append(stats.seconds_generate)
        phases["scoring"].append(stats.seconds_score)
        phases["update"].append(t2 - t1)
        rollout_tps.append(stats.tokens / (t1 - t0))
        update_tps.append(tokens / (t2 - t1))
    return dict(
        step_s=step_s,
        rollout_tps=rollout_tps,
        update_tps=update_tps,
        losses=losses,
        longest=longest,
        calls=calls,
        peaks=peaks,
        phases={k: statistics.median(v) for k, v in phases.items() if v},
        generated=stats.tokens,
    )


def _measured(args, config, shape, n_params: int, ceiling, timing: dict) -> dict:
    """A case's row: medians of the timed steps, MFU, and measured against estimated memory."""
    from trainer.memory import estimate, rollout_estimate

    on_cuda = args.device == "cuda"
    longest, calls, peaks = timing["longest"], timing["calls"], timing["peaks"]
    update_need = estimate(config, shape, on_cuda=on_cuda, sequence=longest)
    rollout_need = rollout_estimate(config, shape, on_cuda=on_cuda, calls=calls, update=update_need)
    tps = statistics.median(timing["update_tps"])
    gib = 2**30
    return dict(
        status="ok",
        params=n_params,
        step_s=statistics.median(timing["step_s"]),
        rollout_tps=statistics.median(timing["rollout_tps"]),
        update_tps=tps,
        micro_batch_tokens=args.micro_batch_tokens or args.micro_batch * sum(longest),
        mfu=6 * n_params * tps / 1e12 / ceiling,
        checkpointing=config.checkpointing,
        peak_gib=max(peaks.values()) / gib if on_cuda else None,
        est_gib=max(update_need.total, rollout_need.total) / gib,
        rollout_peak_gib=peaks["rollout"] / gib,
        rollout_est_gib=rollout_need.total / gib,
        update_peak_gib=peaks["update"] / gib,
        update_est_gib=update_need.total / gib,
        update_parts=update_need.parts(),
        rollout_parts=rollout_need.parts(),
        longest=longest,
        calls=sorted(set(calls)),
    )


def _eval_and_checkpoint(args, config, policies, codec, prompts, task) -> dict[str, float]:
    """Seconds of one held-out evaluation (`--eval-problems`) and of one checkpoint save."""
    import tempfile

    from trainer.checkpoint import save_checkpoint
    from trainer.evaluate import evaluate, held_out

    problems = held_out(task, args.eval_problems)
    _sync(args.device)
    started = time.perf_counter()
    evaluate(config, policies=policies, codec=codec, prompts=prompts, task=task, problems=problems)
    _sync(args.device)
    evaluated = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        save_checkpoint(out, 1, policies, config.hash())
        saved = time.perf_counter()
    return {"evaluation": evaluated - started, "checkpoint": saved - evaluated}


def trl_equivalent(args, case: Case, remaining_s: float) -> dict:
    """TRL's GRPOTrainer (bench/trl_step.py, a subprocess) on the single-agent equivalent of
    `case`: as many prompts × generations, each turn one sequence of `--new-tokens`, so both
    generate and train the same number of tokens a step. Troupe's own single step beside it."""
    import subprocess

    turns = TURNS_PER_EPISODE.get(case.workflow, 1)
    shape = "tiny-s" if case.shape == "tiny" else case.shape
    command = [
        sys.executable,
        str(Path(__file__).with_name("trl_step.py")),
        *("--device", args.device, "--shape", shape, "--json"),
        *("--prompts", str(case.prompts * turns), "--generations", str(case.group)),
        *("--max-new-tokens", str(args.new_tokens)),
        *("--steps", str(args.steps + 1), "--warmup", "1"),
    ]
    row = dict(
        case=f"trl:{case.shape}:{case.workflow}:{case.prompts}x{case.group}",
        sequences=case.prompts * turns * case.group,
        new_tokens=args.new_tokens,
    )
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=max(30.0, remaining_s)
        )
    except subprocess.TimeoutExpired:
        return {**row, "status": "skipped: time budget spent"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {**row, "status": f"failed: {done.stderr[-300:]}"}
    result = json.loads(lines[-1])
    return {
        **row,
        "status": "ok",
        "troupe_step_s": result["troupe"]["step_s"],
        "trl_step_s": result["trl"]["step_s"],
        "ratio_step_per_token": result["ratio_step_per_token"],
        "tokens": result["trl"]["tokens"],
    }


def _alternated_updates(
    args, case: Case, tokenizer, codec, configs: dict, kernels: dict | None = None
) -> dict:
    """The update of one rollout's turns under each of `configs` (name -> config), alternated
    `--steps` + 1 times on copies of the policies (the first round is warm-up; `kernels`,
    name -> trainer/kernels.py choice, patches that name's model): median seconds, peak
    memory, losses and the turns, by name."""
    from trainer.advantages import compute_advantages
    from trainer.kernels import use_kernels
    from trainer.memory import model_shape
    from trainer.policies import PolicySet, policy_names
    from trainer.rollout import make_prompts, rollout
    from trainer.tasks import load_task
    from trainer.update import update_policies
    from vocabulary.names import LOSS_KEY

    first = next(iter(configs.values()))
    shape = model_shape(SHAPES[case.shape]) if SHAPES[case.shape] else TINY
    vocab = max(shape["vocab_size"], len(tokenizer))
    policies = {}
    for k, c in configs.items():
        model = build_model(shape, args.device, vocab)
        use_kernels(model, (kernels or {}).get(k, "exact"))
        policies[k] = PolicySet(model, c, policy_names(c))
    task = load_task("math")
    episodes, _ = rollout(
        task.sample("train", case.prompts, seed=0),
        case.group,
        config=first,
        policies=next(iter(policies.values())),
        codec=codec,
        prompts=make_prompts(first, tokenizer, "tiny"),
        task=task,
        temperature=0.7,
        seed_parts=(0, 0),
    )
    compute_advantages(episodes, first)
    turns = [t for ep in episodes for t in ep.turns]
    for i, turn in enumerate(turns):
        turn.advantage = 1.0 if i % 2 else -1.0  # random weights: give every policy a signal
    times: dict[str, list[float]] = {k: [] for k in configs}
    losses: dict[str, list[float]] = {k: [] for k in configs}
    peaks: dict[str, float | None] = {k: None for k in configs}
    for _ in range(args.steps + 1):
        for key, config in configs.items():
            _sync(args.device)
            if args.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            started = time.perf_counter()
            metrics = update_policies(policies[key], turns, config, tokenizer_pad_id=codec.pad_id)
            _sync(args.device)
            times[key].append(time.perf_counter() - started)
            losses[key].append(metrics.get(LOSS_KEY, math.nan))
            if args.device == "cuda":
                peaks[key] = torch.cuda.max_memory_allocated() / 2**30
    medians = {k: statistics.median(v[1:]) for k, v in times.items()}
    return dict(medians=medians, losses=losses, turns=turns, peaks=peaks)


def _loss_gap(losses: dict[str, list[float]], a: str, b: str) -> float:
    return max(abs(x - y) for x, y in zip(losses[a], losses[b]))


def packing_check(args, case: Case, tokenizer, codec) -> dict:
    """The update of one rollout's turns, padded (`micro_batch_size` rows) and packed
    (`micro_batch_tokens`), alternated: median seconds of each, and whether they agree."""
    from dataclasses import replace

    padded = _case_config(args, case, SHAPES[case.shape])
    budget = args.micro_batch_tokens or 4096
    configs = {"padded": replace(padded, micro_batch_tokens=0)}
    configs["packed"] = replace(padded, micro_batch_tokens=budget)
    got = _alternated_updates(args, case, tokenizer, codec, configs)
    medians, turns = got["medians"], got["turns"]
    return dict(
        case=str(case),
        turns=len(turns),
        tokens=sum(len(t.prompt_ids) + len(t.completion_ids) for t in turns),
        padded_tokens=_padded_tokens(turns, configs["padded"]),
        budget=budget,
        padded_s=medians["padded"],
        packed_s=medians["packed"],
        speedup=medians["padded"] / medians["packed"],
        loss_gap=_loss_gap(got["losses"], "padded", "packed"),
    )


def passes_check(args, case: Case, tokenizer, codec) -> dict:
    """The update of one rollout's turns of LoRA policies sharing passes (`batch_adapters`,
    trainer/passes.py) and one policy at a time, alternated: median seconds, and agreement."""
    from dataclasses import replace

    config = _case_config(args, case, SHAPES[case.shape])
    configs = {"shared_passes": replace(config, batch_adapters=True), "one_at_a_time": config}
    got = _alternated_updates(args, case, tokenizer, codec, configs)
    medians = got["medians"]
    return dict(
        case=str(case),
        turns=len(got["turns"]),
        budget=config.micro_batch_tokens or config.micro_batch_size,
        one_at_a_time_s=medians["one_at_a_time"],
        shared_passes_s=medians["shared_passes"],
        speedup=medians["one_at_a_time"] / medians["shared_passes"],
        loss_gap=_loss_gap(got["losses"], "one_at_a_time", "shared_passes"),
    )


def logprobs_check(args, case: Case, tokenizer, codec) -> dict:
    """The update of one rollout's turns with fused log-probs (`fused_logprobs`,
    trainer/head_logprobs.py) and with the whole logits, alternated: median seconds, peak
    memory of the update (CUDA), and agreement."""
    from dataclasses import replace

    config = _case_config(args, case, SHAPES[case.shape])
    configs = {"fused": replace(config, fused_logprobs=True)}
    configs["exact"] = replace(config, fused_logprobs=False)
    got = _alternated_updates(args, case, tokenizer, codec, configs)
    medians, peaks = got["medians"], got["peaks"]
    return dict(
        case=str(case),
        turns=len(got["turns"]),
        budget=config.micro_batch_tokens or config.micro_batch_size,
        exact_s=medians["exact"],
        fused_s=medians["fused"],
        speedup=medians["exact"] / medians["fused"],
        exact_peak_gib=peaks["exact"],
        fused_peak_gib=peaks["fused"],
        loss_gap=_loss_gap(got["losses"], "exact", "fused"),
    )


def kernels_check(args, case: Case, tokenizer, codec) -> dict:
    """The update of one rollout's turns with `--kernels` (trainer/kernels.py) and with the
    exact path, alternated: median seconds (the first, warm-up round pays any compile), peak
    memory (CUDA), and agreement."""
    config = _case_config(args, case, SHAPES[case.shape])
    configs = {args.kernels: config, "exact": config}
    got = _alternated_updates(args, case, tokenizer, codec, configs, {args.kernels: args.kernels})
    medians, peaks = got["medians"], got["peaks"]
    return dict(
        case=str(case),
        kernels=args.kernels,
        turns=len(got["turns"]),
        exact_s=medians["exact"],
        kernels_s=medians[args.kernels],
        speedup=medians["exact"] / medians[args.kernels],
        exact_peak_gib=peaks["exact"],
        kernels_peak_gib=peaks[args.kernels],
        loss_gap=_loss_gap(got["losses"], "exact", args.kernels),
    )


# --compare-KIND: the check, and the two sides it compares
COMPARISONS = {
    "packing": (packing_check, "padded and packed"),
    "passes": (passes_check, "with LoRA policies sharing passes and one policy at a time"),
    "logprobs": (logprobs_check, "with fused log-probs and with the whole logits"),
    "kernels": (kernels_check, "with --kernels and with the exact path"),
}


def _padded_tokens(turns, config) -> int:
    """Token slots the padded path computes: each micro-batch's rows × its widest prompt plus
    its widest completion (trainer/update.py's micro-batches, in segment order)."""
    from itertools import groupby

    from trainer.update import segment_key

    total = 0
    ordered = sorted(turns, key=segment_key(config))
    size = config.micro_batch_size
    for _, group in groupby(ordered, key=lambda t: (t.policy, t.role, t.agent)):
        group = list(group)
        for k in range(0, len(group), size):
            chunk = group[k : k + size]
            width = max(len(t.prompt_ids) for t in chunk) + max(
                len(t.completion_ids) for t in chunk
            )
            total += len(chunk) * width
    return total


def _generation_calls(episodes) -> list[tuple[int, int, int]]:
    """(sequences, longest prompt, longest completion) of each generation call of a step: the
    turns of one stage and policy were generated together (trainer/rollout.py)."""
    calls: dict[tuple[int, str], list[int]] = {}
    for turn in (t for ep in episodes for t in ep.turns):
        call = calls.setdefault((turn.stage, turn.policy), [0, 0, 0])
        call[0] += 1
        call[1] = max(call[1], len(turn.prompt_ids))
        call[2] = max(call[2], len(turn.completion_ids))
    return [(n, prompt, new) for n, prompt, new in calls.values()]


@contextmanager
def _profiled(path: str, device: str, title: str):
    """torch.profiler around the block; appends the top operators by device time, the number
    of kernels launched and of host syncs to `path`."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        yield
    events = prof.key_averages()
    sort = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    launches = sum(
        e.count
        for e in events
        if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")
    )
    syncs = sum(e.count for e in events if "Synchronize" in e.key or e.key == "cudaMemcpy")
    memcpy = sum(e.count for e in events if e.key == "cudaMemcpyAsync")
    with open(path, "a") as out:
        out.write(
            f"\n## update of {title}: {launches} kernel launches, {syncs} synchronize "
            f"calls, {memcpy} async copies\n"
        )
        out.write(events.table(sort_by=sort, row_limit=30, max_name_column_width=60))
        out.write("\n")


def sampler_check(device: str, shape_name: str, sequences: int, new_tokens: int) -> dict:
    """Decode `sequences` × `new_tokens` with CUDA graphs and without: tokens/s of each and
    whether they sampled the same tokens (the graph must change speed, not samples)."""
    from trainer import sampling
    from trainer.memory import model_shape

    hub_id = SHAPES[shape_name]
    shape = model_shape(hub_id) if hub_id else TINY
    model = build_model(shape, device, shape["vocab_size"]).eval()
    gen = torch.Generator().manual_seed(0)
    prompts = [
        torch.randint(1, min(1000, shape["vocab_size"]), (int(n),), generator=gen).tolist()
        for n in torch.randint(20, 60, (sequences,), generator=gen)
    ]
    call = dict(
        seeds=list(range(sequences)),
        max_new_tokens=new_tokens,
        temperature=0.7,
        eos_ids=[-1],
        pad_id=0,
    )
    row = dict(shape=shape_name, sequences=sequences, new_tokens=new_tokens)
    results = {}
    checked = sampling.Decoding.for_device(device)
    for graphs in (True, False, True):  # the first call pays for warm-up and Triton's compile
        decoding = sampling.Decoding(checked.pick, graphs and checked.cuda_graphs, checked.picker)
        _sync(device)
        started = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            samples = sampling.generate(model, prompts, **call, decoding=decoding)
        _sync(device)
        row["graphs" if graphs else "eager"] = (
            sequences * new_tokens / (time.perf_counter() - started)
        )
        results[graphs] = samples
    same = [a.completion_ids == b.completion_ids for a, b in zip(results[True], results[False])]
    gap = max(
        abs(x - y)
        for a, b in zip(results[True], results[False])
        for x, y in zip(a.logprobs, b.logprobs)
    )
    row.update(same_tokens=f"{sum(same)}/{len(same)}", logprob_gap=gap, fused_picker=checked.picker)
    del model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


def table(rows: list[dict], ceiling: float) -> str:
    head = (
        f"{'case':<38}{'step s':>8}{'roll t/s':>10}{'upd t/s':>10}{'tok/mb':>8}{'MFU':>7}"
        f"{'peak GiB':>10}{'est GiB':>9}{'est/pk':>8}{'moved':>7}{'finite':>7}"
    )
    lines = [f"matmul ceiling: {ceiling:.3g} TFLOP/s", head, "-" * len(head)]
    for r in rows:
        start = f"{r['case']:<38}"
        if r["status"] != "ok":
            lines.append(start + "  " + r["status"])
            continue
        peak = f"{r['peak_gib']:.1f}" if r["peak_gib"] is not None else "-"
        ratio = f"{r['est_gib'] / r['peak_gib']:.2f}" if r["peak_gib"] else "-"
        lines.append(
            start
            + f"{r['step_s']:>8.2f}{r['rollout_tps']:>10.0f}{r['update_tps']:>10.0f}"
            + f"{r['micro_batch_tokens']:>8}{r['mfu']:>7.1%}{peak:>10}{r['est_gib']:>9.2f}"
            + f"{ratio:>8}{'yes' if r['moved'] else 'NO':>7}{'yes' if r['finite'] else 'NO':>7}"
        )
    return "\n".join(lines)


def _run_cases(args, cases, tokenizer, codec, ceiling, started: float, report: dict) -> None:
    """Each case in order until `--budget-s` is spent (the rest are listed as skipped); with
    `--study`, TRL's single-agent equivalent after the first case of each shape and workflow."""
    compared = set()
    for i, case in enumerate(cases):
        if time.perf_counter() - started > args.budget_s:
            report["cases"].append(dict(case=str(case), status="skipped: time budget spent"))
            continue
        profile_to = args.profile if i == 0 else None
        if kind := next((k for k in COMPARISONS if getattr(args, f"compare_{k}")), None):
            row = COMPARISONS[kind][0](args, case, tokenizer, codec)
            report[kind] = [*report.get(kind, []), row]
            print(f"{kind} {row}", flush=True)
            continue
        try:
            row = run_case(args, case, tokenizer, codec, ceiling, profile_to)
        except Exception as exc:  # one broken case must not cost the slot's other numbers
            traceback.print_exc()
            row = dict(case=str(case), status=f"failed: {type(exc).__name__}: {exc}"[:300])
            gc.collect()
            if args.device == "cuda":
                torch.cuda.empty_cache()
        report["cases"].append(row)
        print(row, file=sys.stderr, flush=True)
        key = (case.shape, case.workflow, case.prompts, case.group)
        if args.study and key not in compared and row["status"] == "ok":
            compared.add(key)
            remaining = args.budget_s - (time.perf_counter() - started)
            trl = trl_equivalent(args, case, remaining)
            if trl["status"] == "ok":
                trl["troupe_case"], trl["troupe_case_step_s"] = str(case), row["step_s"]
                trl["case_vs_trl"] = row["step_s"] / trl["trl_step_s"]
            report["trl"].append(trl)
            print(f"trl {trl}", file=sys.stderr, flush=True)


def study_table(rows: list[dict], trl: list[dict]) -> str:
    """--study's per-phase seconds (medians of the timed steps; evaluation and checkpoint
    once), and TRL's single-agent step with the same tokens beside the first case of each."""
    names = ("rollout", "scoring", "update", "evaluation", "checkpoint")
    labels = ("rollout s", "scoring s", "update s", "eval s", "ckpt s")
    head = f"{'case':<42}" + "".join(f"{n:>11}" for n in labels) + f"{'gen tok':>9}"
    lines = ["per phase", head, "-" * len(head)]
    for r in rows:
        if r["status"] != "ok":
            continue
        phases = r.get("phases_s", {})
        cells = "".join(f"{phases[n]:>11.3f}" if n in phases else f"{'-':>11}" for n in names)
        lines.append(f"{r['case']:<42}{cells}{r.get('generated_tokens', 0):>9}")
    lines += ["", f"{'TRL, single-agent, same tokens':<42}{'TRL s':>9}{'Troupe s':>10}{'ratio':>8}"]
    for t in trl:
        if t["status"] != "ok":
            lines.append(f"{t['case']:<42}  {t['status'][:80]}")
            continue
        lines.append(
            f"{t['troupe_case']:<42}{t['trl_step_s']:>9.2f}{t['troupe_case_step_s']:>10.2f}"
            + f"{t['case_vs_trl']:>8.2f}"
        )
    return "\n".join(lines)


def _fixed_codec():
    """A small BPE tokenizer and a codec with no end token: every completion runs to its
    budget, a fixed workload per step."""
    from trainer.rollout import Codec
    from trainer.tiny import train_tokenizer

    class FixedLengthCodec(Codec):
        @property
        def eos_ids(self) -> list[int]:
            return [-1]

    tokenizer = train_tokenizer(["Q: (3*4)+(5+2) A: 12+7=\\boxed{19}"] * 50, vocab_size=200)
    return tokenizer, FixedLengthCodec(tokenizer, add_bos=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--cases", help="comma-separated shape:finetune:sharing:workflow:PxG")
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--micro-batch", type=int, default=128)
    parser.add_argument(
        "--micro-batch-tokens", type=int, default=0, help="pack turns, this many tokens a pass"
    )
    for kind, (_, sides) in COMPARISONS.items():
        parser.add_argument(
            f"--compare-{kind}",
            action="store_true",
            help=f"per case, the update of one rollout {sides}, alternated (medians)",
        )
    parser.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up")
    parser.add_argument("--budget-s", type=float, default=330, help="start no case after this")
    parser.add_argument("--profile", metavar="PATH", help="top ops of the first case's update")
    parser.add_argument("--no-sampler-check", action="store_true")
    parser.add_argument("--kernels", choices=KERNELS, default="exact", help="trainer/kernels.py")
    parser.add_argument(
        "--fused-logprobs", action="store_true", help="the cases' updates without whole logits"
    )
    parser.add_argument(
        "--study",
        action="store_true",
        help="the study's workflows × sharing × LoRA/full × 0.6B-4B, per phase, TRL beside",
    )
    parser.add_argument("--study-size", default="64x8", help="--study's PROMPTSxGROUP")
    parser.add_argument("--eval-problems", type=int, default=64, help="--study's evaluation")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    from trainer.versions import problems

    if found := problems():
        parser.error("; ".join(found))
    if args.compare_kernels and args.kernels == "exact":
        parser.error("--compare-kernels compares --kernels liger or compile with the exact path")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA GPU visible; use --device cpu for the smoke test")
    if args.device == "cuda":
        # The memory check compares against this GPU, as a worker's would.
        os.environ["TROUPE_GPU_MEMORY_GB"] = str(torch.cuda.mem_get_info()[1] / 2**30)
    default = DEFAULT_CASES if args.device == "cuda" else CPU_CASES
    if args.study:
        default = study_cases(args.device, args.study_size)
    try:
        cases = [Case.parse(c) for c in (args.cases.split(",") if args.cases else default)]
    except ValueError as exc:
        parser.error(str(exc))
    _trl_stand_in()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    tokenizer, codec = _fixed_codec()
    started = time.perf_counter()
    ceiling = matmul_ceiling(args.device)
    report: dict = {"ceiling_tflops": ceiling, "sampler": [], "cases": [], "trl": []}
    if not args.no_sampler_check:
        checks = [("qwen3-0.6b", 128), ("qwen3-4b", 64)] if args.device == "cuda" else [("tiny", 8)]
        for shape, sequences in checks:
            try:
                row = sampler_check(args.device, shape, sequences, args.new_tokens)
            except Exception as exc:  # report it and go on to the training cases
                traceback.print_exc()
                row = dict(shape=shape, sequences=sequences, error=f"{type(exc).__name__}: {exc}")
            report["sampler"].append(row)
            print(f"sampler {row}", flush=True)
    _run_cases(args, cases, tokenizer, codec, ceiling, started, report)
    print(table(report["cases"], ceiling))
    if args.study:
        print(study_table(report["cases"], report["trl"]))
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    rows = report["cases"]
    bad = [r for r in rows if r["status"] == "ok" and not (r["moved"] and r["finite"])]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
