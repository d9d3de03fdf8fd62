"""What each process of the data-parallel tests runs (tests/trainer/test_distributed.py).

`launch(target, size, *args)` starts `size` CPU processes on the gloo backend, as torchrun
would (the env:// variables), each running `target(world, out_dir, *args)`; it returns each
rank's result or the text of the error it raised. The step itself (`one_step`) is the same
function the single-process reference calls with `SOLO`.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import socket
import tempfile
import time
import traceback
from pathlib import Path

import torch

from tests.trainer.tiny_qwen3 import tiny_qwen3
from trainer.config import make_config
from trainer.distributed import SOLO, World, split_list
from trainer.episode import Turn
from trainer.policies import PolicySet, agent_policy, policy_names
from trainer.update import update_policies

PAD = 0
AGENTS = [(f"generator{i}", "generator") for i in range(3)] + [("aggregator", "aggregator")]
PROBLEMS = 3  # over 2 ranks: 2 and 1, an uneven split
SAMPLES = 2


def step_config(sharing: str, finetune: str, **values):
    base = dict(
        workflow="voting",
        sharing=sharing,
        finetune=finetune,
        lora_r=4,
        lora_alpha=8,
        lr=1e-2,
        warmup_steps=0,
        steps=5,
        max_new_tokens=6,
        micro_batch_size=3,
        kl_beta=0.05,
    )
    return make_config(**{**base, **values})


def build(config, world: World = SOLO) -> PolicySet:
    """Policies every rank builds identically: a seeded model, non-zero distinct adapters
    (fully fine-tuned ones are sharded over the ranks of `world`)."""
    policies = PolicySet(tiny_qwen3(), config, policy_names(config), world)
    if config.finetune == "lora":
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for name in policies.names:
                for p in policies.parameters(name):
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    return policies


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
                n = int(torch.randint(2, 7, (1,), generator=gen))
                turns.append(
                    Turn(
                        role,
                        agent,
                        agent_policy(config, agent, role),
                        0,
                        prompt_ids=torch.randint(1, 64, (5,), generator=gen).tolist(),
                        completion_ids=torch.randint(1, 64, (n,), generator=gen).tolist(),
                        logprobs=(torch.randn(n, generator=gen) * 0.3 - 4.0).tolist(),
                        advantage=float(torch.randn((), generator=gen)),
                    )
                )
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
    return (p.full_tensor() if policies_sharded(p) else p).detach().clone()


def policies_sharded(p: torch.Tensor) -> bool:
    from trainer.sharding import is_sharded

    return is_sharded(p)


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


def resumed(world: World, config, state: dict | None = None) -> dict:
    """Step 1, the policies' checkpoint state, then step 2 on policies built afresh from that
    state (or from `state`, a checkpoint written elsewhere): the state and the parameters.
    Sharded, the state is gathered on rank 0 and every rank loads the whole state."""
    policies = build(config, world)
    mine = split_list(problem_turns(config, 1), world)
    turns = [t for problem in mine for t in problem]
    update_policies(policies, turns, config, tokenizer_pad_id=PAD, world=world)
    # A copy, as a checkpoint file is: the optimizer's state dict shares live tensors (step).
    saved = copy.deepcopy(policies.state_dict())
    policies = build(config, world)
    # Loaded from a copy too: the optimizer keeps the loaded `step` tensors and counts on.
    policies.load_state_dict(copy.deepcopy(world.broadcast(state or saved, "the checkpoint")))
    mine = split_list(problem_turns(config, 2), world)
    turns = [t for problem in mine for t in problem]
    update_policies(policies, turns, config, tokenizer_pad_id=PAD, world=world)
    params = {n: [_whole(p) for p in policies.parameters(n)] for n in policies.names}
    return {"state": saved, "params": params}
