"""How much accelerator memory a run's update needs, estimated before the run starts.

Standard library only: `trainer/config.py` calls it, so the form, the API and the CLI refuse a
run that cannot fit with the same message, and the worker checks again against its own GPU
before loading anything (`check_fits`). The estimate, in bytes, from the model's shape:

- weights: the frozen base in the load dtype (bf16 on CUDA) under LoRA; under full
  fine-tuning one fp32 master copy per policy, plus a bf16 KL reference when a KL is on, plus
  on CUDA the bf16 copy of the trained weights that autocast caches during a forward pass.
  Full fine-tuning over several ranks is sharded (FSDP2, trainer/sharding.py): the master
  copies, gradients, AdamW moments and snapshots are divided by `world_size`, nothing is
  cached by autocast, and the rollout holds every policy all-gathered in the compute dtype.
- optimizer: AdamW's two fp32 moments per policy, and fp32 gradients: of every policy under
  LoRA with `batch_adapters` on one process (their optimizer steps run together,
  trainer/passes.py), else of one policy (policies are updated one after another and their
  gradients freed).
- snapshots: the per-role gradient vectors of trainer/gradients.py (fp32; every policy's
  together where their optimizer steps run together, each within its share of the budget,
  else one policy's optimizer step at a time); none on the device with `grad_snapshots=host` (one
  transient vector), none when they would exceed its budget (it moves them to the host).
- activations: one micro-batch (packed, `micro_batch_tokens` tokens with logits on the longest
  turn's completion share of them; else `micro_batch_rows`: an agent's turns when fewer than
  `micro_batch_size`) of the longest sequence a role can see (its prompt, the outputs of the
  agents before it, its own completion); per token and layer ACT_PER_LAYER elements,
  or, with gradient checkpointing, one layer's worth plus each layer's saved input.
- logits: LOGIT_COPIES copies of (micro-batch × completion × vocab) in the compute dtype; with
  `fused_logprobs` (trainer/head_logprobs.py) only Liger's chunks (FUSED_CHUNK), the
  entropy statistic's ENTROPY_ROWS rows of logits, fp32 gradients of the kept hidden states,
  and under full fine-tuning an fp32 gradient of the output layer.

The rollout phase (`rollout_estimate`) is counted too, and the run's peak is the larger of
the two phases. One generation call (trainer/sampling.py) decodes every sequence one policy
is asked for in one stage — a stage's whole group, e.g. 64 problems × 8 samples × 3 voters =
1,536 sequences — or at most `rollout_batch` of them. Its peak is the larger of:

- prefill: the static KV cache (allocated whole, prompt + new tokens, by the prompt pass),
  the last position's logits (the sampler asks for that one only, `logits_to_keep=1`), the
  forward's transient activations (PREFILL_PER_TOKEN elements per token: the MLP's
  intermediates dominate) and the prompt pass's boolean mask (prompt × cache columns);
- the last decode step: the KV cache, 2 × layers × kv_heads × head_dim × bytes per token, of
  sequences × (prompt + new tokens), and the last position's logits with the sampler's
  temporaries (DECODE_BYTES_PER_LOGIT per sequence and vocab entry: an fp32 copy, the
  Gumbel noise's int64/float64 intermediates, the log-softmax).

Resident then: the weights as the update counts them and AdamW's moments (kept between
steps); no gradients, snapshots or update activations.

The coefficients were fitted to measured peaks of tiny Qwen3 models on the CPU
(tests/trainer/test_memory.py keeps both phases within ±25%).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.routing import agent_policy, policy_names, role_of, workflow_agents
from vocabulary.names import PER_AGENT, SHARED

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
# The built-in tiny models (trainer/tiny.py's SPECS, its vocabulary and tied head; a test
# keeps the two equal: tiny.py imports torch, which the web process must not). Only the host
# memory check reads them: a tiny model trains on the CPU.
TINY_SHAPES: dict[str, dict[str, Any]] = {
    name: dict(spec, vocab_size=320, tie_word_embeddings=True)
    for name, spec in {
        "tiny-s": dict(
            hidden_size=96,
            intermediate_size=256,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=24,
        ),
        "tiny-m": dict(
            hidden_size=192,
            intermediate_size=512,
            num_hidden_layers=6,
            num_attention_heads=6,
            num_key_value_heads=2,
            head_dim=32,
        ),
        "tiny-l": dict(
            hidden_size=384,
            intermediate_size=1024,
            num_hidden_layers=8,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=48,
        ),
    }.items()
}
PROMPT_TOKENS = 512  # a task prompt with its instructions, before other agents' outputs
ACT_PER_LAYER = (4, 4, 4.5)  # saved elements per token and layer: × hidden, × q width, × mlp
LOGIT_COPIES = 3
# fused_logprobs: Liger's chunk of up to 2,048 positions × 4,096 vocabulary entries, in fp32,
# about FUSED_CHUNK_COPIES at once in its backward pass (logits, probabilities, their gradient,
# a product); the entropy statistic's chunk of positions (trainer/head_logprobs.py reads it).
FUSED_CHUNK = (2048, 4096)
FUSED_CHUNK_COPIES = 4
ENTROPY_ROWS = 128  # TRL's entropy_from_logits works in chunks of 128 rows too
PREFILL_PER_TOKEN = (4, 3)  # prefill's transient elements per token: × hidden, × mlp
DECODE_BYTES_PER_LOGIT = 40  # fp32 logits, Gumbel noise (int64, float64 steps), log-softmax
# On CUDA (bf16 autocast), fitted to bench/gpu_check.py's six cases on an H200 (2026-12-04,
# docs/benchmarks-log.md) so that each measured peak ≤ estimate ≤ 1.3 × peak: autocast keeps
# some saved activations in fp32 (norms, the loss), the loss holds fewer logit copies than on
# the CPU, the fused token picker needs no noise temporaries, and the decode step holds a few
# output-layer-sized (vocab × hidden) transients, more under full fine-tuning.
CUDA_ACT_SCALE = 1.25
CUDA_LOGIT_COPIES = 2.5
CUDA_DECODE_BYTES_PER_LOGIT = 8  # fp32 logits and the bf16 forward's own
CUDA_OUTPUT_LAYER_COPIES = {"lora": 2, "full": 4}  # bf16 copies of vocab × hidden
EVAL_SEQUENCES = 256  # trainer/evaluate.py's batch_size: episodes of one evaluation rollout
# trainer/gradients.py moves the gradient vectors to the host beyond this share of the GPU.
# (A fixed 8 GiB sent full fine-tuning of 0.6B under Voting/per_role — 6 vectors of 2.4 GB —
# through host copies and CPU dot products on a 141 GiB H200: a tenth of LoRA's update speed.)
SNAPSHOT_SHARE = 0.25
DEFAULT_GPU_GB = 141.0  # H200; a worker's own GPU overrides it (TROUPE_GPU_MEMORY_GB too)
HEADROOM = 0.9  # allocator fragmentation, CUDA context, kernels' workspaces
# `micro_batch_tokens: -1`: budgets are searched in steps of TOKEN_STEP up to MAX_TOKEN_BUDGET
# (past a few ten thousand tokens a pass the update's matmuls are as efficient as they get, and
# a budget is no use beyond a step's turns); AUTO_TOKENS where there is no GPU to size for.
TOKEN_STEP = 256
MAX_TOKEN_BUDGET = 65_536
AUTO_TOKENS = 16_384


def vectors_needed(n_roles: int, max_agents: int) -> int:
    """How many gradient-sized fp32 vectors a GradientTracker holds at its peak."""
    return 2 + (max_agents if max_agents > 1 else 0) + n_roles


# What the estimate reads of a model's config.json; one without them is a model it knows nothing of.
SHAPE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
)


def model_shape(model: str) -> dict[str, Any] | None:
    """The architecture fields of `model` when known without loading it, else None."""
    if model in KNOWN_SHAPES:
        return KNOWN_SHAPES[model]
    path = Path(os.path.expanduser(model)) / "config.json"
    try:
        shape = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):  # unreadable, or not JSON: the loader will say what is wrong
        return None
    if not isinstance(shape, dict) or not all(isinstance(shape.get(k), int) for k in SHAPE_KEYS):
        return None  # not a decoder this estimate knows
    return shape


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


def micro_batch_rows(config: Any) -> int:
    """Sequences in the largest micro-batch: `micro_batch_size`, or fewer where one agent has
    fewer turns in an optimizer batch (trainer/update.py: a micro-batch never straddles two
    agents) — its problems × group × rounds, over the mini-batches and ranks."""
    rounds = (config.max_rounds or 3) if config.workflow == "eval_opt" else 1
    world = max(1, getattr(config, "world_size", 1))
    per_agent = config.prompts_per_step * config.group_size * rounds
    return max(1, min(config.micro_batch_size, -(-per_agent // (config.mini_batches * world))))


def kv_bytes_per_token(shape: dict[str, Any], dtype_bytes: int) -> int:
    """Bytes of KV cache one token takes: keys and values of every layer."""
    d = shape.get("head_dim") or shape["hidden_size"] // shape["num_attention_heads"]
    return 2 * shape["num_hidden_layers"] * shape["num_key_value_heads"] * d * dtype_bytes


def generation_calls(config: Any) -> list[tuple[int, int, int]]:
    """(sequences, prompt tokens, new tokens) of the largest generation calls of a step.

    The widest stage (parallel agents of one role, routed to one policy unless per_agent) at
    the task prompt's length, and the longest turn (longest_sequence) for one per episode;
    episodes are a step's prompts × group or an evaluation batch, whichever is more.
    """
    k = config.eval_samples
    episodes = max(
        config.prompts_per_step * config.group_size,
        min(config.eval_problems, max(1, EVAL_SEQUENCES // k)) * k,
    )
    prompt, new = longest_sequence(config)
    counts = Counter(role_of(a) for a in workflow_agents(config))
    parallel = 1 if config.sharing == PER_AGENT else max(counts.values())
    wide_prompt = PROMPT_TOKENS + (new if config.workflow == "orch_workers" else 0)  # the plan
    calls = [(episodes * parallel, wide_prompt, new), (episodes, prompt, new)]
    cap = getattr(config, "rollout_batch", 0)
    return [(min(n, cap) if cap else n, p, t) for n, p, t in calls]


@dataclass
class RolloutEstimate:
    """Peak bytes of the largest generation call of a step."""

    weights: int  # weights and optimizer moments resident while generating
    kv_cache: int
    logits: int
    activations: int  # the prefill forward's transients; the decode step's on CUDA
    sequences: int  # in that call

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.logits + self.activations

    def parts(self) -> str:
        gib = 2**30
        return ", ".join(
            f"{name} {getattr(self, name) / gib:.1f}"
            for name in ("weights", "kv_cache", "logits", "activations")
        )


def rollout_estimate(
    config: Any,
    shape: dict[str, Any],
    *,
    on_cuda: bool = True,
    calls: list[tuple[int, int, int]] | None = None,
    update: MemoryEstimate | None = None,
) -> RolloutEstimate:
    """Peak bytes of the rollout phase (module docstring); `calls` overrides the calls."""
    compute = 2 if on_cuda else 4  # the KV cache and logits come out of bf16 autocast
    update = update or estimate(config, shape, on_cuda=on_cuda)
    trainable = update.optimizer // (len(policy_names(config)) * 8 + 4)
    resident = update.weights + len(policy_names(config)) * trainable * 8
    if shards(config) > 1:  # generation runs on every policy all-gathered (sharding.gathered)
        resident += len(policy_names(config)) * parameter_count(shape) * compute
    per_token = kv_bytes_per_token(shape, compute)
    vocab, h, mlp = shape["vocab_size"], shape["hidden_size"], shape["intermediate_size"]
    transient = CUDA_OUTPUT_LAYER_COPIES[config.finetune] * vocab * h * 2 if on_cuda else 0
    best: RolloutEstimate | None = None
    for n, prompt, new in calls or generation_calls(config):
        # The static cache holds every column from the prompt pass on; the prompt pass's
        # mask is (n, prompt, prompt + new) booleans, which attention may widen to floats.
        prefill = RolloutEstimate(
            resident,
            n * (prompt + new) * per_token,
            n * vocab * (compute + 4),
            n * prompt * (PREFILL_PER_TOKEN[0] * h + PREFILL_PER_TOKEN[1] * mlp) * compute
            + n * prompt * (prompt + new) * (1 + compute),
            n,
        )
        per_logit = CUDA_DECODE_BYTES_PER_LOGIT if on_cuda else DECODE_BYTES_PER_LOGIT
        decode = RolloutEstimate(
            resident, n * (prompt + new) * per_token, n * vocab * per_logit, transient, n
        )
        for candidate in (prefill, decode):
            if best is None or candidate.total > best.total:
                best = candidate
    assert best is not None
    return best


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
    checkpointing: bool | None = None,
) -> MemoryEstimate:
    """Peak bytes of one training step's update on the accelerator (module docstring);
    `checkpointing` overrides the config's gradient checkpointing."""
    compute = 2 if on_cuda else 4  # bytes per activation element (bf16 autocast / fp32)
    load = 2 if on_cuda else 4  # bytes per frozen weight
    n = parameter_count(shape)
    policies = policy_names(config)
    if config.finetune == "lora":
        trainable = lora_parameter_count(shape, config.lora_r, config.lora_targets)
        weights = n * load + len(policies) * trainable * 4
    else:
        ranks = shards(config)
        trainable = -(-n // ranks)  # this rank's shard of each policy
        kl = config.kl_beta > 0 or any(v > 0 for v in config.kl_beta_per_role.values())
        cast_cache = n * 2 if on_cuda and ranks == 1 else 0
        weights = len(policies) * trainable * 4 + (n * load if kl else 0) + cast_cache
    # Batched adapters (LoRA, one process) take the policies' optimizer steps together
    # (trainer/passes.py): their gradients and snapshots are held at once; else one at a time.
    batched = getattr(config, "batch_adapters", False) and getattr(config, "world_size", 1) == 1
    together = len(policies) if config.finetune == "lora" and batched else 1
    optimizer = len(policies) * trainable * 8 + together * trainable * 4

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
        budget = snapshot_budget_bytes() / together
        on_device = config.grad_snapshots == "device" and size <= budget
        held = size if on_device else trainable * 4
        snapshots = snapshots + held if together > 1 else max(snapshots, held)
        snapshots_on_device = snapshots_on_device or on_device

    prompt, completion = sequence or longest_sequence(config)
    rows = micro_batch_rows(config)
    tokens = rows * (prompt + completion)
    kept = rows * (completion + 1)  # positions whose logits the loss reads
    budget = token_budget(config)
    if budget:  # packed: the budget (or one longer turn), logits on its completion share
        tokens = max(budget, prompt + completion)
        kept = -(-tokens * completion // (prompt + completion))
    h, layers = shape["hidden_size"], shape["num_hidden_layers"]
    q = shape["num_attention_heads"] * (shape.get("head_dim") or h // shape["num_attention_heads"])
    mlp = shape["intermediate_size"]
    per_layer = int(ACT_PER_LAYER[0] * h + ACT_PER_LAYER[1] * q + ACT_PER_LAYER[2] * mlp)
    if on_cuda:
        per_layer = int(per_layer * CUDA_ACT_SCALE)
    if config.checkpointing if checkpointing is None else checkpointing:
        activations = tokens * (layers * h + per_layer) * compute
    else:
        activations = tokens * layers * per_layer * compute
    vocab = shape["vocab_size"]
    if getattr(config, "fused_logprobs", False):
        head_grad = vocab * h * 4 if config.finetune == "full" else 0
        entropy = min(kept, ENTROPY_ROWS) * vocab * (compute + 8)  # logits, fp32, log-softmax
        chunk = min(kept, FUSED_CHUNK[0]) * min(vocab, FUSED_CHUNK[1]) * 4 * FUSED_CHUNK_COPIES
        logits = chunk + entropy + kept * h * 8 + head_grad
    else:
        copies = CUDA_LOGIT_COPIES if on_cuda else LOGIT_COPIES
        logits = int(copies * kept * vocab * compute)
    return MemoryEstimate(weights, optimizer, snapshots, activations, logits, snapshots_on_device)


def token_budget(config: Any) -> int:
    """Tokens per packed pass of `config` (0: padded), with -1 resolved (`largest_token_budget`)."""
    budget = getattr(config, "micro_batch_tokens", 0)
    return budget if budget >= 0 else largest_token_budget(config)


def largest_token_budget(config: Any, capacity: float | None = None) -> int:
    """`micro_batch_tokens: -1`: the largest token budget, a multiple of TOKEN_STEP up to
    MAX_TOKEN_BUDGET, whose update the estimate fits in `capacity` (the GPU's; its headroom
    kept) — each role's turns in the fewest, largest passes its memory allows. The longest turn
    where not even that fits (the fit check then says why); AUTO_TOKENS where the estimate
    knows nothing (a model of unknown shape, the CPU)."""
    shape = model_shape(config.model)
    if shape is None or config.device == "cpu":
        return AUTO_TOKENS
    limit = (gpu_bytes() if capacity is None else capacity) * HEADROOM
    longest = sum(longest_sequence(config))

    def fits(tokens: int) -> bool:
        candidate = dataclasses.replace(config, micro_batch_tokens=tokens)
        return estimate(candidate, shape).total <= limit

    low, high = 0, MAX_TOKEN_BUDGET // TOKEN_STEP  # in steps: fits(low) assumed, high tested
    if fits(high * TOKEN_STEP):
        return high * TOKEN_STEP
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle * TOKEN_STEP) else (low, middle)
    return max(low * TOKEN_STEP, longest)


def needs_checkpointing(config: Any) -> bool:
    """`grad_checkpointing=auto`: whether the update would not fit on the GPU without it (a model
    of unknown shape: assume it would not)."""
    shape = model_shape(config.model)
    if shape is None:
        return True
    return estimate(config, shape, checkpointing=False).total > gpu_bytes() * HEADROOM


def shards(config: Any) -> int:
    """Over how many ranks each policy is sharded: full fine-tuning on several ranks (FSDP2)."""
    world = getattr(config, "world_size", 1)
    return world if config.finetune == "full" and world > 1 else 1


def gpu_bytes() -> float:
    """The GPU memory a config is checked against before a worker has one to ask."""
    return float(os.environ.get("TROUPE_GPU_MEMORY_GB", DEFAULT_GPU_GB)) * 2**30


def snapshot_budget_bytes() -> float:
    """The most bytes of gradient vectors trainer/gradients.py keeps on the accelerator."""
    return SNAPSHOT_SHARE * gpu_bytes()


def fit_problem(config: Any, capacity: float | None = None) -> str | None:
    """Why `config` cannot fit on a GPU of `capacity` bytes (None: it fits, or is unknown)."""
    shape = model_shape(config.model)
    if shape is None or config.device == "cpu":
        return None
    measured = capacity is not None  # a worker's own GPU, asked; else the configured figure
    capacity = gpu_bytes() if capacity is None else capacity
    need = estimate(config, shape)
    rollout = rollout_estimate(config, shape, update=need)
    limit = capacity * HEADROOM
    if max(need.total, rollout.total) <= limit:
        return None
    gib = 2**30
    problems = []
    if rollout.total > limit:
        size = max(
            1,
            int(
                rollout.sequences
                * (limit - rollout.weights)
                / max(1, rollout.total - rollout.weights)
            ),
        )
        fixes = [
            f"rollout_batch={_round_down(size)} (sequences per generation call, now "
            f"{config.rollout_batch or 'all ' + str(rollout.sequences)})"
        ]
        if config.finetune == "full":
            fixes.append("finetune=lora")
        problems.append(
            f"the rollout needs about {math.ceil(rollout.total / gib)} GiB of GPU memory "
            f"({rollout.parts()} GiB; {rollout.sequences} sequences in one generation call)"
            f"; try {', '.join(fixes)}"
        )
    if need.total > limit:
        problems.append(
            f"the update needs about {math.ceil(need.total / gib)} GiB of GPU memory "
            f"({need.parts()} GiB); try {', '.join(_update_fixes(config, need))}"
        )
    return f"{'; '.join(problems)}; {_capacity_words(capacity, measured)}"


def host_fit_problem(config: Any, capacity: float) -> str | None:
    """Why `config`, trained on the CPU, cannot fit in a host of `capacity` bytes (None: it
    fits, or the model's shape is unknown). The same estimate as on a GPU, in fp32."""
    shape = TINY_SHAPES.get(config.model) or model_shape(config.model)
    if shape is None:
        return None
    need = estimate(config, shape, on_cuda=False)
    rollout = rollout_estimate(config, shape, on_cuda=False, update=need)
    peak = max(need.total, rollout.total)
    if peak <= capacity * HEADROOM:
        return None
    gib = 2**30
    return (
        f"the run needs about {math.ceil(peak / gib):,} GiB of memory on the CPU (update "
        f"{need.parts()} GiB; rollout of {rollout.sequences} sequences "
        f"{rollout.parts()} GiB) but the largest worker has {capacity / gib:.0f} GiB; lower "
        "max_new_tokens, rollout_batch, group_size or micro_batch_size"
    )


def _capacity_words(capacity: float, measured: bool) -> str:
    """Where the GPU's size came from: a web process sees no GPU, so unless the worker's own
    GPU was asked it is the configured figure — said as such, not as a fact (the page once
    said "the GPU has 141 GiB" on a machine with no GPU)."""
    size = f"{capacity / 2**30:.0f} GiB"
    if measured:
        return f"the GPU has {size}"
    if "TROUPE_GPU_MEMORY_GB" in os.environ:
        return f"the workers' GPUs have {size} (TROUPE_GPU_MEMORY_GB)"
    return (
        f"no GPU is visible here, so it is assumed to have {size} (an H200); set "
        "TROUPE_GPU_MEMORY_GB to your workers' GPU memory"
    )


def _round_down(n: int) -> int:
    """The largest power of two not above n (a tidy rollout_batch to suggest)."""
    return 1 << (max(1, n).bit_length() - 1)


def _update_fixes(config: Any, need: MemoryEstimate) -> list[str]:
    fixes = []
    if config.finetune == "full":
        fixes.append("finetune=lora")
    if need.snapshots_on_device:
        fixes.append("grad_snapshots=host")
    if not config.checkpointing:
        fixes.append("grad_checkpointing=on")
    if config.micro_batch_size > 1:
        fixes.append(f"a smaller micro_batch_size (now {config.micro_batch_size})")
    if config.sharing != SHARED:
        fixes.append("sharing=shared (one policy)")
    return fixes
