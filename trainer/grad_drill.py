"""Gradient drill-down: how much of each role's gradient each recorded episode of a step carried.

For a recorded training episode e and a role r, with g_r the step's whole gradient of role r
(every episode's, every rank's: what `GradientTracker.roles` holds) and g_{e,r} the part of it
that e's turns of role r contributed,

    share_{e,r} = <g_{e,r}, g_r> / ‖g_r‖².

Over *all* the step's episodes these sum to 1 (Σ_e g_{e,r} = g_r); the recorded episodes are a
sample (`episode_log.train_sample`), so theirs sum to at most about their fraction of the
step. A share can be negative (the episode pushed against the role's net direction) or above
1 (others cancelled part of it). An episode with a large share is one that drove that role's
update: from a spike of `role/<r>/grad_norm` these are the episodes to read.

Exact, with the same machinery as the per-role figures (trainer/gradients.py): within each
(role, agent) segment of the update, the turns of each recorded episode run first, in
micro-batches of their own, and the accumulated `.grad` is snapshotted after each episode's
last micro-batch; the difference of consecutive snapshots is g_{e,r} on that policy (the loss
is a sum of per-sequence terms over a normaliser fixed for the optimizer batch, so
accumulation order does not change what each turn contributes). After the segments, `settle`
takes the dot products with the role totals. Where a role spans several policies or several
optimizer steps (`per_agent`, `mini_batches` > 1), numerators and ‖g_r‖² are summed over them,
so the shares still sum to 1 over the step's episodes.

Cost: one flat copy of the policy's gradient per recorded (episode, segment), held until the
optimizer step's role totals are known (on the host past `snapshot_budget_bytes()`),
one dot product each, and the smaller micro-batches of the recorded turns (BENCHMARKS.md,
"Gradient drill-down"). Micro-batches change composition, so the weights match an update
without the drill-down only up to float rounding.

Activated for one update by `drilling(drill)` (a context variable, so the update's functions
keep their signatures: trainer/passes.py asks `groups` for a segment's turns and cuts each
group into micro-batches with `chunks`, `update._finish_step` calls `settle` and
`settle_whole`, each a no-op when no drill is active; ranks that must run the same number of
passes count them with `micro_batch_count`). Several policies' optimizer steps may be open at
once (LoRA policies sharing passes), so each part is kept under its policy's name and settled
against that policy's role vectors only. Data parallel: the
drill runs on the rank that records (rank 0) and needs no collective of its own; the role
totals it divides by are already summed over ranks. It needs the role vectors of an
instrumented update (`instrument=True`, as the trainer always runs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import nn

from trainer.episode import Episode, Turn
from trainer.gradients import GradientTracker, dot
from trainer.loss import PackedSize
from trainer.memory import snapshot_budget_bytes


class EpisodeDrill:
    """The drill-down of one training step over `episodes` (the recorded sample)."""

    def __init__(self, episodes: Sequence[Episode]):
        # Turns are dataclasses (unhashable): identify them by object, as the update holds them.
        self.owner = {id(turn): i for i, ep in enumerate(episodes) for turn in ep.turns}
        self.count = len(episodes)
        # (policy, role, episode, g_{e,r} part on that policy)
        self._pieces: list[tuple[str, str, int, torch.Tensor]] = []
        self._held = 0  # bytes of pieces on the accelerator
        self.numerator: dict[tuple[int, str], float] = defaultdict(float)
        self.norm_sq: dict[str, float] = defaultdict(float)

    def _parts(self, segment: list[Turn]) -> list[tuple[int | None, list[Turn]]]:
        """The segment's turns by recorded episode (in order), then the rest (episode None)."""
        mine: dict[int, list[Turn]] = defaultdict(list)
        rest = []
        for turn in segment:
            episode = self.owner.get(id(turn))
            (rest if episode is None else mine[episode]).append(turn)
        return [*((e, mine[e]) for e in sorted(mine)), (None, rest)]

    def groups(
        self, policy: str, role: str, segment: list[Turn], params: list[nn.Parameter]
    ) -> Iterator[list[Turn]]:
        """The segment's turns in groups: each recorded episode's on their own, snapshot after
        each (when the caller asks for the next group, the backward of this one is done)."""
        parts = self._parts(segment)
        before = flat_grad(params) if len(parts) > 1 else None
        for episode, turns in parts:
            if not turns:
                continue
            yield turns
            if episode is not None:
                after = flat_grad(params)
                self._keep(policy, role, episode, after - before)
                before = after
        del before

    def _keep(self, policy: str, role: str, episode: int, piece: torch.Tensor) -> None:
        if piece.device.type != "cpu":
            if self._held + piece.numel() * 4 > snapshot_budget_bytes():
                piece = piece.cpu()
            else:
                self._held += piece.numel() * 4
        self._pieces.append((policy, role, episode, piece))

    def settle(self, policy: str, roles: Mapping[str, torch.Tensor]) -> None:
        """`policy`'s optimizer step's role totals are known: take the dot products with its
        parts, free them."""
        for role, vector in roles.items():
            self.norm_sq[role] += dot(vector, vector)
        kept = []
        for owner, role, episode, piece in self._pieces:
            if owner != policy:
                kept.append((owner, role, episode, piece))
                continue
            if role in roles:  # an uninstrumented update has no role vectors: nothing to say
                total = roles[role]
                self.numerator[(episode, role)] += dot(piece.to(total.device), total)
            if piece.device.type != "cpu":
                self._held -= piece.numel() * 4
        self._pieces = kept

    def shares(self) -> list[dict[str, float]]:
        """Per recorded episode (in order), {role: share} for the roles its turns had."""
        out: list[dict[str, float]] = [{} for _ in range(self.count)]
        for (episode, role), value in sorted(self.numerator.items()):
            if self.norm_sq.get(role, 0.0) > 0:
                out[episode][role] = value / self.norm_sq[role]
        return out


def flat_grad(params: list[nn.Parameter]) -> torch.Tensor:
    """A flat fp32 copy of the accumulated `.grad`, taken exactly as the tracker takes its
    snapshots (so a change to how gradients are laid out reaches both)."""
    return GradientTracker(params).flat_grad()


def chunks(turns: list[Turn], size: int, tokens: int = 0) -> Iterator[list[Turn]]:
    """Consecutive micro-batches of `size` turns, or (`tokens` > 0) of as many turns as fit in
    `tokens` tokens packed, the rows' padded ends included (`PackedSize`; a longer turn alone)."""
    if tokens <= 0:
        for start in range(0, len(turns), size):
            yield turns[start : start + size]
        return
    chunk: list[Turn] = []
    packed = PackedSize()
    for turn in turns:
        length = len(turn.prompt_ids) + len(turn.completion_ids)
        if chunk and packed.tokens_with(length) > tokens:
            yield chunk
            chunk, packed = [], PackedSize()
        chunk.append(turn)
        packed.add(length)
    if chunk:
        yield chunk


_ACTIVE: ContextVar[EpisodeDrill | None] = ContextVar("troupe_grad_drill", default=None)


@contextmanager
def drilling(drill: EpisodeDrill | None) -> Iterator[EpisodeDrill | None]:
    """Make `drill` the active drill-down for the updates run inside (None: none)."""
    token = _ACTIVE.set(drill)
    try:
        yield drill
    finally:
        _ACTIVE.reset(token)


def groups(
    policy: str, role: str, segment: list[Turn], params: list[nn.Parameter]
) -> Iterator[list[Turn]]:
    """The update's groups of one segment's turns, each cut into micro-batches by the caller
    (`chunks`): the whole segment unless a drill is active (then `EpisodeDrill.groups`)."""
    drill = _ACTIVE.get()
    if drill is None:
        return iter([segment] if segment else [])
    return drill.groups(policy, role, segment, params)


def micro_batch_count(segment: list[Turn], size: int, tokens: int = 0) -> int:
    """How many micro-batches a segment of one policy runs in, passes of its own (`chunks`
    of its `groups`): ranks that must run the same number of passes (sharded parameters)
    count with this, not with len(segment)."""
    drill = _ACTIVE.get()
    parts = [segment] if drill is None else [turns for _, turns in drill._parts(segment)]
    return sum(sum(1 for _ in chunks(part, size, tokens)) for part in parts)


def settle(policy: str, roles: Mapping[str, torch.Tensor]) -> None:
    """An optimizer step's role vectors (the tracker's, summed over ranks) are known."""
    drill = _ACTIVE.get()
    if drill is not None:
        drill.settle(policy, roles)


def settle_whole(
    policy: str, segments: Sequence[tuple[str, str]], params: list[nn.Parameter]
) -> None:
    """An optimizer step with no tracker: a single segment's role owns the whole `.grad`
    (already summed over ranks). With several segments and no tracker there are no role
    vectors, and the parts are dropped."""
    drill = _ACTIVE.get()
    if drill is None:
        return
    roles = {segments[0][0]: flat_grad(params)} if len({r for r, _ in segments}) == 1 else {}
    drill.settle(policy, roles)
