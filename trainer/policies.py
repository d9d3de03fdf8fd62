"""The trainable policies of a run (docs/design.md §4).

Which policies a run has and which one an agent's turns use is `trainer/routing.py` (plain
data, torch-free; re-exported here), so the rollout, the update and the metrics all agree.

A `PolicySet` owns those policies on top of ONE base model:

- `finetune="lora"`: one peft LoRA adapter per policy, all injected into the same base model.
  Only the active adapter takes part in a forward pass, so gradients can only reach it, and
  peft's `set_adapter` additionally switches `requires_grad` to that adapter alone. The
  update may run several policies' turns in one pass (`batch_adapters`, `use_many`,
  trainer/joint_lora.py), each token through its own policy's adapter. The reference policy
  is the base model with every adapter disabled.
- `finetune="full"`: the base model itself is the first policy and every further policy is a
  deep copy of it. A frozen copy of the initial weights is made, at construction, only when a
  KL coefficient is positive (nothing else needs it).

The set takes ownership of `base_model`: LoRA injects layers into it; full fine-tuning trains
it in place. Trainable weights are fp32 whatever the base was loaded in (a bf16 base on CUDA
stays bf16 under fp32 LoRA adapters; a fully fine-tuned model is cast to fp32 — its master
copy — and its frozen KL reference keeps the loaded dtype), so AdamW's state is fp32 too; the
forward passes run under `trainer/precision.py`'s autocast (bf16 on CUDA). With
`config.checkpointing` the model recomputes each layer's activations in the backward pass
(transformers' gradient checkpointing, non-reentrant), only in train mode.

Over several ranks (`world`, trainer/distributed.py) LoRA policies are replicas; fully
fine-tuned ones are sharded with FSDP2 (`sharded`, trainer/sharding.py): generation then runs
inside `gathered()`, and their tensors are checkpointed by `save_shards` (every rank its shards,
`torch.distributed.checkpoint`) beside the small `state_dict`; `load_state_dict(state,
where)` reads either layout into sharded or whole policies.

Dropout is switched off everywhere, so the update's first forward pass reproduces the
sampling log-probs (the PPO ratio starts at 1) — as TRL does with `disable_dropout`.

Each policy has its own AdamW (betas 0.9/0.999, no weight decay; fused on one GPU) and its own
LambdaLR schedule:
linear warm-up over `warmup_steps`, then cosine/linear/constant decay until `steps`. Unlike
transformers' schedules, the first step's factor is 1/warmup_steps rather than 0, so the first
rollout batch is not wasted. The schedule advances once per training step in which the policy
received gradient (see `trainer/update.py`), not once per mini-batch.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainer import joint_lora, sharding
from trainer.config import Config
from trainer.distributed import SOLO, World
from trainer.precision import PARAM_DTYPE, autocast
from trainer.routing import agent_policy, policy_names, role_of, workflow_agents  # noqa: F401

# ---------------------------------------------------------------------------------------------
# Learning-rate schedule
# ---------------------------------------------------------------------------------------------


def lr_factor(step: int, *, warmup_steps: int, total_steps: int, schedule: str) -> float:
    """Multiplier of the base lr for the `step`-th (0-based) optimizer step of a policy."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if schedule == "linear":
        return 1.0 - progress
    raise ValueError(f"unknown schedule {schedule!r}")


# ---------------------------------------------------------------------------------------------
# The policy set
# ---------------------------------------------------------------------------------------------


def _disable_dropout(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


def _keep_input_dtype(model: nn.Module) -> None:
    """Stop peft casting each LoRA layer's input to the adapter's fp32. Under bf16 autocast the
    adapter's matmul casts it straight back to bf16 (bf16 → fp32 → bf16 is exact), so the cast
    only cost two kernels per layer and pass (forward and backward): 392 of a 0.6B model's
    ~5,000 launches per micro-batch. Only on CUDA: the CPU has no autocast, and a bf16 base
    there needs the cast to meet its fp32 adapter."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            module.cast_input_dtype_enabled = False


def needs_reference(config: Config) -> bool:
    """Whether any role is anchored to the base model by a KL term."""
    return config.kl_beta > 0 or any(v > 0 for v in config.kl_beta_per_role.values())


def _to_param_dtype(params: list[nn.Parameter]) -> None:
    """Cast trainable parameters to fp32 in place (before any optimizer holds them)."""
    for p in params:
        if p.dtype != PARAM_DTYPE:
            p.data = p.data.to(PARAM_DTYPE)


class PolicySet:
    """One base model, N trainable policies (LoRA adapters or full copies), their optimizers."""

    def __init__(
        self, base_model: nn.Module, config: Config, names: list[str], world: World = SOLO
    ):
        if not names:
            raise ValueError("a PolicySet needs at least one policy name")
        if len(set(names)) != len(names):
            raise ValueError(f"policy names repeat: {names}")
        self.config = config
        self.names = list(names)
        self.finetune = config.finetune
        # Full fine-tuning over several ranks: each rank holds a shard of each policy.
        self.sharded = self.finetune == "full" and world.active
        self.world = world
        self._gathered = False
        # EMA of each role's gradient per policy, for the coherence regulariser (gradients.py).
        self.coherence: dict[tuple[str, str], torch.Tensor] = {}
        _disable_dropout(base_model)
        if config.checkpointing:
            # Non-reentrant: needs no input that requires grad (a frozen embedding under LoRA).
            base_model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        self._reference: nn.Module | None = None
        self._shares_passes: bool | None = None  # decided on first use (`shares_passes`)
        if self.finetune == "lora":
            self._build_lora(base_model)
        elif self.finetune == "full":
            self._build_full(base_model)
        else:
            raise ValueError(f"unknown finetune mode {self.finetune!r}")
        # On one GPU AdamW runs fused: one kernel per step instead of dozens of foreach passes,
        # and none of their parameter-sized temporaries (two fp32 copies of a 4B model: the
        # update's peak under full fine-tuning). Sharded (DTensor) and CPU policies keep the
        # default implementation.
        fused = self.device.type == "cuda" and not self.sharded
        self._optimizers = {
            name: torch.optim.AdamW(
                self._params[name],
                lr=config.lr,
                betas=(0.9, 0.999),
                weight_decay=0.0,
                fused=fused or None,
            )
            for name in self.names
        }
        self._schedulers = {
            name: torch.optim.lr_scheduler.LambdaLR(self._optimizers[name], self._lr_lambda)
            for name in self.names
        }

    def _lr_lambda(self, step: int) -> float:
        c = self.config
        return lr_factor(
            step, warmup_steps=c.warmup_steps, total_steps=c.steps, schedule=c.schedule
        )

    def _build_lora(self, base_model: nn.Module) -> None:
        from peft import LoraConfig, get_peft_model

        targets: str | list[str] = self.config.lora_targets
        if targets != "all-linear":
            targets = [t.strip() for t in targets.split(",") if t.strip()]
        lora = LoraConfig(
            r=self.config.lora_r,
            lora_alpha=self.config.lora_alpha,
            target_modules=targets,
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
        )
        self.model = get_peft_model(base_model, lora, adapter_name=self.names[0])
        for name in self.names[1:]:
            self.model.add_adapter(name, lora)
        self._params = {name: self._adapter_parameters(name) for name in self.names}
        for params in self._params.values():
            _to_param_dtype(params)
        if self.device.type == "cuda":  # where every forward runs under autocast (`use`)
            _keep_input_dtype(self.model)
        self.model.set_adapter(self.names[0])

    def _adapter_parameters(self, name: str) -> list[nn.Parameter]:
        """Exactly the parameters of adapter `name`, read from peft's per-adapter containers."""
        from peft.tuners.tuners_utils import BaseTunerLayer

        params: list[nn.Parameter] = []
        seen: set[int] = set()
        for module in self.model.modules():
            if not isinstance(module, BaseTunerLayer):
                continue
            for attr in module.adapter_layer_names:
                container = getattr(module, attr, None)
                if container is None or name not in container:
                    continue
                item = container[name]  # a module, or a bare Parameter (embedding LoRA)
                for p in [item] if isinstance(item, nn.Parameter) else item.parameters():
                    if id(p) not in seen:
                        seen.add(id(p))
                        params.append(p)
        if not params:
            raise ValueError(f"adapter {name!r} has no parameters: check lora_targets")
        return params

    def _build_full(self, base_model: nn.Module) -> None:
        if needs_reference(self.config):
            # Copied before any step, so it holds the initial weights for the KL anchor.
            self._reference = copy.deepcopy(base_model).eval().requires_grad_(False)
        base_model.to(PARAM_DTYPE)  # the fp32 master copy; compute runs under autocast
        base_model.requires_grad_(True)
        self._models = {self.names[0]: base_model}
        for name in self.names[1:]:
            self._models[name] = copy.deepcopy(base_model)
        if self.sharded:
            device = str(next(base_model.parameters()).device)
            for model in self._models.values():
                sharding.shard_model(model, device)
        self._params = {
            name: [p for p in model.parameters() if p.requires_grad]
            for name, model in self._models.items()
        }

    # --- using a policy ----------------------------------------------------------------------

    def _check(self, name: str) -> None:
        if name not in self._params:
            raise KeyError(f"no policy {name!r}; policies are {', '.join(self.names)}")

    @contextmanager
    def use(self, name: str, *, train: bool = False) -> Iterator[nn.Module]:
        """The module to call forward/generate on, with policy `name` active.

        `train=True` for the update's forward passes (train mode; with dropout off this only
        matters for modules such as gradient checkpointing), False for generation.
        """
        self._check(name)
        if self.sharded and not train and not self._gathered:
            # A sharded forward pass is a collective: ranks generating different numbers of
            # tokens would wait on each other for ever.
            raise RuntimeError("sharded policies generate only inside PolicySet.gathered()")
        if self.finetune == "lora":
            # Activates the adapter and makes it, and only it, require grad.
            self.model.set_adapter(name)
            model = self.model
        else:
            model = self._models[name]
        was_training = model.training
        model.train(train)
        try:
            with autocast(self.device):
                yield model
        finally:
            model.train(was_training)

    @property
    def shares_passes(self) -> bool:
        """Whether several policies' turns share one forward and backward pass: asked for
        (`batch_adapters`), LoRA adapters on one unsharded base, every LoRA layer routable
        (trainer/joint_lora.py)."""
        if self._shares_passes is None:
            self._shares_passes = (
                self.config.batch_adapters
                and self.finetune == "lora"
                and not self.sharded
                and joint_lora.supported(self.model)
            )
        return self._shares_passes

    @contextmanager
    def use_many(self, spans: list[joint_lora.Span]) -> Iterator[nn.Module]:
        """The module for one training pass whose tokens [start, stop) (the batch flattened)
        use policy `name`'s adapter, for each (name, start, stop) span; every named policy's
        adapter requires grad. Train mode; run the backward pass inside too."""
        if not self.shares_passes:
            raise RuntimeError("only LoRA policies on one unsharded base share passes")
        names = {name for name, _, _ in spans}
        for name in names:
            self._check(name)
        was_training = self.model.training
        self.model.train(True)
        try:
            with joint_lora.routed(self.model, spans), autocast(self.device):
                for name in names:
                    for p in self._params[name]:
                        p.requires_grad_(True)
                yield self.model
        finally:
            self.model.train(was_training)
            self.model.set_adapter(self.names[0])  # one active adapter again, as after init

    @contextmanager
    def gathered(self) -> Iterator[None]:
        """Generation and evaluation: sharded policies all-gathered for the block (every rank
        enters together); nothing to do for replicas."""
        if not self.sharded:
            yield
            return
        with sharding.gathered(list(self._models.values())), torch.no_grad():
            self._gathered = True
            try:
                yield
            finally:
                self._gathered = False

    @contextmanager
    def reference(self) -> Iterator[nn.Module]:
        """The frozen initial policy (base model without adapters), under torch.no_grad."""
        if self.finetune == "lora":
            was_training = self.model.training
            self.model.eval()
            try:
                with self.model.disable_adapter(), torch.no_grad(), autocast(self.device):
                    yield self.model
            finally:
                self.model.train(was_training)
            return
        if self._reference is None:
            raise RuntimeError(
                "full fine-tuning keeps a reference copy only when kl_beta (or a per-role KL) > 0"
            )
        with torch.no_grad(), autocast(self.device):
            yield self._reference

    def parameters(self, name: str) -> list[nn.Parameter]:
        """The trainable parameters of policy `name` only (the order is stable)."""
        self._check(name)
        return self._params[name]

    def optimizer(self, name: str) -> torch.optim.Optimizer:
        self._check(name)
        return self._optimizers[name]

    def scheduler(self, name: str) -> torch.optim.lr_scheduler.LambdaLR:
        self._check(name)
        return self._schedulers[name]

    def trainable_parameter_count(self) -> int:
        return sum(p.numel() for name in self.names for p in self._params[name])

    def zero_backward(self, name: str) -> None:
        """A sharded policy's pass with zero gradient (trainer/sharding.py: lock-step)."""
        with self.use(name, train=True) as model:
            sharding.zero_backward(model, self.device)

    @property
    def device(self) -> torch.device:
        return self._params[self.names[0]][0].device

    # --- checkpoints -------------------------------------------------------------------------

    def _named(self, name: str) -> dict[str, nn.Parameter]:
        """Parameter name -> parameter for policy `name` (names as the module reports them)."""
        model = self.model if self.finetune == "lora" else self._models[name]
        wanted = {id(p) for p in self._params[name]}
        return {n: p for n, p in model.named_parameters() if id(p) in wanted}

    def state_dict(self) -> dict[str, Any]:
        """Adapter (LoRA) or model (full) weights, optimizer and scheduler state per policy.
        Sharded: the state without its tensors, which `save_shards` writes."""
        if self.sharded:
            return self._sharded_state_dict()
        weights = {}
        for name in self.names:
            if self.finetune == "lora":
                tensors = self._named(name)
            else:
                tensors = self._models[name].state_dict()
            weights[name] = {k: v.detach().cpu().clone() for k, v in tensors.items()}
        return {
            "finetune": self.finetune,
            "names": list(self.names),
            "weights": weights,
            "optimizers": {n: self._optimizers[n].state_dict() for n in self.names},
            "schedulers": {n: self._schedulers[n].state_dict() for n in self.names},
            "coherence": {
                f"{p}|{r}": v.detach().cpu().clone() for (p, r), v in self.coherence.items()
            },
        }

    def _sharded_state_dict(self) -> dict[str, Any]:
        """The small part of a sharded set's state; its tensors go by `save_shards`."""
        return {
            "finetune": self.finetune,
            "names": list(self.names),
            "shards": sharding.SHARDS_DIR,  # the tensors, beside this state in the checkpoint
            "schedulers": {n: self._schedulers[n].state_dict() for n in self.names},
            "coherence": {},  # refused with sharding (trainer/config.py)
        }

    def save_shards(self, where: Path) -> None:
        """Sharded: every rank writes its shards of the weights and AdamW state into `where`'s
        `shards/` (a collective; trainer/sharding.py)."""
        sharding.save_shards(self._models, self._optimizers, where / sharding.SHARDS_DIR)

    def load_policy_weights(self, name: str, weights: dict[str, torch.Tensor], saved_as: str):
        """Load one policy's weights, as a checkpoint's state holds them under policy
        `saved_as`, into this set's policy `name` (a mix-and-match evaluation takes each role
        from its own checkpoint: trainer/mixed_eval.py). Optimizers are left alone."""
        self._check(name)
        if self.sharded:
            raise ValueError("sharded policies load whole checkpoints only")
        with torch.no_grad():
            if self.finetune == "full":
                self._models[name].load_state_dict(weights)
                return
            # LoRA keys carry the adapter's name after the layer's adapter container
            # (…q_proj.lora_A.<adapter>.weight): rename the saved adapter to this one.
            pattern = re.compile(rf"(\.lora_\w+)\.{re.escape(saved_as)}(?=\.|$)")
            renamed = {pattern.sub(rf"\1.{name}", k): v for k, v in weights.items()}
            named = self._named(name)
            mismatched = set(named) ^ set(renamed)
            if mismatched:
                raise ValueError(
                    f"policy {saved_as!r} does not fit adapter {name!r}: "
                    f"mismatched keys {sorted(mismatched)[:5]}"
                )
            for key, p in named.items():
                p.copy_(renamed[key])

    def load_state_dict(self, state: dict[str, Any], where: Path | None = None) -> None:
        """`where`: the checkpoint directory, for a state whose tensors are shards beside it.
        Sharded: a collective; every rank passes the same state (it reads the file)."""
        if state["finetune"] != self.finetune or list(state["names"]) != self.names:
            raise ValueError(
                f"checkpoint holds {state['finetune']} policies {state['names']}, "
                f"this set is {self.finetune} {self.names}"
            )
        if "shards" in state:  # written by ranks of a sharded run
            if where is None:
                raise ValueError("a sharded checkpoint's state needs its directory to load")
            sharding.load_shards(self._models, self._optimizers, where / state["shards"])
            for name in self.names:
                self._schedulers[name].load_state_dict(state["schedulers"][name])
            return
        if self.sharded:
            for name in self.names:
                sharding.load_full_state(
                    self._models[name],
                    self._optimizers[name],
                    state["weights"][name],
                    state["optimizers"][name],
                )
                self._schedulers[name].load_state_dict(state["schedulers"][name])
            return
        with torch.no_grad():
            for name in self.names:
                if self.finetune == "lora":
                    named = self._named(name)
                    missing = set(named) ^ set(state["weights"][name])
                    if missing:
                        raise ValueError(f"adapter {name!r}: mismatched keys {sorted(missing)[:5]}")
                    for key, p in named.items():
                        p.copy_(state["weights"][name][key])
                else:
                    self._models[name].load_state_dict(state["weights"][name])
        for name in self.names:
            self._optimizers[name].load_state_dict(state["optimizers"][name])
            self._schedulers[name].load_state_dict(state["schedulers"][name])
        self.coherence = {}
        for key, value in state.get("coherence", {}).items():
            policy, role = key.split("|", 1)
            self.coherence[(policy, role)] = value.to(self.device)
