"""Benchmark: what recording episodes costs a cpu-demo run, in time and in storage.

Trains a cpu-demo config for a few steps with a reporter that keeps the records, then
reports (as JSON) the time spent building the records and the behaviour metrics as a share
of a training step, the compressed size (as stored: `webapp/episodes/codec.py`) per episode
and per turn, for every episode of the steps (not only the recorded sample), and the
projection for the paper preset from the measured bytes per character of text.

    python bench/episodes.py --workflow voting --steps 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

import trainer.train as train_module
from bench.common import timed_steps_config, train_steps
from vocabulary.names import STEP_SECONDS_KEY
from webapp.episodes.codec import pack

ROOT = Path(__file__).resolve().parents[1]


def _time_recording() -> dict[str, float]:
    """Wrap the training loop's episode recording and behaviour counting in timers; returns
    the seconds each has spent, filled in as the steps run."""
    spent = {"record": 0.0, "behaviour": 0.0}

    def timed(name, function):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return function(*a, **kw)
            finally:
                spent[name] += time.perf_counter() - t0

        return wrapper

    # Only the training steps' calls are timed: the step-0 evaluation's are not in a step.
    log_episodes = train_module.log_episodes
    train_module.log_episodes = lambda reporter, kind, *a, **kw: (
        timed("record", log_episodes)(reporter, kind, *a, **kw) if kind == "train" else 0
    )
    train_module.behaviour_counts = timed("behaviour", train_module.behaviour_counts)
    train_module.from_counts = timed("behaviour", train_module.from_counts)
    return spent


def _prose_ratio() -> float:
    """zlib's compression ratio on long answers. The cpu-demo's texts are a few dozen
    characters: too short to say how a model's long answers compress. Stand-in for those:
    English technical prose with formulas (this repository's design document), compressed
    in 4,000-character pieces."""
    prose = (ROOT / "docs" / "design.md").read_text()
    pieces = [prose[i : i + 4000] for i in range(0, len(prose) - 4000, 4000)]
    return sum(map(len, pieces)) / sum(len(zlib.compress(p.encode(), 6)) for p in pieces)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="voting")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one step of 2 problems (CI)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args()
    if args.smoke:
        args.steps = 1
    config = timed_steps_config(
        args.workflow,
        args.steps,
        args.smoke,
        episodes_per_step=16,  # every episode of a step: sizes over all of them
    )
    spent = _time_recording()
    reporter = train_steps(config)
    _, step_seconds = reporter.series(STEP_SECONDS_KEY)
    records = [r for r in reporter.episodes if r["kind"] == "train"]
    sizes = [len(pack(r)) for r in records]
    turns = sum(len(r["turns"]) for r in records)
    # Fixed cost of a turn (roles, counts, numbers): the records with their texts emptied.
    bare = [
        {**r, "answer": "", "turns": [{**t, "prompt": "", "completion": ""} for t in r["turns"]]}
        for r in records
    ]
    overhead_per_turn = sum(len(pack(r)) for r in bare) / turns
    ratio = _prose_ratio()
    # Paper preset, voting (3 voters + aggregator): a voter's prompt ~600 characters and
    # completion ~4,000 (about 1,000 tokens at ~4 characters a token); the aggregator's prompt
    # holds the 3 candidates (~12,600), its completion ~2,000. Counted as if nothing repeated,
    # though zlib finds the candidates again in the aggregator's prompt: an upper bound.
    paper_chars = 3 * (600 + 4000) + (12_600 + 2000)
    paper_episode = 4 * overhead_per_turn + paper_chars / ratio
    paper_episodes = 500 * 2 * 8 + 51 * 4 * 1  # steps × problems × group + evals × probe
    print(
        json.dumps(
            {
                "workflow": args.workflow,
                "steps": args.steps,
                "episodes": len(records),
                "mean_step_seconds": statistics.fmean(step_seconds),
                "record_seconds_per_step": spent["record"] / args.steps,
                "behaviour_seconds_per_step": spent["behaviour"] / args.steps,
                "record_share_of_step": (spent["record"] + spent["behaviour"]) / sum(step_seconds),
                "bytes_per_episode": statistics.fmean(sizes),
                "bytes_per_turn": sum(sizes) / turns,
                "overhead_bytes_per_turn": overhead_per_turn,
                "prose_compression_ratio": ratio,
                "paper_voting_bytes_per_episode_projected": paper_episode,
                "paper_voting_bytes_per_turn_projected": paper_episode / 4,
                "paper_episodes_per_run": paper_episodes,
                "paper_mb_per_run_projected": paper_episodes * paper_episode / 1e6,
                "python": platform.python_version(),
                "smoke": args.smoke,
            },
            indent=None if args.json else 2,
        )
    )


if __name__ == "__main__":
    main()
