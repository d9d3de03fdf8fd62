"""What each process of the data-parallel tests runs (tests/trainer/test_distributed.py).

`launch(target, size, *args)` starts `size` CPU processes on the gloo backend, as torchrun
would (the env:// variables), each running `target(world, out_dir, *args)`; it returns each
rank's result or the text of the error it raised. The steps themselves (`two_steps`,
`resumed`) are the functions the single-process reference calls with `SOLO`; the policies and
turns come from tests/trainer/voting_setup.py.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import socket
import tempfile
import time
import traceback
from pathlib import Path

import torch

from tests.trainer.voting_setup import AGENTS, PAD, build, random_turn, voting_config
from trainer.distributed import World, split_list
from trainer.episode import Turn
from trainer.sharding import is_sharded
from trainer.update import update_policies

PROBLEMS = 3  # over 2 ranks: 2 and 1, an uneven split
SAMPLES = 2


def step_config(sharing: str, finetune: str, **values):
    return voting_config(
        **{"sharing": sharing, "finetune": finetune, "micro_batch_size": 3, **values}
    )


def problem_turns(config, step: int) -> list[list[Turn]]:
    """Each problem's turns (all its rollouts); the last problem has no aggregator turn, so
    the rank holding it alone has no turns for that segment (and, per_agent, that policy)."""
    gen = torch.Generator().manual_seed(100 + step)
    out = []
    for problem in range(PROBLEMS):
        turns = []
        for sample in range(SAMPLES):
            for agent, role in AGENTS:
                if problem == PROBLEMS - 1 and role == "aggregator":
                    continue
                turns.append(random_turn(config, agent, role, gen))
        out.append(turns)
    return out


def two_steps(world: World, config) -> dict:
    """Two updates on this rank's share of the problems: metrics of each, parameters after."""
    policies = build(config, world)
    metrics = []
    for step in (1, 2):
        mine = split_list(problem_turns(config, step), world)
        turns = [t for problem in mine for t in problem]
        metrics.append(update_policies(policies, turns, config, tokenizer_pad_id=PAD, world=world))
    params = {n: [_whole(p) for p in policies.parameters(n)] for n in policies.names}
    return {"metrics": metrics, "params": params, "sharded": policies.sharded}


def _whole(p: torch.Tensor) -> torch.Tensor:
    """A parameter's whole value (all-gathered when sharded: every rank calls this)."""
    return (p.full_tensor() if is_sharded(p) else p).detach().clone()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, size, port, timeout, out, target, args) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(size),
        TROUPE_DIST_TIMEOUT=str(timeout),
        OMP_NUM_THREADS="1",
    )
    torch.set_num_threads(1)
    world = None
    try:
        world = World.start(size)
        result = ("ok", target(world, *args))
    except Exception as exc:  # the parent asserts on the message
        result = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    with open(Path(out) / f"rank{rank}.pkl", "wb") as fh:
        pickle.dump(result, fh)
    if world is not None and result[0] == "ok":
        world.close()
    os._exit(0)  # a failed rank must not wait on its process group's teardown


def launch(target, size: int, *args, timeout: float = 60, limit: float = 300) -> list:
    """Run `target(world, *args)` on `size` gloo ranks; each rank's ("ok", value) or
    ("error", text). Raises if a rank is still running after `limit` seconds (a hang)."""
    ctx = multiprocessing.get_context("spawn")
    port = _free_port()
    with tempfile.TemporaryDirectory() as out:
        procs = [
            ctx.Process(target=_rank_main, args=(r, size, port, timeout, out, target, args))
            for r in range(size)
        ]
        for p in procs:
            p.start()
        deadline = time.monotonic() + limit
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        if hung:
            raise AssertionError(f"ranks {hung} still running after {limit}s: a hang")
        results = []
        for r in range(size):
            with open(Path(out) / f"rank{r}.pkl", "rb") as fh:
                results.append(pickle.load(fh))
        return results


def resumed(world: World, config, where: str, load_from: str | None = None) -> dict:
    """Step 1; its checkpoint written into `where` as a run writes it (rank 0 the state file;
    sharded, every rank its shards); step 2 on policies built afresh from the checkpoint in
    `load_from` (default: that one). The parameters after step 2."""
    policies = build(config, world)
    for step, source in ((1, None), (2, Path(load_from or where))):
        if source is not None:
            policies = build(config, world)
            state = torch.load(source / "state.pt", weights_only=True)
            policies.load_state_dict(state, source)
        mine = split_list(problem_turns(config, step), world)
        turns = [t for problem in mine for t in problem]
        update_policies(policies, turns, config, tokenizer_pad_id=PAD, world=world)
        if step == 1:
            state = policies.state_dict()
            if policies.sharded:
                policies.save_shards(Path(where))
            if world.leader:
                torch.save(state, Path(where) / "state.pt")
            world.wait("the checkpoint")
    return {n: [_whole(p) for p in policies.parameters(n)] for n in policies.names}
