"""Benchmark: does the `cpu-demo` preset learn, on held-out problems, well above noise?

Runs `python -m trainer run --preset cpu-demo` for each workflow × seed (one torch thread a
run, `--parallel` runs at once), then reads every run's metrics.jsonl and prints, per
workflow and evaluation step:

- `eval/accuracy` of each seed, their mean and the 95% Student-t interval over seeds
  (`analysis.intervals.mean_ci`);
- the 95% noise band of one evaluation with the problem as the unit: ±1.96 × the standard
  error of the mean of the per-problem accuracies (`eval/accuracy_se`, logged by the run). The
  binomial band over all k·n episodes (printed beside it) understates the noise when each
  problem is sampled k > 1 times: one problem's samples are correlated;
- per run: train/reward in the first and last quarter of steps, base → final accuracy (mean
  of the last 3 evaluations), the terminal-cliff verdict of `analysis`, and the gain
  final − base judged on the same problems: the 95% percentile bootstrap over problems of
  the per-problem gains (read from the run's eval_problems.jsonl). A run "learns" when that
  interval lies above 0, i.e. the gain exceeds its paired noise band.

    .venv/bin/python bench/demo_learning.py                              # single + eval_opt
    .venv/bin/python bench/demo_learning.py --workflows voting --seeds 0,1
    .venv/bin/python bench/demo_learning.py --workflows single --set lr=1e-2 \\
        --set schedule=constant --set steps=40                           # the cliff setting
    .venv/bin/python bench/demo_learning.py --smoke --json               # 1 run, 2 steps

Extra `--set field=value` pairs are passed as `--field value` to every run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable as a plain script

from analysis.cliffs import summarize_accuracy  # noqa: E402
from analysis.intervals import Estimate, mean_ci  # noqa: E402
from analysis.stats import SUMMARY_FIELDS, bootstrap_mean_ci  # noqa: E402
from trainer.evaluate import read_per_problem  # noqa: E402
from vocabulary.names import ACCURACY_KEY, ACCURACY_SE_KEY, REWARD_KEY  # noqa: E402

# A step's mean across seeds, as the summary JSON has always written it.
MEAN_CI_FIELDS = ("n", "mean", "low", "high", "half_width")


def run_one(out: Path, workflow: str, seed: int, extra: list[str], threads: int) -> dict:
    """One training run in a subprocess; returns its wall time and exit status."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [
        sys.executable,
        "-m",
        "trainer",
        "run",
        "--preset",
        "cpu-demo",
        "--workflow",
        workflow,
        "--seed",
        str(seed),
        "--out",
        str(out),
        *extra,
    ]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
    return {"rc": proc.returncode, "seconds": time.perf_counter() - started}


def read_metrics(out: Path) -> list[dict]:
    rows = []
    with open(out / "metrics.jsonl") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def series(rows: list[dict], key: str) -> dict[int, float]:
    """{step: value} of one metric; metrics.jsonl holds one {"step", "key", "value"} a line
    (the last value logged at a step wins)."""
    return {int(r["step"]): float(r["value"]) for r in rows if r["key"] == key}


def binomial_band(p: float, n: int) -> float:
    return 1.96 * math.sqrt(max(p * (1 - p), 0.0) / n)


def paired_gain(problems: dict[int, list[float]], steps: list[int], last: int = 3) -> Estimate:
    """final − base on the same problems (final: the mean of the last `last` evaluations),
    with the 95% bootstrap interval over problems of the per-problem gains."""
    base = problems[steps[0]]
    tail = [problems[s] for s in steps[-last:]]
    gains = [statistics.fmean(col) - b for b, col in zip(base, zip(*tail))]
    return bootstrap_mean_ci(gains)


def report(label: str, runs: dict[int, Path], eval_problems: int, eval_samples: int) -> dict:
    """Print the per-step table of one workflow over its seeds; return a JSON summary."""
    per_seed = {seed: read_metrics(out) for seed, out in runs.items()}
    acc = {seed: series(rows, ACCURACY_KEY) for seed, rows in per_seed.items()}
    se = {seed: series(rows, ACCURACY_SE_KEY) for seed, rows in per_seed.items()}
    steps = sorted(set.intersection(*(set(a) for a in acc.values())))
    print(
        f"\n## {label}: eval/accuracy on {eval_problems} held-out problems × "
        f"{eval_samples} sample(s)"
    )
    print(
        "| step | "
        + " | ".join(f"seed {s}" for s in runs)
        + " | mean [95% CI over seeds] | band (problem as unit) |"
    )
    print("|---|" + "---|" * len(runs) + "---|---|")
    table = []
    for step in steps:
        values = [acc[s][step] for s in runs]
        ci = mean_ci(values)
        low, high = ci.low, ci.high
        interval = f"[{low:.3f}, {high:.3f}]" if low is not None else "[-]"
        cells = " | ".join(f"{v:.3f}" for v in values)
        band = 1.96 * statistics.fmean(se[s].get(step, math.nan) for s in runs)
        print(f"| {step} | {cells} | {ci.mean:.3f} {interval} | ±{band:.3f} |")
        table.append({"step": step, "values": values, "band": band, **ci.fields(MEAN_CI_FIELDS)})
    base = statistics.fmean(acc[s][steps[0]] for s in runs)
    band = table[0]["band"]
    naive = binomial_band(base, eval_problems * eval_samples)
    print(
        f"base {base:.3f}; 95% noise band of one evaluation, problem as the unit: ±{band:.3f} "
        f"(binomial over {eval_problems * eval_samples} episodes: ±{naive:.3f})"
    )
    summary_rows = []
    for seed, rows in per_seed.items():
        reward = series(rows, REWARD_KEY)
        order = sorted(reward)
        quarter = max(1, len(order) // 4)
        first = statistics.fmean(reward[s] for s in order[:quarter])
        last = statistics.fmean(reward[s] for s in order[-quarter:])
        a = acc[seed]
        summary = summarize_accuracy(sorted(a), [a[s] for s in sorted(a)])
        gain = paired_gain(read_per_problem(runs[seed]), sorted(a))
        learns = gain.low is not None and gain.low > 0
        print(
            f"  seed {seed}: train/reward {first:.3f} → {last:.3f} (first → last quarter); "
            f"{ACCURACY_KEY} base {summary['base']:.3f} → peak {summary['peak']:.3f} "
            f"(step {summary['peak_step']}) → final {summary['final']:.3f}; "
            f"gain {gain.mean:+.3f} [{gain.low:+.3f}, {gain.high:+.3f}] "
            f"(paired, bootstrap over problems): {'learns' if learns else 'no clear gain'}; "
            f"cliff: {summary['cliff_status']}"
            + (f" (onset {summary['cliff_onset']})" if summary["cliff"] else "")
        )
        summary_rows.append(
            {
                "seed": seed,
                "reward_first": first,
                "reward_last": last,
                "paired_gain": gain.fields(SUMMARY_FIELDS),
                "learns": learns,
                **summary,
            }
        )
    return {"label": label, "band": band, "table": table, "runs": summary_rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", default="single,eval_opt")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--parallel", type=int, default=2, help="runs at once")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--out", help="keep the run directories here (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="end with the summary as one JSON line")
    parser.add_argument("--smoke", action="store_true", help="one run of 2 steps")
    args = parser.parse_args()

    extra: list[str] = []
    for pair in args.set:
        if "=" not in pair:
            parser.error(f"--set {pair!r} should look like field=value")
        name, value = pair.split("=", 1)
        extra += [f"--{name.strip().replace('_', '-')}", value.strip()]
    workflows = [w for w in args.workflows.split(",") if w]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    if args.smoke:
        workflows, seeds = workflows[:1], seeds[:1]
        extra += ["--steps", "2", "--eval-every", "1", "--eval-problems", "16"]

    from trainer.config import make_config

    values = {extra[i][2:].replace("-", "_"): extra[i + 1] for i in range(0, len(extra), 2)}
    config = make_config("cpu-demo", **values)

    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="demo_learning_"))
    jobs = [(w, s, root / f"{w}-seed{s}") for w in workflows for s in seeds]
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"{len(jobs)} runs, {args.parallel} at a time, {args.threads} torch thread(s) each; "
        f"flags: {' '.join(extra) or '(preset)'}"
    )
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        results = list(
            pool.map(lambda job: run_one(job[2], job[0], job[1], extra, args.threads), jobs)
        )
    failed = [job for job, r in zip(jobs, results) if r["rc"] != 0]
    if failed:
        print(f"failed runs: {[f'{w} seed {s}' for w, s, _ in failed]}")
        return 1
    wall = [r["seconds"] for r in results]
    print(
        f"all runs: {time.perf_counter() - started:.0f} s; "
        f"a run: median {statistics.median(wall):.0f} s"
        f" (min {min(wall):.0f}, max {max(wall):.0f}); run directories under {root}"
    )
    summaries = [
        report(
            w,
            {s: out for ww, s, out in jobs if ww == w},
            config.eval_problems,
            config.eval_samples,
        )
        for w in workflows
    ]
    if args.json:
        print(json.dumps(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
