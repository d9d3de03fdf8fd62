"""Benchmark: the live radar (`analysis.radar.radar`) on a run of 1,000 steps with ~40 keys.

The radar is meant to run after every logged step, on all the points so far, so what counts
is one call on a long run. The synthetic run (seeded) logs `eval/accuracy` every 10 steps
(100 evaluations, a cliff at step 600) and 39 other keys every step: 4 roles × (grad_norm,
grad_share, entropy, kl, tokens, resp_len, opt_steps) and 11 train/ and sys/ keys, with an
amplification, a capture, an entropy collapse and a zero-std stretch in them. It times, in
one process, `--repeats` calls of:

- `radar` on the whole run (running, with total_steps): the last step's call, the worst case;
- `radar` at every 10th step of the run (all prefixes, as a live run would call it), per call;
- `summarize_run` on the whole run: the §6 summary the pages already compute, for scale;
- the radar's cliff scan (`prefix_cliff_statuses`, which is itself
  `summarize_accuracy` on each of the 100 prefixes, one rule) against that naive scan.

    .venv/bin/python bench/radar.py                  # 1,000 steps, 7 repeats
    .venv/bin/python bench/radar.py --smoke --json   # 200 steps, 2 repeats
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable as a plain script

from analysis.cliffs import summarize_accuracy  # noqa: E402
from analysis.radar import prefix_cliff_statuses, radar  # noqa: E402
from analysis.runs import summarize_run  # noqa: E402
from vocabulary.names import (  # noqa: E402
    ACCURACY_KEY,
    CLIP_FRAC_KEY,
    ENTROPY,
    ENTROPY_KEY,
    GRAD_NORM,
    GRAD_SHARE,
    KL,
    KL_KEY,
    LOSS_KEY,
    OPT_STEPS,
    PEAK_MEMORY_KEY,
    RESP_LEN,
    RESP_LEN_KEY,
    REWARD_KEY,
    REWARD_STD_KEY,
    STEP_SECONDS_KEY,
    TOKENS,
    TOKENS_PER_SECOND_KEY,
    ZERO_STD_KEY,
    role_key,
)

ROLES = ("orchestrator", "worker", "synthesizer", "critic")


def synthetic_run(steps: int, seed: int = 0) -> dict[str, tuple[list, list]]:
    rng = np.random.default_rng(seed)
    s = np.arange(steps)
    noise = lambda scale=0.02: scale * rng.standard_normal(steps)  # noqa: E731
    series: dict[str, tuple[list, list]] = {}
    acc_steps = s[::10]
    acc = np.where(acc_steps < 0.6 * steps, 0.2 + 0.5 * acc_steps / (0.6 * steps), 0.15)
    series[ACCURACY_KEY] = (acc_steps.tolist(), (acc + 0.01 * rng.random(len(acc))).tolist())
    for i, role in enumerate(ROLES):
        rise = 0.5 * steps if i == 0 else steps  # only the first role amplifies
        series[role_key(role, GRAD_NORM)] = (s.tolist(), (1 + (s > rise) * 3 + noise()).tolist())
        share = np.where(s > 0.3 * steps, 0.8 if i == 0 else 0.2 / 3, 0.25)
        series[role_key(role, GRAD_SHARE)] = (s.tolist(), share.tolist())
        ent = np.where((s > 0.7 * steps) & (i == 0), 0.3, 2.0) + noise()
        series[role_key(role, ENTROPY)] = (s.tolist(), ent.tolist())
        for metric in (KL, TOKENS, RESP_LEN, OPT_STEPS):
            series[role_key(role, metric)] = (s.tolist(), (1 + noise()).tolist())
    zero_std = np.where(s > 0.8 * steps, 0.9, 0.1)
    series[ZERO_STD_KEY] = (s.tolist(), zero_std.tolist())
    for key in (
        REWARD_KEY,
        REWARD_STD_KEY,
        RESP_LEN_KEY,
        KL_KEY,
        ENTROPY_KEY,
        CLIP_FRAC_KEY,
        LOSS_KEY,
    ):
        series[key] = (s.tolist(), noise(1).tolist())
    for key in (STEP_SECONDS_KEY, TOKENS_PER_SECOND_KEY, PEAK_MEMORY_KEY):
        series[key] = (s.tolist(), (1 + noise()).tolist())
    return series


def truncate(series: dict, last: int) -> dict:
    out = {}
    for key, (steps, values) in series.items():
        k = int(np.searchsorted(steps, last, side="right"))
        out[key] = (steps[:k], values[:k])
    return out


def timed(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="200 steps, 2 repeats")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.repeats = 200, 2
    series = synthetic_run(args.steps)
    n_points = sum(len(s) for s, _ in series.values())
    out = radar(series, total_steps=args.steps)
    acc_steps, acc = series[ACCURACY_KEY]
    prefixes = [truncate(series, t) for t in range(0, args.steps, 10)]

    def naive_cliff_scan():
        for j in range(len(acc)):
            summarize_accuracy(acc_steps[: j + 1], acc[: j + 1], running=True)

    def every_prefix():
        for p in prefixes:
            radar(p, total_steps=args.steps)

    result = {
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
        "steps": args.steps,
        "keys": len(series),
        "points": n_points,
        "events": len(out["events"]),
        "radar_ms": 1e3 * timed(lambda: radar(series, total_steps=args.steps), args.repeats),
        "radar_per_prefix_ms": 1e3 * timed(every_prefix, max(1, args.repeats // 3)) / len(prefixes),
        "summarize_run_ms": 1e3 * timed(lambda: summarize_run(series), args.repeats),
        "prefix_scan_ms": 1e3 * timed(lambda: prefix_cliff_statuses(acc_steps, acc), args.repeats),
        "naive_cliff_scan_ms": 1e3 * timed(naive_cliff_scan, args.repeats),
        "repeats": args.repeats,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['keys']} keys, {result['points']} points, {result['events']} events")
    names = ("radar_ms", "radar_per_prefix_ms", "summarize_run_ms", "prefix_scan_ms")
    for name in (*names, "naive_cliff_scan_ms"):
        print(f"{name:>22}: {result[name]:8.2f} ms")


if __name__ == "__main__":
    main()
