"""How much accelerator memory a run's update needs, estimated before the run starts.

Standard library only: `trainer/config.py` calls it, so the form, the API and the CLI refuse a
run that cannot fit with the same message, and the worker checks again against its own GPU
before loading anything (`check_fits`). The estimate, in bytes, from the model's shape:

- weights: the frozen base in the load dtype (bf16 on CUDA) under LoRA; under full
  fine-tuning one fp32 master copy per policy, plus a bf16 KL reference when a KL is on, plus
  on CUDA the bf16 copy of the trained weights that autocast caches during a forward pass.
- optimizer: AdamW's two fp32 moments per policy, and fp32 gradients of one policy (policies
  are updated one after another and their gradients freed) — LoRA adapters or whole models.
- snapshots: the per-role gradient vectors of trainer/gradients.py (fp32, one policy's
  optimizer step at a time); none on the device with `grad_snapshots=host` (one transient
  vector), none when they would exceed its budget (it moves them to the host itself).
- activations: one micro-batch of the longest sequence a role can see (its prompt, the outputs
  of the agents before it, its own completion); per token and layer ACT_PER_LAYER elements,
  or, with gradient checkpointing, one layer's worth plus each layer's saved input.
- logits: LOGIT_COPIES copies of (micro-batch × completion × vocab) in the compute dtype.

The coefficients were fitted to measured peaks of tiny Qwen3 models on the CPU
(tests/trainer/test_memory.py keeps them within ±25%); rollout KV caches are not counted
(generation runs before the update and frees them).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.routing import agent_policy, policy_names, role_of, workflow_agents

# Published shapes (config.json of each model), so the web process can estimate without the
# weights. A local directory is read from its own config.json.
KNOWN_SHAPES: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": dict(
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "Qwen/Qwen3-1.7B": dict(
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "Qwen/Qwen3-4B": dict(
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
}
PROMPT_TOKENS = 512  # a task prompt with its instructions, before other agents' outputs
ACT_PER_LAYER = (4, 4, 4.5)  # saved elements per token and layer: × hidden, × q width, × mlp
LOGIT_COPIES = 3
SNAPSHOT_BUDGET_BYTES = 8 * 2**30  # trainer/gradients.py moves vectors beyond this to the host
DEFAULT_GPU_GB = 141.0  # H200; a worker's own GPU overrides it (TROUPE_GPU_MEMORY_GB too)
HEADROOM = 0.9  # allocator fragmentation, CUDA context, kernels' workspaces


def vectors_needed(n_roles: int, max_agents: int) -> int:
    """How many gradient-sized fp32 vectors a GradientTracker holds at its peak."""
    return 2 + (max_agents if max_agents > 1 else 0) + n_roles


def model_shape(model: str) -> dict[str, Any] | None:
    """The architecture fields of `model` when known without loading it, else None."""
    if model in KNOWN_SHAPES:
        return KNOWN_SHAPES[model]
    path = Path(os.path.expanduser(model)) / "config.json"
    if path.is_file():
        return json.loads(path.read_text())
    return None


def _linears(shape: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """(in, out) of each linear layer of one decoder layer."""
    h, i = shape["hidden_size"], shape["intermediate_size"]
    d = shape.get("head_dim") or h // shape["num_attention_heads"]
    q, kv = shape["num_attention_heads"] * d, shape["num_key_value_heads"] * d
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


def parameter_count(shape: dict[str, Any]) -> int:
    h, vocab, layers = shape["hidden_size"], shape["vocab_size"], shape["num_hidden_layers"]
    d = shape.get("head_dim") or h // shape["num_attention_heads"]
    per_layer = sum(a * b for a, b in _linears(shape).values()) + 2 * h + 2 * d
    heads = 1 if shape.get("tie_word_embeddings", True) else 2
    return heads * vocab * h + layers * per_layer + h


def lora_parameter_count(shape: dict[str, Any], r: int, targets: str) -> int:
    """Parameters of one LoRA adapter (peft's all-linear leaves out the output head)."""
    linears = _linears(shape)
    wanted = set(linears) if targets == "all-linear" else {t.strip() for t in targets.split(",")}
    per_layer = sum(r * (a + b) for name, (a, b) in linears.items() if name in wanted)
    return shape["num_hidden_layers"] * per_layer


def longest_sequence(config: Any) -> tuple[int, int]:
    """(prompt tokens, completion tokens) of the longest turn a role can take (upper bound)."""
    context = {
        "voting": config.n_voters,  # the aggregator reads every voter
        "eval_opt": 2 * (config.max_rounds or 3) - 1,  # the history of earlier rounds
        "orch_workers": config.max_subtasks + 1,  # the synthesizer reads plan and workers
    }.get(config.workflow, 0)
    longest = max(config.new_tokens_for(r) for r in config.roles)
    return PROMPT_TOKENS + context * longest, longest


@dataclass
class MemoryEstimate:
    weights: int
    optimizer: int
    snapshots: int
    activations: int
    logits: int
    snapshots_on_device: bool = False  # whether grad_snapshots=host would save memory

    @property
    def total(self) -> int:
        return self.weights + self.optimizer + self.snapshots + self.activations + self.logits

    def parts(self) -> str:
        gib = 2**30
        return ", ".join(
            f"{name} {getattr(self, name) / gib:.1f}"
            for name in ("weights", "optimizer", "snapshots", "activations", "logits")
        )


def estimate(
    config: Any,
    shape: dict[str, Any],
    *,
    on_cuda: bool = True,
    sequence: tuple[int, int] | None = None,
) -> MemoryEstimate:
    """Peak bytes of one training step's update on the accelerator (module docstring)."""
    compute = 2 if on_cuda else 4  # bytes per activation element (bf16 autocast / fp32)
    load = 2 if on_cuda else 4  # bytes per frozen weight
    n = parameter_count(shape)
    policies = policy_names(config)
    if config.finetune == "lora":
        trainable = lora_parameter_count(shape, config.lora_r, config.lora_targets)
        weights = n * load + len(policies) * trainable * 4
    else:
        trainable = n
        kl = config.kl_beta > 0 or any(v > 0 for v in config.kl_beta_per_role.values())
        cast_cache = n * 2 if on_cuda else 0
        weights = len(policies) * n * 4 + (n * load if kl else 0) + cast_cache
    optimizer = len(policies) * trainable * 8 + trainable * 4

    snapshots, snapshots_on_device = 0, False
    roles_of: dict[str, set[str]] = {}
    agents_of: dict[tuple[str, str], int] = {}
    for agent in workflow_agents(config):
        role = role_of(agent)
        policy = agent_policy(config, agent, role)
        roles_of.setdefault(policy, set()).add(role)
        agents_of[(policy, role)] = agents_of.get((policy, role), 0) + 1
    for policy, roles in roles_of.items():
        segments = sum(agents_of[(policy, r)] for r in roles)
        if segments < 2:
            continue
        most = max(agents_of[(policy, r)] for r in roles)
        size = vectors_needed(len(roles), most) * trainable * 4
        on_device = config.grad_snapshots == "device" and size <= SNAPSHOT_BUDGET_BYTES
        snapshots = max(snapshots, size if on_device else trainable * 4)
        snapshots_on_device = snapshots_on_device or on_device

    prompt, completion = sequence or longest_sequence(config)
    tokens = config.micro_batch_size * (prompt + completion)
    h, layers = shape["hidden_size"], shape["num_hidden_layers"]
    q = shape["num_attention_heads"] * (shape.get("head_dim") or h // shape["num_attention_heads"])
    mlp = shape["intermediate_size"]
    per_layer = int(ACT_PER_LAYER[0] * h + ACT_PER_LAYER[1] * q + ACT_PER_LAYER[2] * mlp)
    if config.checkpointing:
        activations = tokens * (layers * h + per_layer) * compute
    else:
        activations = tokens * layers * per_layer * compute
    logits = LOGIT_COPIES * config.micro_batch_size * (completion + 1) * shape["vocab_size"]
    logits *= compute
    return MemoryEstimate(weights, optimizer, snapshots, activations, logits, snapshots_on_device)


def gpu_bytes() -> float:
    """The GPU memory a config is checked against before a worker has one to ask."""
    return float(os.environ.get("TROUPE_GPU_MEMORY_GB", DEFAULT_GPU_GB)) * 2**30


def fit_problem(config: Any, capacity: float | None = None) -> str | None:
    """Why `config` cannot fit on a GPU of `capacity` bytes (None: it fits, or is unknown)."""
    shape = model_shape(config.model)
    if shape is None or config.device == "cpu":
        return None
    capacity = gpu_bytes() if capacity is None else capacity
    need = estimate(config, shape)
    if need.total <= capacity * HEADROOM:
        return None
    gib = 2**30
    fixes = []
    if config.finetune == "full":
        fixes.append("finetune=lora")
    if need.snapshots_on_device:
        fixes.append("grad_snapshots=host")
    if not config.checkpointing:
        fixes.append("grad_checkpointing=on")
    if config.micro_batch_size > 1:
        fixes.append(f"a smaller micro_batch_size (now {config.micro_batch_size})")
    if config.sharing != "shared":
        fixes.append("sharing=shared (one policy)")
    return (
        f"needs about {math.ceil(need.total / gib)} GiB of GPU memory ({need.parts()} GiB) "
        f"but the GPU has {capacity / gib:.0f} GiB; try {', '.join(fixes)}"
    )
