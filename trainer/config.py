"""One run's configuration: the flat, validated, hashable contract of docs/design.md §3.

The browser form, the JSON API and the CLI all build configs through `make_config` (or
`expand_matrix` for a whole experiment), so a bad value is rejected with the same message
everywhere. This module imports only the standard library: the web process uses it and must
never pull in torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

# The workflows, their roles and the sharing modes are defined once, in trainer/routing.py;
# the tasks in trainer/tasks (each its own Task subclass).
from trainer.routing import SHARING, WORKFLOW_ROLES, WORKFLOWS  # noqa: F401 - re-exported
from trainer.tasks import TASK_CLASSES, task_class
from trainer.user_paths import is_local_model
from vocabulary.names import MATRIX_AXES, REWARD_BROADCAST, REWARD_MODES, SHARED

TASKS = tuple(TASK_CLASSES)
FINETUNE = ("lora", "full")
GRAD_CHECKPOINTING = ("auto", "on", "off")
GRAD_SNAPSHOTS = ("device", "host")
KERNELS = ("exact", "liger", "compile")  # trainer/kernels.py
SCHEDULES = ("cosine", "linear", "constant")
LOSS_AGG = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
GROUP_KEYS = ("problem_role", "problem_agent")
DEVICES = ("auto", "cpu", "cuda")
ROLLOUT_ENGINES = ("hf", "vllm")
TINY_MODELS = ("tiny-s", "tiny-m", "tiny-l")
PAPER_MODELS = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B")
NAMED_DATASETS = {
    # dataset -> the task it belongs to (None: any task)
    "synthetic": None,
    "dapo_math": "math",
    "gsm_symbolic": "math",
    "deepcoder": "code",
    "humaneval": "code",
}
# Whole-number fields are stored in 32-bit integer columns (a run's seed, its step count);
# text fields in columns of at most MAX_TEXT characters (a run's model).
INT_MAX = 2**31 - 1
MAX_TEXT = 200
MAX_RUNS_PER_EXPERIMENT = 1000

_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _f(default: Any, help: str, group: str, choices: tuple | None = None, **kw: Any) -> Any:
    """A dataclass field carrying the form/CLI metadata: help line, group, allowed values."""
    meta = {"help": help, "group": group, "choices": choices, **kw}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Config:
    # --- what runs -------------------------------------------------------------------------
    workflow: str = _f("single", "Multi-agent workflow to train", "run", WORKFLOWS)
    task: str = _f(
        "math", "Task family: math (boxed answer) or code (run against tests)", "run", TASKS
    )
    dataset: str = _f(
        "synthetic",
        "synthetic (built in), dapo_math, gsm_symbolic, deepcoder, humaneval, or a .jsonl path "
        "(from the web: a file in datasets/ of the data directory)",
        "run",
    )
    model: str = _f(
        "tiny-s",
        "tiny-s/m/l (built-in, CPU) or a Hugging Face id / local directory (from the web: one "
        "in models/ of the data directory)",
        "run",
    )
    sharing: str = _f(
        SHARED,
        "shared: one policy; per_role: one per role; per_agent: one per agent",
        "run",
        SHARING,
    )
    seed: int = _f(0, "Seed for data, sampling and initialisation", "run", minimum=0)
    device: str = _f("auto", "auto picks cuda when available", "run", DEVICES)
    world_size: int = _f(
        1,
        "Processes (one per GPU) the run trains on, data parallel: each rolls out its share of "
        "a step's problems and holds every LoRA policy, or a shard of each fully fine-tuned "
        "one (FSDP2); gradients and statistics are summed exactly",
        "run",
        minimum=1,
        maximum=64,
    )
    rollout_engine: str = _f(
        "hf",
        "hf: the exact, reproducible sampler (the reference); vllm: vLLM in its own process "
        "and venv (`make vllm-venv`), fast on a GPU; the trainer recomputes the log-probs",
        "run",
        ROLLOUT_ENGINES,
    )
    # --- fine-tuning -----------------------------------------------------------------------
    finetune: str = _f(
        "lora",
        "lora: one adapter per policy; full: one model copy per policy",
        "finetune",
        FINETUNE,
    )
    lora_r: int = _f(64, "LoRA rank", "finetune", minimum=1)
    lora_alpha: int = _f(32, "LoRA alpha (scale = alpha / r)", "finetune", minimum=1)
    lora_targets: str = _f("all-linear", "all-linear, or comma-separated module names", "finetune")
    grad_checkpointing: str = _f(
        "auto",
        "Recompute activations in the backward pass (less memory, ~30% more update time); "
        "auto: on where a real model's update would not fit the GPU without it",
        "finetune",
        GRAD_CHECKPOINTING,
    )
    grad_snapshots: str = _f(
        "device",
        "Where the per-role gradient snapshots live: device (GPU; moved to host memory when "
        "too large) or host (always host memory: slower, frees GPU memory)",
        "finetune",
        GRAD_SNAPSHOTS,
    )
    kernels: str = _f(
        "exact",
        "How the update's layers run: exact (the reference); liger: Liger Kernel's fused "
        "RMSNorm and SwiGLU (CUDA only); compile: the decoder layers compiled by torch.compile "
        "(the first step pays the compile); the same loss up to rounding",
        "finetune",
        KERNELS,
    )
    # --- RL --------------------------------------------------------------------------------
    steps: int = _f(500, "Training steps (one rollout batch + update each)", "rl", minimum=1)
    prompts_per_step: int = _f(64, "Problems per step", "rl", minimum=1)
    group_size: int = _f(8, "Rollouts per problem (the GRPO group)", "rl", minimum=2)
    lr: float = _f(2e-5, "AdamW learning rate", "rl", minimum=0.0, exclusive=True, maximum=1.0)
    warmup_steps: int = _f(15, "Linear warm-up steps", "rl", minimum=0)
    schedule: str = _f("cosine", "Learning-rate schedule after warm-up", "rl", SCHEDULES)
    grad_clip: float = _f(1.0, "Max gradient norm per policy (0 = off)", "rl", minimum=0.0)
    mini_batches: int = _f(1, "Optimizer steps per training step (batch split)", "rl", minimum=1)
    micro_batch_size: int = _f(
        32, "Sequences per forward/backward (memory knob only)", "rl", minimum=1
    )
    micro_batch_tokens: int = _f(
        0,
        "Tokens per forward/backward, turns packed end to end in rows, their padded ends "
        "counted (0 = padded micro-batches of micro_batch_size sequences; -1 = the largest "
        "budget the GPU's memory allows); the same loss up to rounding",
        "rl",
        minimum=-1,
    )
    batch_adapters: bool = _f(
        False,
        "LoRA: run several policies' turns through one forward and backward pass, each token "
        "through its own adapter (the same gradients up to rounding; measured on a GPU before "
        "it becomes the default)",
        "rl",
    )
    fused_logprobs: bool = _f(
        False,
        "Compute the update's log-probs from the final hidden states in chunks, never holding "
        "the whole vocabulary's logits (Liger Kernel; the same loss up to rounding, far less "
        "memory, one process, no LoRA on lm_head; measured on a GPU before it becomes the "
        "default)",
        "rl",
    )
    rollout_batch: int = _f(
        0,
        "Max sequences per generation call (0 = a stage's whole group at once); smaller "
        "bounds the rollout's KV cache, the sampled tokens stay the same",
        "rl",
        minimum=0,
    )
    is_cap: float = _f(
        3.0,
        "rollout_engine vllm: truncated importance-sampling cap, min(π_old/π_vllm, cap) "
        "per token (TRL's vllm_importance_sampling_cap)",
        "rl",
        minimum=1.0,
    )
    clip_low: float = _f(0.2, "PPO ratio clip below 1", "rl", minimum=0.0)
    clip_high: float = _f(0.28, "PPO ratio clip above 1 (clip-higher)", "rl", minimum=0.0)
    kl_beta: float = _f(0.0, "KL coefficient to the base model (0 = no KL loss)", "rl", minimum=0.0)
    kl_beta_per_role: dict = _f({}, "Per-role KL anchors, e.g. generator=0.05", "rl")
    coherence_lambda: float = _f(
        0.0,
        "Coherence regulariser: scale a role's gradient by 1 - λ·max(0, cos(g, EMA g))",
        "rl",
        minimum=0.0,
    )
    coherence_ema: float = _f(
        0.9, "EMA decay of the coherence regulariser", "rl", minimum=0.0, maximum=1.0
    )
    temperature: float = _f(
        0.7, "Sampling temperature for rollouts", "rl", minimum=0.0, exclusive=True
    )
    max_new_tokens: int = _f(1024, "Max tokens a turn may generate", "rl", minimum=1)
    max_new_tokens_per_role: dict = _f({}, "Per-role overrides, e.g. aggregator=64", "rl")
    frozen_roles: str = _f(
        "",
        "Roles kept at their base weights, never updated (comma-separated, e.g. aggregator; "
        "per_role or per_agent only): an ablation, and a role whose attribution must be 0",
        "rl",
    )
    loss_agg: str = _f("seq-mean-token-mean", "How token losses are averaged", "rl", LOSS_AGG)
    # --- credit ----------------------------------------------------------------------------
    reward_mode: str = _f(
        REWARD_BROADCAST,
        "broadcast: final reward to every turn; per_role: a role's own score",
        "credit",
        REWARD_MODES,
    )
    group_key: str = _f(
        "problem_role", "GRPO groups: (problem, role) or (problem, agent)", "credit", GROUP_KEYS
    )
    # --- workflow knobs --------------------------------------------------------------------
    n_voters: int = _f(3, "Voting: parallel generators", "workflow", minimum=1, maximum=16)
    max_rounds: int | None = _f(
        None,
        "Eval-Opt: max generate/evaluate rounds (default 3 math, 2 code)",
        "workflow",
        minimum=1,
        maximum=10,
    )
    max_subtasks: int = _f(
        3, "Orch-Workers: max subtasks (= workers)", "workflow", minimum=1, maximum=8
    )
    distinct_prompts: bool = _f(
        False, "Paraphrase the prompts of parallel same-role agents", "workflow"
    )
    # --- evaluation and bookkeeping --------------------------------------------------------
    eval_every: int = _f(
        10, "Evaluate every N steps (step 0, the base model, always)", "eval", minimum=1
    )
    eval_problems: int = _f(128, "Held-out problems per evaluation", "eval", minimum=1)
    eval_temperature: float = _f(
        0.0, "Sampling temperature for evaluation (0 = greedy)", "eval", minimum=0.0
    )
    eval_samples: int = _f(
        1, "Samples per held-out problem; accuracy is their mean (avg@k)", "eval", minimum=1
    )
    checkpoint_every: int = _f(50, "Checkpoint every N steps", "eval", minimum=1)
    stop_after_cliff: int = _f(
        0,
        "Stop N evaluations after the live radar confirms a cliff (0 = never); ends succeeded",
        "eval",
        minimum=0,
    )
    episodes_per_step: int = _f(
        2,
        "Problems per training step whose whole GRPO group is recorded as episodes "
        "(prompts, completions, rewards, advantages; 0 = none)",
        "eval",
        minimum=0,
        maximum=64,
    )
    episodes_probe: int = _f(
        4,
        "Held-out problems whose episodes every evaluation records: the same problems each "
        "time, to compare across steps (0 = none)",
        "eval",
        minimum=0,
        maximum=64,
    )
    episodes_grad_share: bool = _f(
        False,
        "Record each recorded training episode's share of each role's gradient (the gradient "
        "drill-down; costs extra micro-batches: off by default, BENCHMARKS.md)",
        "eval",
    )
    second_opinion_sample: int = _f(
        4,
        "Code tasks: passing answers of each step checked again by the independent second "
        "opinion (finals; under per_role every scored intermediate answer too; 0 = none)",
        "eval",
        minimum=0,
        maximum=256,
    )
    init_from: str = _f(
        "",
        "Branch: start from another run's checkpoint when the run has none of its own: RUN:NAME "
        "on the web (7:best, 7:step-120), a checkpoint directory on the command line; empty = "
        "from the base model",
        "eval",
    )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def hash(self) -> str:
        """Stable short hash of the whole config (the key a run is stored and cached under)."""
        values = self.to_dict()
        # Fields added after runs were stored count only when set, so the runs (and their
        # checkpoints) from before keep their hash and can resume.
        for name, default in _LATER_FIELDS.items():
            if values[name] == default:
                del values[name]
        blob = json.dumps(values, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def roles(self) -> tuple[str, ...]:
        return WORKFLOW_ROLES[self.workflow]

    def new_tokens_for(self, role: str) -> int:
        return int(self.max_new_tokens_per_role.get(role, self.max_new_tokens))

    @property
    def frozen(self) -> tuple[str, ...]:
        """The roles `frozen_roles` keeps at their base weights, in workflow order."""
        return tuple(r for r in self.frozen_roles.split(",") if r)

    def kl_for(self, role: str) -> float:
        return float(self.kl_beta_per_role.get(role, self.kl_beta))

    @property
    def checkpointing(self) -> bool:
        """Whether gradient checkpointing is on. `auto`: for a real model whose update would not
        fit on the GPU without it (recomputing every layer costs a third more compute and
        kernels, which no run should pay where memory does not ask for it); never for tiny
        ones."""
        if self.grad_checkpointing == "auto":
            from trainer.memory import needs_checkpointing

            return self.model not in TINY_MODELS and needs_checkpointing(self)
        return self.grad_checkpointing == "on"

    @property
    def token_budget(self) -> int:
        """Tokens per packed forward/backward pass (0: padded micro-batches). -1 (`auto`): the
        largest budget whose update the memory estimate fits on the GPU (trainer/memory.py)."""
        from trainer.memory import token_budget  # memory.py builds on this module

        return token_budget(self)


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Config)}
# name -> default of fields added after the first runs were stored (see Config.hash)
_LATER_FIELDS = {
    "stop_after_cliff": 0,
    "init_from": "",
    "eval_samples": 1,
    "grad_checkpointing": "auto",
    "grad_snapshots": "device",
    "rollout_batch": 0,
    "micro_batch_tokens": 0,
    "batch_adapters": False,
    "fused_logprobs": False,
    "kernels": "exact",
    "world_size": 1,
    "episodes_per_step": 2,
    "episodes_probe": 4,
    "episodes_grad_share": False,
    "rollout_engine": "hf",
    "is_cap": 3.0,
    "frozen_roles": "",
    "second_opinion_sample": 4,
}

PRESETS: dict[str, dict[str, Any]] = {
    # The study's setup (docs/design.md §1). Needs a GPU node and the datasets on local disk.
    "paper": {
        "model": "Qwen/Qwen3-0.6B",
        "dataset": "paper",  # resolved per task: dapo_math or deepcoder
        "finetune": "lora",
        "lora_r": 64,
        "lora_alpha": 32,
        "lora_targets": "all-linear",
        "steps": 500,
        "prompts_per_step": 64,
        "group_size": 8,
        "lr": 2e-5,
        "warmup_steps": 15,
        "schedule": "cosine",
        "clip_low": 0.2,
        "clip_high": 0.28,
        "kl_beta": 0.0,
        "temperature": 0.7,
        "max_new_tokens": 2048,
        "loss_agg": "seq-mean-token-mean",
        "eval_every": 10,
        "eval_problems": 512,
        "checkpoint_every": 25,
        "micro_batch_size": 16,
        # Sequences per generation call: a whole group (512 episodes × up to 3 agents, up to
        # 12,800 tokens each) would need a KV cache of 140-1,170 GiB; 32 fits every paper
        # LoRA cell on one H200 (trainer/memory.py; BENCHMARKS.md, "The precision path and the
        # memory estimate").
        "rollout_batch": 32,
        "device": "cuda",
    },
    # A tiny built-in model on synthetic data: minutes on two CPU cores.
    "cpu-demo": {
        "model": "tiny-s",
        "dataset": "synthetic",
        "finetune": "lora",
        "lora_r": 8,
        "lora_alpha": 16,
        "lora_targets": "all-linear",
        "steps": 30,
        "prompts_per_step": 16,
        "group_size": 8,
        "lr": 3e-3,
        "warmup_steps": 2,
        "schedule": "cosine",
        "max_new_tokens": 24,
        "eval_every": 5,
        # 256 distinct problems, each sampled 4 times at the rollout temperature (avg@4):
        # accuracy then moves smoothly as GRPO shifts the policy, where greedy decoding
        # would only flip when an answer's probability crosses one half. Held-out accuracy
        # rises 0.085-0.22 in 30 steps against a paired band of about ±0.02-0.04 (BENCHMARKS.md,
        # "Does the cpu-demo learn?"). An evaluation costs about two training steps.
        "eval_problems": 256,
        "eval_temperature": 0.7,
        "eval_samples": 4,
        "checkpoint_every": 5,
        "micro_batch_size": 64,
        "device": "cpu",
    },
}


class ConfigError(ValueError):
    """Invalid config values; `errors` maps each bad field to a message saying how to fix it."""

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def _coerce(name: str, value: Any) -> Any:
    """Turn form/CLI strings into the field's type; raise ValueError with a readable reason."""
    f = FIELDS[name]
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{value!r} is not a boolean (use true or false)")
    if kind in ("int", "int | None"):
        if value is None or (kind == "int | None" and str(value).strip() in ("", "none", "None")):
            if kind == "int | None":
                return None
            raise ValueError("a whole number is required")
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a whole number")
        if isinstance(value, float) and value.is_integer():
            return int(value)
        try:
            return int(str(value).strip())
        except ValueError:
            raise ValueError(f"{value!r} is not a whole number") from None
    if kind == "float":
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a number")
        try:
            number = (
                float(str(value).strip()) if not isinstance(value, (int, float)) else float(value)
            )
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} is not a finite number")
        return number
    if kind == "dict":
        return _parse_role_map(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    return value.strip()


def _parse_role_map(value: Any) -> dict[str, float]:
    """Accept {"generator": 0.1} or "generator=0.1,evaluator=0" (the form and CLI spelling)."""
    if value in (None, ""):
        return {}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, str):
        items = []
        for part in value.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"{part.strip()!r} should look like role=value")
            role, number = part.split("=", 1)
            items.append((role, number))
    else:
        raise ValueError(f"{value!r} should be role=value pairs separated by commas")
    parsed = {}
    for role, number in items:
        try:
            parsed[str(role).strip()] = float(number)
        except (TypeError, ValueError):
            raise ValueError(f"{number!r} for role {role!r} is not a number") from None
    return parsed


def _check_field(name: str, value: Any) -> str | None:
    meta = FIELDS[name].metadata
    if meta.get("choices") and value not in meta["choices"]:
        return f"{value!r} is not one of {', '.join(meta['choices'])}"
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            return f"at most {MAX_TEXT} characters (this is {len(value)})"
        if "\x00" in value:
            return "must not contain NUL characters"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_MAX:
        return f"{value} is too big: at most {INT_MAX}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = meta.get("minimum"), meta.get("maximum")
        if low is not None and (value < low or (meta.get("exclusive") and value == low)):
            return (
                f"{value} must be {'greater than' if meta.get('exclusive') else 'at least'} {low}"
            )
        if high is not None and value > high:
            return f"{value} must be at most {high}"
    return None


def _check_model(model: str) -> str | None:
    if model in TINY_MODELS or _HF_ID.match(model) or is_local_model(model):
        return None
    return (
        f"{model!r} is not a known model: use one of {', '.join(TINY_MODELS)}, "
        "a Hugging Face id such as Qwen/Qwen3-0.6B, or a local directory path"
    )


def _check_dataset(dataset: str, task: str) -> str | None:
    if dataset.endswith(".jsonl"):
        return None
    if dataset not in NAMED_DATASETS:
        return (
            f"{dataset!r} is not a dataset: use one of {', '.join(NAMED_DATASETS)} "
            "or a path to a .jsonl file"
        )
    wanted = NAMED_DATASETS[dataset]
    if wanted is not None and wanted != task:
        return f"{dataset!r} is a {wanted} dataset but task is {task!r}"
    return None


def make_config(preset: str | None = None, **values: Any) -> Config:
    """Build a validated Config from a preset and field values (strings are coerced).

    Raises ConfigError naming every bad field at once, so a form can show them all.
    """
    merged = _merged_fields(preset, values)
    task = task_class(merged.get("task", FIELDS["task"].default))
    if merged.get("dataset") == "paper":
        merged["dataset"] = task.paper_dataset
    if merged.get("max_rounds") is None:
        merged["max_rounds"] = task.max_rounds
    config = Config(**merged)

    errors: dict[str, str] = {}
    if problem := _check_model(config.model):
        errors["model"] = problem
    if problem := _check_dataset(config.dataset, config.task):
        errors["dataset"] = problem
    config = _check_roles(config, errors)
    if config.lora_targets != "all-linear" and not all(
        re.fullmatch(r"[\w.]+", t.strip()) for t in config.lora_targets.split(",")
    ):
        errors["lora_targets"] = "use all-linear or comma-separated module names like q_proj,v_proj"
    elif _is_qwen3(config.model) and (unknown := _targets(config) - set(QWEN3_TARGETS)):
        errors["lora_targets"] = (
            f"{', '.join(sorted(unknown))}: no such layer in {config.model}; use all-linear or "
            f"some of {', '.join(QWEN3_TARGETS)}"
        )
    if config.kernels == "liger" and config.device == "cpu":
        errors["kernels"] = "liger's kernels run on CUDA only: use exact or compile on the CPU"
    if config.fused_logprobs and config.finetune == "lora" and "lm_head" in _targets(config):
        errors["fused_logprobs"] = (
            "fused log-probs need the output layer without LoRA: drop lm_head from lora_targets"
        )
    _check_ranks(config, errors)
    if not errors and (problem := fit_problem(config)):
        errors["memory"] = problem  # not one field's fault: the message names what to change
    if errors:
        raise ConfigError(errors)
    return config


def _merged_fields(preset: str | None, values: dict[str, Any]) -> dict[str, Any]:
    """The preset's values overridden by `values`, each coerced and checked on its own;
    raises ConfigError naming every bad field."""
    errors: dict[str, str] = {}
    merged: dict[str, Any] = {}
    if preset:
        if preset not in PRESETS:
            errors["preset"] = f"{preset!r} is not one of {', '.join(PRESETS)}"
        else:
            merged.update(PRESETS[preset])
    for name, value in values.items():
        if name not in FIELDS:
            errors[name] = f"unknown field; known fields are {', '.join(FIELDS)}"
            continue
        merged[name] = value
    for name, value in list(merged.items()):
        if name == "dataset" and value == "paper":
            continue
        try:
            merged[name] = _coerce(name, value)
        except ValueError as exc:
            errors[name] = str(exc)
    for name, value in merged.items():
        if name not in errors and (problem := _check_field(name, value)):
            errors[name] = problem
    if errors:
        raise ConfigError(errors)
    return merged


def _check_roles(config: Config, errors: dict[str, str]) -> Config:
    """Add to `errors` what is wrong with the per-role settings (roles the workflow lacks,
    bad values); returns the config with its frozen roles spelled one way."""
    for name in ("kl_beta_per_role", "max_new_tokens_per_role"):
        unknown = sorted(set(getattr(config, name)) - set(config.roles))
        if unknown:
            errors[name] = (
                f"{', '.join(unknown)} not a role of {config.workflow}; "
                f"its roles are {', '.join(config.roles)}"
            )
    if problem := _frozen_problem(config):
        errors["frozen_roles"] = problem
    elif config.frozen_roles:  # one spelling per set of roles, so one hash
        config = dataclasses.replace(
            config, frozen_roles=",".join(r for r in config.roles if r in _named(config))
        )
    if any(v < 0 for v in config.kl_beta_per_role.values()):
        errors["kl_beta_per_role"] = "KL coefficients must be at least 0"
    if any(v < 1 or v != int(v) for v in config.max_new_tokens_per_role.values()):
        errors["max_new_tokens_per_role"] = "token limits must be whole numbers of at least 1"
    return config


def _check_ranks(config: Config, errors: dict[str, str]) -> None:
    """Add to `errors` what cannot run over `world_size` ranks."""
    if config.world_size > config.prompts_per_step:
        errors["world_size"] = (
            f"{config.world_size} ranks but {config.prompts_per_step} problems per step: "
            "every rank needs at least one problem (lower world_size or raise prompts_per_step)"
        )
    if config.world_size > 1 and config.finetune == "full" and config.coherence_lambda > 0:
        # FSDP2 shards full fine-tuning (trainer/sharding.py); the regulariser's EMA vectors
        # would be per-rank shards that the single-process checkpoint layout cannot hold.
        errors["coherence_lambda"] = (
            "the coherence regulariser is not available for full fine-tuning over several "
            "ranks (sharded with FSDP2): set coherence_lambda 0, world_size 1 or finetune lora"
        )
    if config.world_size > 1 and config.finetune == "full" and config.episodes_grad_share:
        # The drill-down's snapshots would be rank 0's shards of each gradient, and its extra
        # micro-batches would put rank 0 out of step with the others' sharded passes.
        errors["episodes_grad_share"] = (
            "the gradient drill-down is not available for full fine-tuning over several ranks "
            "(sharded with FSDP2): turn it off, set world_size 1 or finetune lora"
        )
    if config.fused_logprobs and config.world_size > 1:
        # The fused log-probs read the output layer's weight without calling it, so FSDP2
        # would not gather it and DDP would not see the pass.
        errors["fused_logprobs"] = "fused log-probs run in one process: set world_size 1"
    if config.rollout_engine == "vllm" and config.world_size > 1:
        errors["rollout_engine"] = (
            "vllm serves one process's rollouts; use world_size 1 or rollout_engine hf"
        )


# The layers of a dense Qwen3 decoder LoRA can target (its linear layers, the head, and the
# embedding, trainer/policies.py): checked for the models whose architecture is known before
# loading; a local directory or another id (a mixture of experts, a VL model) is peft's to check.
QWEN3_TARGETS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "lm_head",
    "embed_tokens",
)
_DENSE_QWEN3 = re.compile(r"Qwen/Qwen3-\d+(\.\d+)?B(-Base)?")


def _is_qwen3(model: str) -> bool:
    return model in TINY_MODELS or _DENSE_QWEN3.fullmatch(model) is not None


def _targets(config: Config) -> set[str]:
    """The module names LoRA targets (all-linear: none named; peft leaves the head out)."""
    if config.lora_targets == "all-linear":
        return set()
    return {t.strip().rsplit(".", 1)[-1] for t in config.lora_targets.split(",")}


def _named(config: Config) -> set[str]:
    return {r.strip() for r in config.frozen_roles.split(",") if r.strip()}


def _frozen_problem(config: Config) -> str | None:
    """Why `frozen_roles` cannot be kept as asked; None when it can (or is empty)."""
    named = _named(config)
    if not named:
        return None
    unknown = sorted(named - set(config.roles))
    if unknown:
        return (
            f"{', '.join(unknown)} not a role of {config.workflow}; "
            f"its roles are {', '.join(config.roles)}"
        )
    if config.sharing == SHARED:
        # One policy serves every role: it moves whenever any role trains.
        return (
            "under sharing shared every role uses one policy, so no role can stay at the base "
            "weights: use per_role or per_agent"
        )
    if named == set(config.roles):
        return "every role would be frozen and nothing would train: leave at least one out"
    return None


def fit_problem(config: Config, capacity: float | None = None) -> str | None:
    """Why `config` cannot fit on the GPU (trainer/memory.py); None when it fits."""
    from trainer.memory import fit_problem as problem  # memory.py builds on this module

    return problem(config, capacity)


def config_from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a stored config (e.g. from a run row or config.json), validating it again."""
    return make_config(**data)


def expand_matrix(
    base: dict[str, Any] | None = None,
    matrix: dict[str, list] | None = None,
    preset: str | None = None,
) -> list[Config]:
    """Every cell of workflow × task × model × sharing × seed; axes left out take base's value.

    Errors name the axis (`matrix.workflow`) or the first bad cell, so the caller can show them.
    """
    base = dict(base or {})
    matrix = dict(matrix or {})
    errors: dict[str, str] = {}
    for axis, values in matrix.items():
        if axis not in MATRIX_AXES:
            errors[f"matrix.{axis}"] = f"not a matrix axis; axes are {', '.join(MATRIX_AXES)}"
        elif not isinstance(values, (list, tuple)) or not values:
            errors[f"matrix.{axis}"] = "give a non-empty list of values"
        elif len(set(map(str, values))) != len(values):
            errors[f"matrix.{axis}"] = "values repeat"
    if errors:
        raise ConfigError(errors)
    axes = [a for a in MATRIX_AXES if a in matrix]
    count = 1
    for axis in axes:
        count *= len(matrix[axis])
    if count > MAX_RUNS_PER_EXPERIMENT:
        raise ConfigError(
            {"matrix": f"{count} runs is more than the limit of {MAX_RUNS_PER_EXPERIMENT}"}
        )
    # Validate the base once so its errors are reported against the field, not a cell.
    probe = {**base, **{a: matrix[a][0] for a in axes}}
    make_config(preset, **probe)
    configs = []
    for cell in itertools.product(*(matrix[a] for a in axes)):
        values = {**base, **dict(zip(axes, cell))}
        try:
            configs.append(make_config(preset, **values))
        except ConfigError as exc:
            where = ", ".join(f"{a}={v}" for a, v in zip(axes, cell))
            raise ConfigError(
                {
                    f"matrix.{k}" if k in axes else k: f"{msg} (in cell {where})"
                    for k, msg in exc.errors.items()
                }
            ) from None
    return configs


def matrix_size(matrix: dict[str, list]) -> int:
    """How many runs a matrix makes (what the form's live counter shows)."""
    count = 1
    for axis in MATRIX_AXES:
        if matrix.get(axis):
            count *= len(matrix[axis])
    return count


def field_help() -> list[dict[str, Any]]:
    """Field descriptions for forms and `--help`: name, default, help, group, choices, type."""
    rows = []
    for name, f in FIELDS.items():
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        rows.append(
            {
                "name": name,
                "default": default,
                "type": f.type if isinstance(f.type, str) else f.type.__name__,
                **{k: v for k, v in f.metadata.items()},
            }
        )
    return rows
