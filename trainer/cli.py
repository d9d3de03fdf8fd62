"""`python -m trainer run|eval|analyze`: the trainer without a database, broker or web server.

Every config field is a flag (`--max-new-tokens 24`), validated by `trainer.config` like the
form and the API; a bad value prints one line naming the field and exits 2.

`run --world-size N` (N > 1) starts itself again under torchrun, one process per GPU
(`python -m torch.distributed.run --standalone --nproc-per-node N -m trainer run …`); rank 0
alone writes metrics.jsonl, shows the progress bar and prints the result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from trainer.config import FIELDS, PRESETS, ConfigError, field_help, make_config
from trainer.reporting import NullReporter
from vocabulary.names import ACCURACY_KEY


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=sorted(PRESETS), help="start from a preset")
    for row in field_help():
        flag = "--" + row["name"].replace("_", "-")
        allowed = f" ({'/'.join(row['choices'])})" if row.get("choices") else ""
        parser.add_argument(
            flag,
            dest=row["name"],
            default=None,
            metavar=row["type"].upper().split()[0],
            # argparse %-formats help text: a literal % in a field's help must be doubled.
            help=f"{row['help']}{allowed}; default {row['default']!r}".replace("%", "%%"),
        )


def _config(args: argparse.Namespace):
    values = {name: getattr(args, name) for name in FIELDS if getattr(args, name) is not None}
    return make_config(args.preset, **values)


class ProgressReporter(NullReporter):
    """metrics.jsonl and episodes.jsonl, plus a progress bar with step, reward, accuracy and
    ETA."""

    def __init__(self, out: Path, total: int):
        from tqdm import tqdm

        from trainer.reporting import JsonlReporter

        self.jsonl = JsonlReporter(out / "metrics.jsonl")
        self.bar = tqdm(total=total, unit="step", file=sys.stderr, dynamic_ncols=True)
        self.accuracy = None

    def log(self, step, metrics):
        self.jsonl.log(step, metrics)
        if ACCURACY_KEY in metrics:
            self.accuracy = metrics[ACCURACY_KEY]

    def log_episodes(self, step, records):
        self.jsonl.log_episodes(step, records)

    def on_progress(self, step, total, info):
        self.bar.n = step
        post = {}
        if info.get("reward") is not None:
            post["reward"] = f"{info['reward']:.3f}"
        if self.accuracy is not None:
            post["acc"] = f"{self.accuracy:.3f}"
        self.bar.set_postfix(post, refresh=False)
        self.bar.refresh()


def torchrun_command(ranks: int, argv: list[str]) -> list[str]:
    """The command that runs `python -m trainer <argv>` as `ranks` processes on this node."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a rendezvous on this node, on a free port
        f"--nproc-per-node={ranks}",
        "-m",
        "trainer",
        *argv,
    ]


def cmd_run(args: argparse.Namespace) -> int:
    from trainer.checkpoint_index import first_logged_step
    from trainer.distributed import launched_ranks
    from trainer.train import train

    config = _config(args)
    if config.world_size > 1 and launched_ranks() == 1:
        import subprocess

        # torchrun owns the ranks: a rank that fails takes the others down with it.
        return subprocess.call(torchrun_command(config.world_size, args.argv))
    out = Path(args.out)
    if int(os.environ.get("RANK", "0")) != 0:
        train(config, out, NullReporter())
        return 0
    reporter = ProgressReporter(out, config.steps)
    # Points from the step the run logs first on will be logged again: drop them.
    reporter.jsonl.truncate_after(first_logged_step(out, config.init_from) - 1)
    result = train(config, out, reporter)
    reporter.bar.close()
    print(json.dumps({**result, "out": str(out)}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    import torch

    from trainer.evaluate import evaluate, held_out
    from trainer.models import load_model, resolve_device
    from trainer.rollout import Codec, FrozenPolicies, make_prompts
    from trainer.tasks import load_task

    checkpoint = None
    if args.out:
        # A run directory: its own config (flags would not match its checkpoints' hash).
        given = [n for n in ("preset", *FIELDS) if getattr(args, n) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise ValueError(f"{flag}: with --out the config is the run's own config.json")
        from trainer.config import config_from_dict

        config = config_from_dict(json.loads((Path(args.out) / "config.json").read_text()))
    else:
        config = _config(args)
    if args.role_checkpoint:
        from trainer.mixed_eval import mixed_evaluate
        from trainer.role_sources import parse_role_checkpoints, resolve_sources

        specs = parse_role_checkpoints(args.role_checkpoint, config.roles)
        # roles not named take --checkpoint's weights (the base model without it)
        # The operator's own command line: a checkpoint directory's path is a source too.
        sources = resolve_sources(
            specs, config, args.out, default=args.checkpoint or "base", paths=True
        )
        print(json.dumps(mixed_evaluate(config, sources, args.problems)))
        return 0
    if args.checkpoint:
        from trainer.checkpoint import resolve_checkpoint

        checkpoint = resolve_checkpoint(args.out, args.checkpoint)
    torch.manual_seed(config.seed)
    loaded = load_model(config.model, resolve_device(config.device))
    task = load_task(config.task, config.dataset)  # one fixed problem set for every run seed
    if checkpoint is not None:
        from trainer.checkpoint import load_checkpoint
        from trainer.policies import PolicySet
        from trainer.routing import policy_names

        policies = PolicySet(loaded.model, config, policy_names(config))
        step = load_checkpoint(checkpoint, policies, config.hash())
    else:
        policies = FrozenPolicies(loaded.model)
    result = evaluate(
        config,
        policies=policies,
        codec=Codec(loaded.tokenizer, add_bos=loaded.family == "tiny"),
        prompts=make_prompts(config, loaded.tokenizer, loaded.family),
        task=task,
        problems=held_out(task, args.problems or config.eval_problems),
    )
    if checkpoint is not None:
        result = {**result, "checkpoint": str(checkpoint), "checkpoint_step": step}
    print(json.dumps(result))
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from trainer.run_report import analyze_dirs, format_report

    results = analyze_dirs(args.dirs)
    print(format_report(results, as_json=args.json))
    return 1 if any("error" in r for r in results) else 0


def cmd_build_model(args: argparse.Namespace) -> int:
    from trainer.tiny_weights import ship, tiny_model_path

    for name in args.names:
        path = tiny_model_path(name, rebuild=args.rebuild or args.ship)
        print(ship(name, path) if args.ship else path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train a run (resumes when --out holds one)")
    _add_config_flags(run)
    run.add_argument("--out", required=True, help="run directory: config, metrics, checkpoints")
    run.set_defaults(func=cmd_run)
    ev = sub.add_parser(
        "eval", help="evaluate base (or --checkpoint) policies on held-out problems"
    )
    _add_config_flags(ev)
    ev.add_argument("--problems", type=int, help="held-out problems (default eval_problems)")
    ev.add_argument(
        "--checkpoint",
        help="best, latest, step-N or best-N (of the run in --out), or a checkpoint "
        "directory (runs/x/checkpoints/step-000030)",
    )
    ev.add_argument(
        "--role-checkpoint",
        action="append",
        default=[],
        metavar="ROLE=SOURCE",
        help="mix and match: take ROLE's weights from SOURCE (base, best, latest, step-N, "
        "best-N, or another run's checkpoint directory with the same model); repeat per role; "
        "roles not "
        "named take --checkpoint (default: base)",
    )
    ev.add_argument("--out", help="a run directory: evaluate with its config.json")
    ev.set_defaults(func=cmd_eval)
    an = sub.add_parser("analyze", help="peaks, cliffs and gradient amplification of run dirs")
    an.add_argument(
        "dirs", nargs="+", metavar="DIR", help="run directories (config.json + metrics.jsonl)"
    )
    an.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    an.set_defaults(func=cmd_analyze)
    bm = sub.add_parser(
        "build-model",
        help="print where built-in tiny models are: shipped, else warm-started now and cached",
    )
    bm.add_argument("names", nargs="+", choices=["tiny-s", "tiny-m", "tiny-l"])
    bm.add_argument(
        "--rebuild", action="store_true", help="warm-start again even if shipped or cached"
    )
    bm.add_argument(
        "--ship",
        action="store_true",
        help="rebuild and replace the weights shipped in trainer/weights/ (for a changed recipe)",
    )
    bm.set_defaults(func=cmd_build_model)
    return parser


def interrupted_message(args: argparse.Namespace) -> str:
    """What running the same command again will do: resume only where a checkpoint is kept
    (every --checkpoint-every steps); before the first one, it starts over."""
    out = getattr(args, "out", None)
    if getattr(args, "func", None) is not cmd_run or not out:
        return "interrupted"
    from trainer.checkpoint_index import is_own, resume_point

    init_from = getattr(args, "init_from", None) or ""
    start = resume_point(out, init_from)
    if start is not None and is_own(start, Path(out)):
        return f"interrupted; run the same command again to resume from step {start.step}"
    where = f"the branch point (step {start.step})" if start is not None else "step 0"
    return (
        "interrupted before the first checkpoint (--checkpoint-every); "
        f"running the same command again starts over from {where}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for a relaunch under torchrun
    try:
        return args.func(args)
    except ConfigError as exc:
        for name, message in exc.errors.items():
            where = f"--{name.replace('_', '-')}" if name in FIELDS else name
            print(f"error: {where}: {message}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(interrupted_message(args), file=sys.stderr)
        return 130
    except Exception as exc:  # ModelUnavailable and friends: one line, not a traceback
        if type(exc).__name__ == "ModelUnavailable":
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise
