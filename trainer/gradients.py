"""Exact per-agent and per-role gradients of one optimizer step, without extra backward passes.

The update (trainer/update.py) runs a policy's turns in segments — ordered by role, then by
agent within the role — and accumulates every micro-batch's gradient in `.grad`. Because the
loss is a sum of per-sequence contributions over a normaliser fixed for the whole optimizer
batch (trainer/loss.py), the gradient a segment adds to `.grad` is exactly the gradient of its
own share of the loss. `GradientTracker.end_segment` snapshots the accumulated `.grad` (as one
flat fp32 vector) after each agent segment; the difference of consecutive snapshots is that
agent's gradient, and a role's gradient is the sum of its agents'. From these vectors come the
norms, shares and cosines of docs/design.md §5, under every sharing mode, at the cost of one
flatten-and-subtract per segment instead of a backward pass per role or agent. With the
coherence regulariser off, `.grad` is never modified, so the optimizer step is bit-identical to
an un-instrumented one. (With low-precision parameters `.grad` itself accumulates in that
precision; the figures are then exact up to that accumulator's rounding.)

Memory. Each vector is one fp32 copy of the policy's trainable gradient: ≈160 MB for
Qwen3-0.6B with LoRA r64 on all linear layers (≈40 M parameters), ≈530 MB at 4B; with full
fine-tuning 2.4 GB (0.6B) to 16 GB (4B). Held at once, per policy and optimizer step: the
running snapshot, the freshly taken one, the agent vectors of the role being processed (needed
for its agent-pair cosines) and one accumulated vector per finished role (needed for role-pair
cosines and the coherence regulariser) — at most (2 + max agents of a role + roles) vectors,
e.g. 7 for Voting with 3 voters under `shared` (6 measured, bench/grad_overhead.py). Vectors are
freed before the optimizer step. To keep this bounded, the update moves the vectors to host
memory (`offload=True`) when they would exceed `snapshot_budget_bytes()` (a quarter of the
GPU) on the accelerator, or always with `grad_snapshots=host`; the dot products are then
computed on the CPU, slower but exact. The limit: full fine-tuning of a 4B model under
Voting/shared would need ≈110 GB even on the host — run such a configuration with
`instrument=False` (and no coherence regulariser), or with LoRA. The coherence EMA adds one
persistent vector per (policy, role), only when `coherence_lambda` > 0. A policy whose
batch is a single segment (one role, one agent: every policy under `per_agent`) needs no
vectors at all: its role and agent gradient is the whole gradient.

Data parallel (trainer/distributed.py): the tracker gets a `reduce` that sums each segment's
gradient over the ranks as it is taken, so the vectors are those of the whole step's batch and
the figures are exact; every rank walks the same segments (an empty one contributes zeros), and
`write_back(force=True)` then puts the summed gradient into `.grad` for the optimizer. Sharded
policies (FSDP2, trainer/sharding.py) already hold the summed gradient's shard in `.grad`:
each rank keeps its shard of each vector and `sum_dots` all-reduces only the dot products.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

# One definition each, shared with the memory estimate (torch-free, trainer/memory.py).
from trainer.memory import snapshot_budget_bytes, vectors_needed  # noqa: F401
from trainer.sharding import local
from vocabulary.names import grad_cos_key

_CHUNK = 1 << 22  # elements per float64 chunk when reducing dot products


def dot(a: torch.Tensor, b: torch.Tensor) -> float:
    """Dot product of two flat fp32 vectors, accumulated in float64 chunk by chunk."""
    total = torch.zeros((), dtype=torch.float64, device=a.device)
    for start in range(0, a.numel(), _CHUNK):
        stop = start + _CHUNK
        total += torch.dot(a[start:stop].double(), b[start:stop].double())
    return float(total)


def cosine(
    a: torch.Tensor, b: torch.Tensor, dots: Callable[[list[float]], list[float]] | None = None
) -> float | None:
    """Cosine of two vectors; None when either is zero (the angle is undefined). `dots` sums
    the three dot products over ranks (vectors that are shards)."""
    products = [dot(a, a), dot(b, b), dot(a, b)]
    na, nb, ab = dots(products) if dots is not None else products
    if na <= 0 or nb <= 0:
        return None
    return ab / math.sqrt(na * nb)


@dataclass
class GradientFigures:
    """What one optimizer step of one policy reveals about who pushed it where."""

    role_sq: dict[str, float] = field(default_factory=dict)  # role -> ‖g_role‖²
    agent_sq: dict[str, float] = field(default_factory=dict)  # agent -> ‖g_agent‖²
    cos: dict[str, float] = field(default_factory=dict)  # grad_cos_key(a, b) -> cosine

    def shares(self) -> dict[str, float]:
        """‖g_role‖ / Σ_r ‖g_r‖ over the roles on this policy (they sum to 1)."""
        norms = {r: math.sqrt(max(sq, 0.0)) for r, sq in self.role_sq.items()}
        total = sum(norms.values())
        return {r: n / total for r, n in norms.items()} if total > 0 else {}


class GradientTracker:
    """Splits the gradient accumulated during one optimizer step into agent and role parts.

    Call `end_segment(role, agent)` after the backward passes of each agent segment (segments
    of one role must be contiguous), then `finish()`. `roles` then maps each role to its
    gradient vector (flat fp32, parameter order of `params`).
    """

    def __init__(
        self,
        params: list[nn.Parameter],
        *,
        offload: bool = False,
        reduce: Callable[[torch.Tensor], object] | None = None,
        sum_dots: Callable[[list[float]], list[float]] | None = None,
    ):
        self.params = list(params)
        # Data parallel (trainer/distributed.py): sums each segment's gradient over ranks in
        # place, so the vectors (and every figure) are those of the whole step's batch.
        self.reduce = reduce
        # Sharded parameters: the vectors are this rank's shards; dot products are summed.
        self.sum_dots = sum_dots
        self.numel = sum(local(p).numel() for p in self.params)
        self.storage = torch.device("cpu") if offload else self.params[0].device
        self.roles: dict[str, torch.Tensor] = {}
        self.figures = GradientFigures()
        self._last: torch.Tensor | None = None  # (N,) snapshot at the previous boundary
        self._role: str | None = None
        self._agents: dict[str, torch.Tensor] = {}  # agent vectors of the open role
        self.peak_bytes = 0  # largest total size of held vectors, for the benchmark

    def flat_grad(self) -> torch.Tensor:
        """A flat fp32 copy of the accumulated `.grad` (zeros where a parameter has none)."""
        out = torch.zeros(self.numel, dtype=torch.float32, device=self.params[0].device)  # (N,)
        offset = 0
        for p in self.params:
            n = local(p).numel()
            if p.grad is not None:
                out[offset : offset + n].copy_(local(p.grad).reshape(-1))
            offset += n
        return out.to(self.storage)

    def _sq(self, vector: torch.Tensor) -> float:
        value = dot(vector, vector)
        return self.sum_dots([value])[0] if self.sum_dots is not None else value

    def _note_memory(self, *extra: torch.Tensor | None) -> None:
        held = [*self.roles.values(), *self._agents.values(), self._last, *extra]
        unique = {t.data_ptr(): t.numel() * 4 for t in held if t is not None}
        self.peak_bytes = max(self.peak_bytes, sum(unique.values()))

    def end_segment(self, role: str, agent: str) -> None:
        current = self.flat_grad()  # (N,)
        if role != self._role:
            self._close_role(current)
            if role in self.roles:
                raise ValueError(f"segments of role {role!r} are not contiguous")
            self._role = role
        if agent in self._agents:
            raise ValueError(f"segments of agent {agent!r} are not contiguous")
        # The first segment's gradient is the snapshot itself: share the storage (unless it
        # is summed over ranks: the running snapshot must stay this rank's own).
        if self._last is not None:
            gradient = current - self._last  # (N,)
        else:
            gradient = current.clone() if self.reduce is not None else current
        if self.reduce is not None:
            self.reduce(gradient)
        self._note_memory(current, gradient)
        self._last = current
        self._agents[agent] = gradient

    def _close_role(self, current: torch.Tensor | None = None) -> None:
        if self._role is None:
            return
        agents = self._agents
        names = list(agents)
        for name in names:
            self.figures.agent_sq[name] = self._sq(agents[name])
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                c = cosine(agents[a], agents[b], self.sum_dots)
                if c is not None:
                    self.figures.cos[grad_cos_key(a, b)] = c
        if len(names) == 1:
            role_vector = agents[names[0]]
        else:
            role_vector = torch.zeros_like(agents[names[0]])  # (N,)
            for name in names:
                role_vector += agents[name]
        self._note_memory(current, role_vector)
        self.roles[self._role] = role_vector
        self.figures.role_sq[self._role] = self._sq(role_vector)
        self._agents = {}
        self._role = None

    def finish(self) -> GradientFigures:
        """Close the last role; compute role-pair cosines. The running snapshot is freed."""
        self._close_role()
        self._last = None
        names = list(self.roles)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                c = cosine(self.roles[a], self.roles[b], self.sum_dots)
                if c is not None:
                    self.figures.cos[grad_cos_key(a, b)] = c
        return self.figures

    def write_back(self, scales: dict[str, float], *, force: bool = False) -> None:
        """Replace `.grad` by Σ_role scale·g_role (the coherence regulariser's recombination;
        with `force`, also when every scale is 1: the ranks' summed gradient)."""
        if not force and all(scales.get(role, 1.0) == 1.0 for role in self.roles):
            return  # .grad already holds the plain sum; leave it bit-exact
        combined = torch.zeros(self.numel, dtype=torch.float32, device=self.storage)  # (N,)
        for role, vector in self.roles.items():
            combined.add_(vector, alpha=scales.get(role, 1.0))
        combined = combined.to(self.params[0].device)
        offset = 0
        for p in self.params:
            n = local(p).numel()
            piece = combined[offset : offset + n].view_as(local(p)).to(p.dtype)
            if p.grad is None:
                p.grad = piece.clone()
            else:
                local(p.grad).copy_(piece)
            offset += n


def coherence_scales(
    roles: dict[str, torch.Tensor],
    ema: dict[tuple[str, str], torch.Tensor],
    policy: str,
    lam: float,
    decay: float,
) -> dict[str, tuple[float, float | None]]:
    """The coherence regulariser: role -> (scale, cos), and the EMA updated in place.

    scale = 1 − λ·max(0, cos(g_role, EMA of g_role)). A role persistently pushing its policy in
    the same direction is damped. The EMA is of the raw (unscaled) gradient and starts at the
    first gradient seen; until then there is no direction to compare with, so the scale is 1.
    """
    out: dict[str, tuple[float, float | None]] = {}
    for role, g in roles.items():
        key = (policy, role)
        previous = ema.get(key)
        if previous is None:
            ema[key] = g.detach().clone()
            out[role] = (1.0, None)
            continue
        c = cosine(g, previous.to(g.device))
        scale = 1.0 - lam * max(0.0, c) if c is not None else 1.0
        previous.mul_(decay).add_(g.to(previous.device), alpha=1.0 - decay)
        out[role] = (scale, c)
    return out
