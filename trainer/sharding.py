"""FSDP2 for full fine-tuning over several ranks: each rank holds a shard of every policy.

Data parallelism with replicas (trainer/distributed.py) holds every policy whole on every rank:
more GPUs add speed, not memory. For `finetune=full` with `world_size` > 1 the policies are
sharded instead with `torch.distributed.fsdp.fully_shard` (one group per decoder layer, one
for the rest), so three 4B policies and their AdamW state spread over the ranks.

- Precision: the sharded parameters, their gradients and AdamW's state are fp32 (the master
  copy, as in trainer/precision.py). On CUDA the all-gathered copies the forward and backward
  run on are bf16 and gradients are reduced in fp32; on the CPU (gloo, the tests) all is fp32.
- Gradient sums: FSDP2 averages gradients over ranks, while the update's loss is a sum over
  the whole step's batch divided by one normaliser (trainer/loss.py). The update therefore
  scales each backward pass by the rank count (`LOSS_SCALE`), so each reduced gradient is the
  sum one process computes. (`set_gradient_divide_factor(1.0)` would say the same but fails
  on gloo.)
- Lock-step: every forward and backward pass is a collective (all-gather, reduce-scatter), so
  every rank must run the same number of them. The update pads a rank's short segment with
  `zero_backward` passes, and generation runs inside `gathered`, where the parameters are
  all-gathered once and no forward pass communicates.
- Exact figures: after each backward pass `.grad` holds this rank's shard of the gradient
  summed over ranks, so a segment's snapshot needs no all-reduce; the gradient tracker
  (trainer/gradients.py) keeps each rank's shard and all-reduces only its dot products.
- Checkpoints: `full_state` gathers whole weights and AdamW state on rank 0 in the layout of a
  single process's `state_dict` (int-keyed optimizer state), so the checkpoint format is the
  single-process one, and `load_full_state` shards such a state on every rank.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


def is_sharded(tensor: torch.Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a (maybe sharded) tensor; a plain tensor is returned as is."""
    return tensor.to_local() if is_sharded(tensor) else tensor


def shard_model(model: nn.Module, device: str) -> nn.Module:
    """Shard `model` (already fp32 on this rank's device) over the default process group,
    in place: each decoder layer is one FSDP group, the embeddings, norm and head another."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy()
    if torch.device(device).type == "cuda":
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    layers = getattr(getattr(model, "model", None), "layers", None)
    for layer in layers if layers is not None else []:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def _fsdp_modules(model: nn.Module) -> list:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


@contextmanager
def gathered(models: list[nn.Module]) -> Iterator[None]:
    """Every model's parameters all-gathered for the block (a collective on entry and exit:
    every rank enters together), so forward passes inside it (generation, evaluation) do not
    communicate and ranks may run different numbers of them."""
    modules = [m for model in models for m in _fsdp_modules(model)]
    for m in modules:
        m.set_reshard_after_forward(False, recurse=False)
        m.unshard()
    try:
        yield
    finally:
        for m in modules:
            m.reshard()
            m.set_reshard_after_forward(True, recurse=False)


def zero_backward(model: nn.Module, device: torch.device) -> None:
    """A forward and backward pass contributing a zero gradient: keeps a rank with fewer
    micro-batches in step with the others' all-gathers and reduce-scatters."""
    ids = torch.ones((1, 1), dtype=torch.long, device=device)
    logits = model(input_ids=ids, use_cache=False).logits
    (logits.float().sum() * 0.0).backward()


def _options(**kw):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kw)


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Whole weights and AdamW state on rank 0's CPU (empty elsewhere); a collective. The
    optimizer state is keyed by parameter index, as `optimizer.state_dict()` of one process."""
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    weights = get_model_state_dict(model, options=_options(cpu_offload=True))
    by_name = get_optimizer_state_dict(model, optimizer, options=_options(cpu_offload=True))
    if not by_name:
        return weights, {}
    order = [fqn for group in by_name["param_groups"] for fqn in group["params"]]
    index = {fqn: i for i, fqn in enumerate(order)}
    return weights, {
        "state": {index[fqn]: value for fqn, value in by_name["state"].items()},
        "param_groups": [
            {**group, "params": [index[fqn] for fqn in group["params"]]}
            for group in by_name["param_groups"]
        ],
    }


def load_full_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, weights: dict, optim: dict[str, Any]
) -> None:
    """Shard a whole (single-process layout) state into `model` and `optimizer`; every rank
    passes the same state (a collective)."""
    from torch.distributed.checkpoint.state_dict import (
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    # Copies of the dicts: loading replaces their values by shards in place.
    set_model_state_dict(model, dict(weights), options=_options())
    # The index → name map of the optimizer's parameters, as `full_state` wrote it.
    names = {id(p): n for n, p in model.named_parameters()}
    order = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    by_name = {
        "state": {order[int(i)]: dict(value) for i, value in optim["state"].items()},
        "param_groups": [
            {**group, "params": [order[int(i)] for i in group["params"]]}
            for group in optim["param_groups"]
        ],
    }
    set_optimizer_state_dict(model, optimizer, by_name, options=_options())
