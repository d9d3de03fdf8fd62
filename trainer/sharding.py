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
- Checkpoints (`torch.distributed.checkpoint`): `save_shards` has every rank write its own
  shards of the weights and AdamW state into the checkpoint's `shards/` directory, so no rank
  ever holds a whole policy; `load_shards` reads them back on any number of ranks, or whole
  in one process (a 1-GPU evaluation or branch of a multi-GPU run). `load_full_state` shards a
  single-process checkpoint (whole tensors, int-keyed AdamW state) on every rank, so a sharded
  run can branch from a one-process run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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
    """Every model's parameters all-gathered for the block (a collective on entry: every rank
    enters together; leaving frees the gathered copies), so forward passes inside it
    (generation, evaluation) do not communicate and ranks may run different numbers of them."""
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


SHARDS_DIR = "shards"  # in a checkpoint directory: the policies' tensors, one file per rank


def _states(models: dict[str, nn.Module], optimizers: dict[str, torch.optim.Optimizer]) -> dict:
    """Each policy's weights and AdamW state as `torch.distributed.checkpoint` reads and
    writes them: shards (DTensors) when sharded, whole tensors in one process."""
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    return {
        name: {
            "model": get_model_state_dict(m),
            "optim": get_optimizer_state_dict(m, optimizers[name]),
        }
        for name, m in models.items()
    }


def save_shards(
    models: dict[str, nn.Module], optimizers: dict[str, torch.optim.Optimizer], path: Path
) -> None:
    """Every rank writes its shards of every policy into `path` (a collective: no rank holds
    a whole policy, nor its AdamW state)."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_states(models, optimizers), checkpoint_id=str(path))


def load_shards(
    models: dict[str, nn.Module], optimizers: dict[str, torch.optim.Optimizer], path: Path
) -> None:
    """Read what `save_shards` wrote into these policies, sharded over any number of ranks or
    whole in one process (without a process group): the reader reshards."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    from trainer.safe_load import SafeReader

    states = _states(models, optimizers)
    dcp.load(states, storage_reader=SafeReader(path))  # its metadata is a pickle: no code runs
    for name, model in models.items():
        set_model_state_dict(model, states[name]["model"])
        set_optimizer_state_dict(model, optimizers[name], states[name]["optim"])


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
    # Index → name of the optimizer's parameters, numbered as one process's state_dict does.
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
