"""One run over several processes (one per GPU): who is who, and the few collectives it needs.

Data parallelism as the trainer does it (trainer/train.py, trainer/update.py): every rank holds
a full replica of every policy, rolls out its own share of the step's problems (a problem and
all its rollouts stay on one rank, so GRPO groups and advantages stay local), and the update
sums what the single-process update would have computed over all turns: the loss normaliser's
counts, the statistics, each agent segment's gradient. Summing gradients by hand (not DDP) is
what keeps the per-role and per-agent figures exact: the gradient tracker all-reduces each
segment's gradient, so its norms, shares and cosines are those of the whole step's batch.

`World` is the handle: rank, size, and collectives that never hang. Every collective runs
under the process group's timeout (`TROUPE_DIST_TIMEOUT` seconds, default 300): a rank that
died, or ranks that walked different policies or segments, fail with a message naming what
was being waited for instead of blocking forever. Waits on rank 0's slow work (loading or
warm-starting a model, writing a checkpoint) use a second group with a long timeout
(`TROUPE_DIST_SLOW_TIMEOUT`, default 7200). `check_same` compares a value across ranks (the
update's plan of segments) and raises on every rank when they disagree.

A single process is `World()` (size 1): every method is then a no-op returning its input, so
the trainer has one code path. Launch: `torchrun --nproc-per-node N -m trainer run
--world-size N …` (`python -m trainer run --world-size N` starts torchrun itself).
"""

from __future__ import annotations

import datetime
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

T = TypeVar("T")

TIMEOUT_ENV = "TROUPE_DIST_TIMEOUT"
SLOW_TIMEOUT_ENV = "TROUPE_DIST_SLOW_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
DEFAULT_SLOW_TIMEOUT = 7200.0


class CollectiveError(RuntimeError):
    """A collective failed or timed out: another rank is missing from it, or disagrees."""


def launched_ranks() -> int:
    """How many processes the launcher (torchrun) started; 1 when run directly."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def _seconds(env: str, default: float) -> float:
    return float(os.environ.get(env, default))


@dataclass
class World:
    """This process's place in the run; the default is a single process."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    timeout: float = DEFAULT_TIMEOUT
    group: Any = None  # the default process group (compute collectives, short timeout)
    slow: Any = None  # a gloo group with a long timeout (waits on rank 0's I/O)

    @property
    def active(self) -> bool:
        return self.size > 1

    @property
    def leader(self) -> bool:
        return self.rank == 0

    # --- set-up ----------------------------------------------------------------------------
    @classmethod
    def start(cls, world_size: int, device: str = "cpu") -> World:
        """Join the process group torchrun set up (env:// rendezvous); `World()` for one rank.

        Refuses a mismatch between the config's `world_size` and the processes launched.
        """
        launched = launched_ranks()
        if launched != world_size:
            how = (
                f"launch it with `torchrun --nproc-per-node {world_size} -m trainer run …` "
                f"(or `python -m trainer run --world-size {world_size} …`, which does)"
                if world_size > 1
                else "run it without torchrun, or set world_size to the ranks launched"
            )
            raise ValueError(
                f"the run's world_size is {world_size} but {launched} process(es) were "
                f"launched: {how}"
            )
        if world_size == 1:
            return cls()
        import torch.distributed as dist

        timeout = _seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT)
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        backend = "gloo"
        if device == "cuda":
            torch.cuda.set_device(local_rank)
            backend = "nccl"
        if not dist.is_initialized():
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
        slow = dist.new_group(
            backend="gloo",
            timeout=datetime.timedelta(seconds=_seconds(SLOW_TIMEOUT_ENV, DEFAULT_SLOW_TIMEOUT)),
        )
        return cls(
            rank=dist.get_rank(),
            size=dist.get_world_size(),
            local_rank=local_rank,
            timeout=timeout,
            group=dist.group.WORLD,
            slow=slow,
        )

    def close(self) -> None:
        if self.active:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    # --- collectives -----------------------------------------------------------------------
    def _run(self, what: str, fn, *args, slow: bool = False, **kw):
        """Run one collective; a failure or timeout becomes a CollectiveError naming `what`."""
        try:
            return fn(*args, **kw)
        except CollectiveError:
            raise
        except Exception as exc:  # gloo: RuntimeError / DistBackendError with a timeout text
            limit = _seconds(SLOW_TIMEOUT_ENV, DEFAULT_SLOW_TIMEOUT) if slow else self.timeout
            raise CollectiveError(
                f"rank {self.rank}/{self.size}: {what} failed (collective timeout {limit:g}s): "
                "another rank died or walked different policies/segments "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            ) from exc

    def all_sum_(self, tensor: torch.Tensor, what: str = "a sum") -> torch.Tensor:
        """Sum `tensor` over ranks, in place; returns it."""
        if self.active:
            import torch.distributed as dist

            group = self.group
            if tensor.device.type == "cpu" and dist.get_backend(group) != "gloo":
                # NCCL sums GPU tensors only; snapshots offloaded to host memory go by gloo.
                group = self.slow
            self._run(what, dist.all_reduce, tensor, op=dist.ReduceOp.SUM, group=group)
        return tensor

    def sum_floats(self, values: Sequence[float], what: str = "counts") -> list[float]:
        """Element-wise sums over ranks of a few numbers (float64, exact for counts)."""
        if not self.active:
            return [float(v) for v in values]
        tensor = torch.tensor(list(values), dtype=torch.float64, device=self._device())
        return self.all_sum_(tensor, what).tolist()

    def gather(self, value: T, what: str = "a gather", *, slow: bool = False) -> list[T]:
        """Every rank's `value` (any picklable object), in rank order, on every rank. `slow`:
        under the long timeout (some rank may still be evaluating or writing a checkpoint)."""
        if not self.active:
            return [value]
        import torch.distributed as dist

        out: list[Any] = [None] * self.size
        group = self.slow if slow else self.group
        self._run(what, dist.all_gather_object, out, value, group=group, slow=slow)
        return out

    def broadcast(self, value: T, what: str = "a broadcast", *, slow: bool = False) -> T:
        """Rank 0's `value` on every rank (a stop decision, the best checkpoint)."""
        if not self.active:
            return value
        import torch.distributed as dist

        box = [value]
        group = self.slow if slow else self.group
        self._run(what, dist.broadcast_object_list, box, src=0, group=group, slow=slow)
        return box[0]

    def wait(self, what: str) -> None:
        """A barrier that may be long (rank 0 loading a model or writing a checkpoint)."""
        if self.active:
            import torch.distributed as dist

            self._run(what, dist.barrier, group=self.slow, slow=True)

    def check_same(self, what: str, value: Any) -> None:
        """Raise on every rank, naming the difference, unless all ranks hold equal `value`s."""
        if not self.active:
            return
        values = self.gather(value, f"comparing {what}")
        if any(v != values[0] for v in values[1:]):
            shown = "; ".join(f"rank {r}: {v!r}"[:300] for r, v in enumerate(values))
            raise CollectiveError(f"ranks disagree on {what}: {shown}")

    def _device(self) -> torch.device:
        if torch.cuda.is_available() and self.group is not None:
            import torch.distributed as dist

            if dist.get_backend(self.group) == "nccl":
                return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    # --- helpers on top ----------------------------------------------------------------------
    def sum_stats(
        self, stats: dict[str, dict[str, float]], what: str = "statistics"
    ) -> dict[str, dict[str, float]]:
        """Sum a role → name → value table over ranks (a role absent on a rank counts 0)."""
        if not self.active:
            return stats
        total: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for table in self.gather({r: dict(v) for r, v in stats.items()}, what):
            for role, values in table.items():
                for key, value in values.items():
                    total[role][key] += value
        return total

    def all_sum_grads(self, params: list[nn.Parameter], what: str = "gradients") -> None:
        """Replace each parameter's `.grad` by its sum over ranks (one flat fp32 bucket;
        a parameter without a gradient on this rank counts as zeros)."""
        if not self.active:
            return
        numel = sum(p.numel() for p in params)
        flat = torch.zeros(numel, dtype=torch.float32, device=params[0].device)  # (N,)
        offset = 0
        for p in params:
            if p.grad is not None:
                flat[offset : offset + p.numel()].copy_(p.grad.reshape(-1))
            offset += p.numel()
        self.all_sum_(flat, what)
        offset = 0
        for p in params:
            piece = flat[offset : offset + p.numel()].view_as(p).to(p.dtype)
            if p.grad is None:
                p.grad = piece.clone()
            else:
                p.grad.copy_(piece)
            offset += p.numel()


SOLO = World()


def shares(sizes: Sequence[int], ranks: int) -> list[range]:
    """Split items with the given weights into `ranks` contiguous index ranges, each as near
    to an equal total weight as whole items allow (deterministic: every rank computes it)."""
    total = sum(sizes)
    cumulative, acc = [], 0
    for size in sizes:
        acc += size
        cumulative.append(acc)
    bounds = [0]
    for r in range(1, ranks):
        # Rank r starts after the first item at which r/ranks of the weight is reached.
        cut = next((i + 1 for i, c in enumerate(cumulative) if c * ranks >= r * total), len(sizes))
        bounds.append(max(cut, bounds[-1]))
    bounds.append(len(sizes))
    return [range(bounds[k], bounds[k + 1]) for k in range(ranks)]


def split_problems(problems: list, world: World) -> list:
    """This rank's problems of a step: every occurrence of a problem on one rank (a problem
    drawn twice is one GRPO group of 2·group_size), the ranks' loads as even as possible."""
    if not world.active:
        return problems
    order: dict[str, list[int]] = {}
    for i, problem in enumerate(problems):
        order.setdefault(problem.id, []).append(i)
    groups = list(order.values())
    mine = shares([len(g) for g in groups], world.size)[world.rank]
    keep = sorted(i for g in mine for i in groups[g])
    return [problems[i] for i in keep]


def split_list(items: list, world: World) -> list:
    """This rank's contiguous share of `items` (sizes differ by at most one)."""
    if not world.active:
        return items
    return [items[i] for i in shares([1] * len(items), world.size)[world.rank]]


def params_fingerprint(params: list[nn.Parameter]) -> float:
    """A cheap float64 checksum of parameters: replicas that differ show different values."""
    total = 0.0
    for p in params:
        total += float(p.detach().double().sum()) + 0.5 * float(p.detach().double().abs().sum())
    return total
