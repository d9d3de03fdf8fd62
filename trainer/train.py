"""End-to-end multi-agent GRPO: rollout → rewards → advantages → update → evaluate → report.

How this differs from textbook (single-agent) GRPO, following the study's setup:
- An episode is a whole workflow (several agents, several turns). Every turn is a training
  sequence for the policy its agent routes to (`sharing`: one shared policy, one per role,
  or one per agent), and one step updates every policy.
- Rewards are binary final-answer correctness, broadcast to every turn (`reward_mode=
  broadcast`) or each role's own judgeable score (`per_role`).
- GRPO groups are keyed by (problem, role) — or (problem, agent) — not by problem alone, so a
  voter is compared with voters and an aggregator with aggregators.
- `frozen_roles`: those roles' turns are left out of the update, so their policies keep the
  base weights (an ablation; their attribution, `analysis/attribution.py`, is exactly 0).
- Clip-higher (`clip_low` 0.2, `clip_high` 0.28), no KL term by default (optional per-role
  anchors), seq-mean-token-mean aggregation, and an optional coherence regulariser.
- The gradient each role and each agent puts on each policy is measured exactly, under every
  sharing mode, from snapshots between micro-batch segments (`trainer/gradients.py`).
- Evaluation at step 0 is the base model; then every `eval_every` steps and at the end.
  A run branched from another run's checkpoint (`init_from`, step s) loads its whole state,
  evaluates at step s first and trains s+1…`steps`; its own checkpoints go to its own
  directory, and once it has one it resumes from it.
  After each, the best policies so far by `eval/accuracy` are kept as the `best` checkpoint
  (`trainer/checkpoint.py`; logged as `ckpt/best_step` and `ckpt/best_accuracy`), and with
  `stop_after_cliff` N the run ends N evaluations after a confirmed cliff
  (`trainer/stop_policy.py`).
- Before the first step the reporter hears what is happening (`on_status`): a tiny model's
  warm start on first use takes minutes, and a run page shows its percentage, the time spent
  and an estimate of the time left. A cancel is honoured in every phase: before loading,
  during the warm start (asked every `STOP_CHECK_SECONDS`), after the first evaluation, and
  after every step.

- Several processes (`world_size` > 1, launched by torchrun; trainer/distributed.py): each
  rank rolls out its share of the step's problems (a problem's rollouts on one rank) and of
  the held-out problems; the step's reward, token and evaluation statistics are those of all
  ranks' episodes (behaviour metrics from every rank's counts), and the update sums
  gradients exactly (trainer/update.py). Rank 0 alone reports, writes checkpoints and
  decides to stop (cancel, cliff); the others follow it. Fully fine-tuned policies are
  sharded (FSDP2, trainer/sharding.py): generation and evaluation run inside
  `policies.gathered()`, and every rank writes its shards of a checkpoint before rank 0
  completes it.

Run it: `python -m trainer run --preset cpu-demo --workflow voting --out runs/demo`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import resource
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from trainer.advantages import compute_advantages
from trainer.behaviour import add_counts, behaviour_counts, from_counts
from trainer.checkpoint import (
    check_branch,
    keep_best,
    load_branch,
    load_checkpoint,
    restore_meta,
    save_checkpoint,
    shard_staging,
)
from trainer.checkpoint_index import is_own, resume_point
from trainer.config import Config, ConfigError, config_from_dict, fit_problem
from trainer.distributed import World, params_fingerprint, split_list, split_problems
from trainer.engines import make_engine
from trainer.engines.old_logprobs import recompute_old_logprobs
from trainer.episode import Episode
from trainer.episode_log import flagged_beyond, log_episodes, probe_sample, train_sample
from trainer.evaluate import evaluate, held_out, record_per_problem
from trainer.grad_drill import EpisodeDrill, drilling
from trainer.kernels import use_kernels
from trainer.models import load_model, resolve_device
from trainer.policies import PolicySet
from trainer.precision import PARAM_DTYPE, compute_dtype, dtype_bits
from trainer.reporting import NullReporter, Reporter
from trainer.rollout import Codec, make_prompts, rollout
from trainer.routing import policy_names
from trainer.stop_policy import cliff_stop_reason
from trainer.tasks import load_task
from trainer.update import update_policies
from vocabulary.names import (
    ACCURACY_KEY,
    ACCURACY_SE_KEY,
    BEST_ACCURACY_KEY,
    BEST_STEP_KEY,
    COMPUTE_DTYPE_KEY,
    ENGINE_STARTUP_KEY,
    ENGINE_SYNC_KEY,
    EVAL_SECONDS_KEY,
    MALFORMED_KEY,
    PARAM_DTYPE_KEY,
    PEAK_MEMORY_KEY,
    RESP_LEN_KEY,
    REWARD_KEY,
    ROLLOUT_SECONDS_KEY,
    STEP_SECONDS_KEY,
    TOKEN_BUDGET_KEY,
    TOKENS_PER_SECOND_KEY,
    UPDATE_SECONDS_KEY,
    VERDICT_DISAGREEMENT_RATE,
    VERDICT_DISAGREEMENTS_KEY,
    role_accuracy_key,
    role_key,
)


def prepare_out_dir(config: Config, out_dir: str | Path) -> Path:
    """Write config.json, or check that an existing run directory holds this same config."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.json"
    if path.exists():
        existing = config_from_dict(json.loads(path.read_text()))
        if existing.world_size != config.world_size:
            raise ValueError(
                f"{out} holds a run trained on {existing.world_size} rank(s); resume it with "
                f"--world-size {existing.world_size} (its checkpoints and its split of each "
                "step's problems belong to that number)"
            )
        if existing.hash() != config.hash():
            raise ValueError(
                f"{out} already holds a run with a different config; "
                "resume it with the same flags or choose another --out"
            )
    else:
        path.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    return out


def sample_problems(task, n: int, seed: int, step: int) -> list:
    """The step's training problems: a pure function of (seed, step), so resume is exact."""
    return task.sample("train", n, seed=seed * 1_000_003 + step)


def _peak_memory_mb(device: str) -> float:
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _eval_metrics(result: dict) -> dict[str, float]:
    metrics = {ACCURACY_KEY: result["accuracy"], ACCURACY_SE_KEY: result["accuracy_se"]}
    metrics.update({role_accuracy_key(role): acc for role, acc in result["roles"].items()})
    return metrics


def _best_metrics(best: dict) -> dict[str, float]:
    return {BEST_STEP_KEY: best["step"], BEST_ACCURACY_KEY: best["accuracy"]}


class Cancelled(Exception):
    """Raised from inside a long phase (a tiny model's warm start) when the reporter says
    stop: that phase has no step boundary to stop at, and it may take many minutes."""


STOP_CHECK_SECONDS = 1.0  # how often a warm start asks `should_stop` (a database read each)
STATUS_SECONDS = 5.0  # how often a warm start's line is told again within one percent


def duration_text(seconds: float) -> str:
    """75 → '1m 15s', 9 → '9s', 3725 → '1h 02m'."""
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds}s"


def warm_start_status(
    reporter: Reporter, model: str, clock: Callable[[], float] = time.monotonic
) -> Callable[[int, int], None]:
    """A warm-start progress callback that tells `reporter` each new whole percent — and,
    within a percent, the same line again every `STATUS_SECONDS` — with the time spent and an
    estimate of the time left, and raises `Cancelled` within about `STOP_CHECK_SECONDS` of a
    cancel. From 1% the estimate is the pace so far; below it, the pace since the first step
    reported (the set-up before it, the tokenizer and the corpus, would promise hours): a
    slow machine's 0% otherwise read "0% (21s elapsed)" for minutes, with no estimate."""
    shown = -1
    started = clock()
    asked = started
    told = started
    first: tuple[float, int] | None = None  # (time, steps) of the first step reported

    def progress(done: int, total: int) -> None:
        nonlocal shown, asked, told, first
        now = clock()
        if first is None:
            first = (now, done)
        if now - asked >= STOP_CHECK_SECONDS:
            asked = now
            if reporter.should_stop():
                raise Cancelled(f"cancelled during the warm start of {model}")
        percent = 100 * done // max(total, 1)
        if percent == shown and now - told < STATUS_SECONDS:
            return
        shown, told = percent, now
        elapsed = now - started
        timing = f"{duration_text(elapsed)} elapsed"
        if done < total:
            if percent >= 1:
                left = elapsed * (total - done) / done
            elif done > first[1] and now > first[0]:
                left = (now - first[0]) / (done - first[1]) * (total - done)
            else:
                left = None
            if left is not None:
                timing += f", about {duration_text(left)} left"
        reporter.on_status(f"Preparing model {model}: warm start {percent}% ({timing})")

    return progress


def _cancelled(started: float, step: int = 0) -> dict:
    return {"status": "cancelled", "step": step, "seconds": time.perf_counter() - started}


def merge_evaluations(results: list[dict]) -> dict:
    """One evaluation from the results of disjoint, ordered shares of the held-out problems
    (one per rank): the same figures as evaluating them all at once."""
    n = sum(r["episodes"] for r in results)
    per_problem = [value for r in results for value in r["per_problem"]]
    spread = statistics.stdev(per_problem) if len(per_problem) > 1 else 0.0
    counts: dict[str, int] = {}
    sums: dict[str, float] = {}
    for r in results:
        for role, count in r["role_counts"].items():
            counts[role] = counts.get(role, 0) + count
            sums[role] = sums.get(role, 0.0) + r["roles"][role] * count
    return {
        "accuracy": math.fsum(r["accuracy"] * r["episodes"] for r in results) / n if n else 0.0,
        "accuracy_se": spread / math.sqrt(len(per_problem)) if per_problem else 0.0,
        "per_problem": per_problem,
        "episodes": n,
        "turns": sum(r["turns"] for r in results),
        "tokens": sum(r["tokens"] for r in results),
        "seconds": max(r["seconds"] for r in results),
        "roles": {role: sums[role] / counts[role] for role in sorted(counts)},
        "role_counts": dict(sorted(counts.items())),
    }


def _evaluate(
    config: Config, eval_set: list, env: dict, world: World, rollouts: list | None = None
) -> dict:
    """Evaluate on the held-out problems: each rank its share, merged on every rank. This
    rank's scored episodes go to `rollouts` (rank 0's are the ones recorded)."""
    problems = split_list(eval_set, world)
    with env["policies"].gathered():  # sharded policies: all-gathered while generating
        result = evaluate(config, problems=problems, rollouts=rollouts, **env)
    if not world.active:
        return result
    return merge_evaluations(world.gather(result, "the evaluation's results", slow=True))


def _write_shards(policies: PolicySet, out: Path, kind: str, step: int, world: World):
    """Sharded policies: every rank writes its shards into the staging directory rank 0 made
    for the checkpoint (trainer/checkpoint.py), returned for rank 0 to finish; else None."""
    if not policies.sharded:
        return None
    staging = shard_staging(out, kind, step)
    if world.leader:  # a staging directory a killed rank left behind is started afresh
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    world.wait("rank 0 making a checkpoint's staging directory")
    policies.save_shards(staging)
    world.wait("every rank writing its shards of a checkpoint")
    return staging


def _keep_best(
    out: Path, best: dict | None, step: int, result: dict, policies, config: Config, world: World
) -> dict:
    """Record the evaluation and keep the best checkpoint (rank 0 writes; the ranks of sharded
    policies first write their shards, when the evaluation beats the best); the best on every
    rank."""
    improves = best is None or result["accuracy"] > best["accuracy"]
    staging = _write_shards(policies, out, "best", step, world) if improves else None
    if world.leader:
        record_per_problem(out, step, result)
        best = keep_best(
            out, best, step, result["accuracy"], policies, config.hash(), staging=staging
        )
    return world.broadcast(best, "rank 0 keeping the best checkpoint", slow=True)


def _light(episodes: list[Episode]) -> list[Episode]:
    """Episodes without their prompts, log-probs and texts: what the step's statistics need
    (rewards, scores, lengths, malformations), small enough to gather from every rank."""
    return [
        dataclasses.replace(
            ep,
            answer=None,
            turns=[dataclasses.replace(t, prompt_ids=[], logprobs=[], text="") for t in ep.turns],
        )
        for ep in episodes
    ]


def train(
    config: Config,
    out_dir: str | Path,
    reporter: Reporter | None = None,
    *,
    world: World | None = None,
) -> dict:
    """Train (or resume) the run in `out_dir`; returns {"status", "step", "seconds"}.

    Under torchrun (`world_size` > 1) every rank calls this; `world` defaults to joining the
    launcher's process group (and leaving it at the end). Only rank 0's `reporter` is used.
    """
    device = resolve_device(config.device)
    # What a run starts beside itself (a vLLM engine) is stopped however the run ends.
    with contextlib.ExitStack() as closing:
        if world is not None:
            return _train(config, out_dir, reporter, world, device, closing)
        world = World.start(config.world_size, device)
        result = _train(config, out_dir, reporter, world, device, closing)
    world.close()
    return result


@dataclasses.dataclass
class _Run:
    """What `_train`'s phases share once the model is loaded: the run's set-up and its
    evaluation history (the best checkpoint so far and every evaluation's accuracy)."""

    config: Config
    out: Path
    reporter: Reporter
    world: World
    device: str
    task: object
    codec: Codec
    policies: PolicySet
    engine: object
    eval_set: list
    env: dict
    started: float = 0.0  # time.perf_counter() when `_train` began
    best: dict | None = None
    evals: list = dataclasses.field(default_factory=list)

    def stop_asked(self) -> bool:
        return _stop_asked(self.reporter, self.world)


@dataclasses.dataclass
class _StepRollout:
    """One step's rollout as the update and the statistics need it: this rank's episodes
    and turns, every rank's episodes (light on the others), and the step's counts."""

    episodes: list[Episode]  # this rank's
    everyone: list[Episode]  # every rank's
    turns: list
    metrics: dict
    tokens: float
    rechecked: float
    disagreements: float
    behaviour: dict
    by_role: dict  # role -> (answers re-checked, disagreements): the second opinion's


def _stop_asked(reporter: Reporter, world: World) -> bool:
    """Rank 0's reporter decides (a cancel); every rank learns it."""
    return world.broadcast(reporter.should_stop(), "a stop decision", slow=True)


def _train(
    config: Config,
    out_dir: str | Path,
    reporter: Reporter | None,
    world: World,
    device: str,
    closing: contextlib.ExitStack,
) -> dict:
    # Rank 0 alone talks to the user and the database: metrics once, checkpoints once.
    reporter = (reporter or NullReporter()) if world.leader else NullReporter()
    started = time.perf_counter()
    out, start = _prepare_run(config, out_dir, world, device)
    reporter.on_status(f"Loading model {config.model}")
    # Stopped before any step, the run stays where it was: its checkpoint's step, or 0.
    where = start.step if start is not None else 0
    if _stop_asked(reporter, world):  # cancelled while queued, just as the worker took it
        return _cancelled(started, where)
    loaded = _load_model(config, reporter, world, device)
    if loaded is None or _stop_asked(reporter, world):  # loading a real model takes a while
        return _cancelled(started, where)
    run, done, own = _set_up(config, out, start, loaded, reporter, world, device, closing)
    run.started = started
    if own is None:
        _first_evaluation(run, start, done)
    reporter.on_status("")
    reporter.on_progress(done, config.steps, {})
    if own is None and run.stop_asked():  # cancelled during the first evaluation
        return _cancelled(started, done)
    # Logged with the first step this process trains (metrics are numbers: widths in bits).
    precision = {
        PARAM_DTYPE_KEY: dtype_bits(PARAM_DTYPE),
        COMPUTE_DTYPE_KEY: dtype_bits(compute_dtype(device)),
    }
    if config.micro_batch_tokens:  # packed: what -1 resolved to on this GPU, or the setting
        precision[TOKEN_BUDGET_KEY] = float(config.token_budget)
    if run.engine.recomputes_logprobs:
        precision[ENGINE_STARTUP_KEY] = run.engine.startup_seconds
    for step in range(done + 1, config.steps + 1):
        ended = _train_step(run, step, precision)
        precision = {}
        if ended is not None:
            return ended
    return {"status": "succeeded", "step": config.steps, "seconds": time.perf_counter() - started}


def _prepare_run(config: Config, out_dir: str | Path, world: World, device: str):
    """The run directory (rank 0 makes it, the others check it holds this config) and the
    checkpoint to start from, refusing what cannot work before anything is loaded."""
    if world.leader:
        prepare_out_dir(config, out_dir)
    world.wait("rank 0 preparing the run directory")
    out = prepare_out_dir(config, out_dir)  # the other ranks: check it holds this config
    start = resume_point(out, config.init_from)
    if start is not None and not is_own(start, out):
        check_branch(start, config)  # refuse a layout change before loading anything
    if device == "cuda":
        # This process's GPU from now on: the fit check, the snapshots' budget and an `auto`
        # token budget (micro_batch_tokens -1) are sized to it, not to the configured figure.
        capacity = torch.cuda.mem_get_info()[1]
        os.environ["TROUPE_GPU_MEMORY_GB"] = str(capacity / 2**30)
        if problem := fit_problem(config, capacity):
            raise ConfigError({"memory": problem})  # this worker's own GPU, before loading
    torch.manual_seed(config.seed)
    return out, start


def _load_model(config: Config, reporter: Reporter, world: World, device: str):
    """The loaded model on every rank, or None when a cancel came during the warm start.

    Rank 0 loads first: a tiny model's first use warm-starts and caches it (minutes); the
    other ranks then read the cached weights instead of each training their own."""
    loaded, cancelled = None, False
    if world.leader:
        try:
            loaded = load_model(
                config.model, device, progress=warm_start_status(reporter, config.model)
            )
        except Cancelled:
            cancelled = True
    if world.broadcast(cancelled, "rank 0 loading the model", slow=True):
        reporter.on_status("")
        return None
    if loaded is None:
        loaded = load_model(config.model, device)
    return loaded


def _set_up(config, out, start, loaded, reporter, world, device, closing):
    """The task, the policies (as the checkpoint resumed from left them), the rollout engine
    and the run's past; returns the run, the step it starts after, and its own checkpoint
    resumed from (None for a fresh run or a branch)."""
    task = load_task(config.task, config.dataset)  # one fixed problem set for every run seed
    codec = Codec(loaded.tokenizer, add_bos=loaded.family == "tiny")
    prompts = make_prompts(config, loaded.tokenizer, loaded.family)
    use_kernels(loaded.model, config.kernels)
    policies = PolicySet(loaded.model, config, policy_names(config), world)
    eval_set = held_out(task, config.eval_problems)
    env = dict(policies=policies, codec=codec, prompts=prompts, task=task)

    done, own = 0, None
    if start is not None and is_own(start, out):
        own = start.path
        done = load_checkpoint(own, policies, config.hash())
    elif start is not None:  # a branch: another run's checkpoint, this run's config
        done = load_branch(start, policies, config)
    if world.active and not policies.sharded:  # replicas start equal: same seed, checkpoint
        trainable = [p for name in policies.names for p in policies.parameters(name)]
        world.check_same("the initial weights", params_fingerprint(trainable))
    # The rollout engine starts from the policies as loaded (a checkpoint's, on resume).
    engine = make_engine(config, policies, loaded.path, reporter.on_status, log_dir=out)
    closing.callback(engine.close)
    env["engine"] = engine
    if engine.recomputes_logprobs:
        reporter.line(f"vLLM rollout engine started in {engine.startup_seconds:.1f} s")
    run = _Run(config, out, reporter, world, device, task, codec, policies, engine, eval_set, env)
    # The best checkpoint and the evaluations as the checkpoint resumed from knew them (a
    # branch starts with none: its curve and its best begin at the branch point).
    # (It prunes best checkpoints from after the one resumed from: rank 0's job.)
    known = restore_meta(out, own) if world.leader else None
    known = world.broadcast(known, "rank 0 reading the run's past", slow=True)
    run.best, run.evals = known["best"], known["evals"]
    return run, done, own


def _first_evaluation(run: _Run, start, done: int) -> None:
    """Evaluate the starting point (the base model, or a branch's checkpoint) and log it."""
    what = "the base model" if start is None else f"the checkpoint {start.path.name}"
    run.reporter.on_status(f"Evaluating {what} (step {done})")
    t0 = time.perf_counter()
    rng = torch.get_rng_state()
    probe: list = []  # the evaluation's episodes; `episodes_probe` problems' are recorded
    result = _evaluate(run.config, run.eval_set, run.env, run.world, probe)
    torch.set_rng_state(rng)  # a branch continues with the parent's RNG, as it saved it
    log_episodes(run.reporter, "eval", done, probe_sample(run.config, probe), run.codec.decode)
    run.best = _keep_best(run.out, run.best, done, result, run.policies, run.config, run.world)
    run.evals.append((done, result["accuracy"], result["accuracy_se"]))
    run.reporter.log(
        done,
        {
            **_eval_metrics(result),
            **_best_metrics(run.best),
            EVAL_SECONDS_KEY: time.perf_counter() - t0,
        },
    )


def _train_step(run: _Run, step: int, precision: dict) -> dict | None:
    """One step: roll out, update, maybe evaluate, log, maybe checkpoint; returns the run's
    result when it ends here (a cancel, an early stop), else None."""
    config, world = run.config, run.world
    t0 = time.perf_counter()
    rolled = _step_rollout(run, step)
    t1 = time.perf_counter()
    metrics = rolled.metrics
    # Rank 0 records: its sample's share of each role's gradient (trainer/grad_drill.py).
    drill = None
    if config.episodes_grad_share and world.leader:
        drill = EpisodeDrill(train_sample(config, rolled.episodes))
    metrics.update(_update(run, rolled.turns, drill))
    t2 = time.perf_counter()

    every_turn = [t for ep in rolled.everyone for t in ep.turns]
    metrics[RESP_LEN_KEY] = statistics.fmean(len(t.completion_ids) for t in every_turn)
    malformed = sum(bool(ep.malformed) for ep in rolled.everyone)
    metrics[MALFORMED_KEY] = malformed / len(rolled.everyone)
    if rolled.rechecked:  # the second opinion on rewards (trainer/rollout.py)
        metrics[VERDICT_DISAGREEMENTS_KEY] = float(rolled.disagreements)
        for role, (rechecked, disagreed) in rolled.by_role.items():
            if rechecked:
                metrics[role_key(role, VERDICT_DISAGREEMENT_RATE)] = disagreed / rechecked
    metrics[ROLLOUT_SECONDS_KEY] = t1 - t0
    metrics[UPDATE_SECONDS_KEY] = t2 - t1
    probe: list = []
    if step % config.eval_every == 0 or step == config.steps:
        metrics.update(_step_evaluation(run, step, probe))
        metrics[EVAL_SECONDS_KEY] = time.perf_counter() - t2
    # What the agents did (trainer/behaviour.py): a few metrics from every rank's episodes.
    metrics.update(from_counts(rolled.behaviour))
    _log_step_episodes(run, step, rolled.episodes, probe, drill)
    elapsed = time.perf_counter() - t0
    metrics[STEP_SECONDS_KEY] = elapsed
    metrics[TOKENS_PER_SECOND_KEY] = rolled.tokens / max(t1 - t0, 1e-9)
    metrics[PEAK_MEMORY_KEY] = _peak_memory_mb(run.device)
    metrics.update(precision)
    run.reporter.log(step, metrics)
    return _end_of_step(run, step, metrics, elapsed)


def _step_rollout(run: _Run, step: int) -> _StepRollout:
    """The step's problems rolled out on this rank, their advantages, and the step's
    statistics over every rank's episodes."""
    config, world, engine = run.config, run.world, run.engine
    problems = sample_problems(run.task, config.prompts_per_step, config.seed, step)
    problems = split_problems(problems, world)  # this rank's share, whole GRPO groups
    with run.policies.gathered():  # sharded policies: all-gathered while generating
        episodes, stats = rollout(
            problems,
            config.group_size,
            config=config,
            temperature=config.temperature,
            seed_parts=(config.seed, "train", step),
            **run.env,
        )
    metrics = compute_advantages(episodes, config)  # rewards, advantages, reward stats
    turns = [turn for ep in episodes for turn in ep.turns]
    # Another engine's log-probs are not the trainer's: recompute π_old, weigh by IS.
    gaps = (
        recompute_old_logprobs(run.policies, turns, config, run.codec.pad_id)
        if engine.recomputes_logprobs
        else {}
    )
    metrics.update(gaps)
    everyone, tokens = episodes, stats.tokens
    rechecked, disagreements = stats.verdicts_rechecked, stats.verdict_disagreements
    roles = config.roles
    by_role = [stats.rechecked_by_role.get(r, 0) for r in roles]
    by_role += [stats.disagreements_by_role.get(r, 0) for r in roles]
    # What the agents did (trainer/behaviour.py): counts over this rank's episodes.
    behaviour = behaviour_counts(episodes, run.task.extract)
    if world.active:
        # Every rank's episodes (advantages were local: groups never straddle ranks), so
        # the step's statistics are those one process would log; the behaviour metrics
        # need only every rank's counts, so no completion text travels.
        parts = world.gather((_light(episodes), behaviour), "the step's episodes", slow=True)
        everyone = [ep for mine, _ in parts for ep in mine]
        behaviour = add_counts([counts for _, counts in parts])
        metrics = compute_advantages(everyone, config)
        tokens, rechecked, disagreements, *by_role = world.sum_floats(
            [stats.tokens, rechecked, disagreements, *by_role], "the rollout's counts"
        )
    per_role = {r: (by_role[i], by_role[len(roles) + i]) for i, r in enumerate(roles)}
    return _StepRollout(
        episodes, everyone, turns, metrics, tokens, rechecked, disagreements, behaviour, per_role
    )


def _update(run: _Run, turns: list, drill: EpisodeDrill | None) -> dict:
    """Update every policy from this rank's turns (all ranks' gradients summed) and hand the
    new weights to the rollout engine; returns the update's metrics."""
    # A frozen role's turns give no gradient: its policy keeps the base weights.
    trainable = [t for t in turns if t.role not in run.config.frozen]
    with drilling(drill):
        metrics = update_policies(
            run.policies, trainable, run.config, tokenizer_pad_id=run.codec.pad_id, world=run.world
        )
    run.engine.policies_changed(list(run.policies.names))  # vllm: reload the updated weights
    if run.engine.recomputes_logprobs:
        metrics[ENGINE_SYNC_KEY] = run.engine.sync_seconds
    return metrics


def _step_evaluation(run: _Run, step: int, probe: list) -> dict:
    """Evaluate after a step, keep the best checkpoint; returns the evaluation's metrics."""
    result = _evaluate(run.config, run.eval_set, run.env, run.world, probe)
    run.best = _keep_best(run.out, run.best, step, result, run.policies, run.config, run.world)
    run.evals.append((step, result["accuracy"], result["accuracy_se"]))
    return {**_eval_metrics(result), **_best_metrics(run.best)}


def _log_step_episodes(
    run: _Run, step: int, episodes: list, probe: list, drill: EpisodeDrill | None
) -> None:
    """A sample of the step's episodes (trainer/episode_log.py), with every flagged one and
    each recorded episode's gradient shares, and the evaluation's probe sample."""
    recorded = train_sample(run.config, episodes)
    flagged = flagged_beyond(recorded, episodes)  # always shown: reward hacking suspected
    shares = None if drill is None else [*drill.shares(), *({} for _ in flagged)]
    decode = run.codec.decode
    log_episodes(run.reporter, "train", step, [*recorded, *flagged], decode, grad_shares=shares)
    log_episodes(run.reporter, "eval", step, probe_sample(run.config, probe), decode)


def _end_of_step(run: _Run, step: int, metrics: dict, elapsed: float) -> dict | None:
    """Decide whether to stop (rank 0 decides, every rank acts), checkpoint when due or
    stopping, report progress; returns the run's result when it ends here, else None."""
    config, world, reporter = run.config, run.world, run.reporter
    early = (
        cliff_stop_reason(run.evals, config.stop_after_cliff) if ACCURACY_KEY in metrics else None
    )
    stopping, early = world.broadcast(
        (reporter.should_stop(), early), "the stop decision", slow=True
    )
    if step % config.checkpoint_every == 0 or step == config.steps or stopping or early:
        _save_checkpoint(run, step)
    reporter.on_progress(
        step,
        config.steps,
        {
            "reward": metrics[REWARD_KEY],
            "accuracy": metrics.get(ACCURACY_KEY),
            "step_seconds": elapsed,
        },
    )
    if stopping:
        return {"status": "cancelled", "step": step, "seconds": time.perf_counter() - run.started}
    if early:
        reporter.line(early)
        seconds = time.perf_counter() - run.started
        return {"status": "succeeded", "step": step, "seconds": seconds, "stopped": early}
    return None


def _save_checkpoint(run: _Run, step: int) -> None:
    """Every rank writes its shards (sharded policies); rank 0 writes the one checkpoint."""
    staging = _write_shards(run.policies, run.out, "step", step, run.world)
    if run.world.leader:  # the replicas are equal (or wrote their shards): one copy
        meta = {"best": run.best, "evals": run.evals}
        path = save_checkpoint(
            run.out, step, run.policies, run.config.hash(), meta=meta, staging=staging
        )
        run.reporter.on_checkpoint(step, str(path))
    run.world.wait("rank 0 writing a checkpoint")
