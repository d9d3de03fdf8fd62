"""Benchmark: the episode view's server time for one step of 64 episodes (target ≤ 300 ms).

A run in a fresh PostgreSQL database (`troupe_bench_episode_view`, dropped at the end) records
one training step of 8 problems × 8 samples of Voting (3 voters and the aggregator: 256 turns),
once with short texts (the cpu-demo's tiny model) and once with texts the size of the paper
preset's (~1,000-token voter answers, the aggregator's prompt holding all three). Each
request goes through Django's whole stack (test client, signed in: middleware, view,
templates) and is timed from request to response; medians of `--repeats`:

- the episode view `/runs/<id>/episodes/?kind=train&step=…` (the groups and the first episode
  drawn as its workflow);
- the same with a text search (`q`, which reads every record's texts) and a role-outcome
  filter;
- the alternative: the JSON API's page of the same 64 episodes (`per_page=64`), which sends
  every text and draws nothing.

    .venv/bin/python bench/episode_view.py            # medians of 9
    .venv/bin/python bench/episode_view.py --json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable as a plain script
from bench.common import (  # noqa: E402 - after the path fix
    DEFAULT_POSTGRES,
    django_database,
    load_average,
    log,
    machine,
    timed,
)
from vocabulary.names import SHARED  # noqa: E402

DATABASE = "troupe_bench_episode_view"
WORDS = (
    "the sum of both sides gives us a value so we check each case carefully and then "
    "divide by two because the remainder must be zero hence the answer follows from it"
).split()


def prose(rng: random.Random, chars: int) -> str:
    """Text of about `chars` characters, words drawn at random (compresses like prose)."""
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words) + " \\boxed{42}"


def step_records(step: int, problems: int, samples: int, answer_chars: int) -> list[dict]:
    """One step of Voting episodes: `problems` GRPO groups of `samples`."""
    rng = random.Random(step)
    records = []
    for p in range(problems):
        question = prose(rng, min(answer_chars, 400))
        for s in range(samples):
            voters = [prose(rng, answer_chars) for _ in range(3)]
            right = [rng.random() < 0.5 for _ in range(3)]
            correct = sum(right) >= 2
            turns = [
                {
                    "role": "generator",
                    "agent": f"generator{i}",
                    "policy": SHARED,
                    "stage": 0,
                    "prompt": question,
                    "completion": text,
                    "prompt_tokens": len(question) // 4,
                    "completion_tokens": len(text) // 4,
                    "logprob_mean": -0.4,
                    "reward": float(correct),
                    "advantage": 0.5 if correct else -0.5,
                    "score": float(ok),
                    "truncated": False,
                }
                for i, (text, ok) in enumerate(zip(voters, right, strict=True))
            ]
            prompt = question + "\n\n" + "\n\n".join(voters)
            turns.append(
                {
                    "role": "aggregator",
                    "agent": "aggregator",
                    "policy": SHARED,
                    "stage": 1,
                    "prompt": prompt,
                    "completion": voters[0],
                    "prompt_tokens": len(prompt) // 4,
                    "completion_tokens": len(voters[0]) // 4,
                    "logprob_mean": -0.3,
                    "reward": float(correct),
                    "advantage": 0.5 if correct else -0.5,
                    "score": float(correct),
                    "truncated": False,
                }
            )
            records.append(
                {
                    "kind": "train",
                    "step": step,
                    "index": p * samples + s,
                    "problem_id": f"p{p}",
                    "sample": s,
                    "answer": voters[0][-200:],
                    "reward": float(correct),
                    "correct": correct,
                    "malformed": {},
                    "turns": turns,
                }
            )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timings each (≥ 3)")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="server URL (any database)")
    parser.add_argument("--smoke", action="store_true", help="8 episodes, 3 repeats (CI)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    problems, samples = (2, 4) if args.smoke else (8, 8)
    if args.smoke:
        args.repeats = 3

    sizes = {"short": 12, "paper": 4_000}  # characters of a voter's answer
    results: dict[str, dict] = {}
    with django_database(args.postgres, DATABASE):
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client

        from trainer.config import make_config
        from webapp.episodes import store
        from webapp.experiments.models import Experiment
        from webapp.runs.queueing import new_run

        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
        owner = get_user_model().objects.create_user("bench")
        experiment = Experiment.objects.create(owner=owner, name="episodes", preset="cpu-demo")
        run = new_run(experiment, make_config("cpu-demo"))
        run.save()
        client = Client()
        client.force_login(owner)
        for step, (name, chars) in enumerate(sizes.items(), start=1):
            store.write_episodes(run.id, step_records(step, problems, samples, chars))
            urls = {
                "view": f"/runs/{run.id}/episodes/?kind=train&step={step}",
                "view_search": f"/runs/{run.id}/episodes/?kind=train&step={step}"
                "&q=remainder&outcome=voters_split",
                "api_json": f"/api/v1/runs/{run.id}/episodes?kind=train&step={step}&per_page=64",
            }
            row: dict = {}
            for label, url in urls.items():
                sent = []

                def call(url=url, sent=sent) -> None:
                    response = client.get(url)
                    assert response.status_code == 200, response.content[:300]
                    sent.append(len(response.content))

                row[f"{label}_ms"] = round(statistics.median(timed(call, args.repeats)) * 1000, 1)
                row[f"{label}_bytes"] = sent[-1]
            row["ratio_view_to_api"] = round(row["view_ms"] / row["api_json_ms"], 2)
            results[name] = row
            log(f"{name}: {row}")

    summary = {
        "bench": "episode_view",
        "episodes": problems * samples,
        "turns": problems * samples * 4,
        "repeats": args.repeats,
        "smoke": args.smoke,
        **results,
        "machine": machine(),
        "load_average": load_average(),
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(f"Episode view, one step of {summary['episodes']} episodes; medians of {args.repeats}")
    for name, row in results.items():
        print(
            f"{name}: view {row['view_ms']} ms · with search {row['view_search_ms']} ms · "
            f"API JSON {row['api_json_ms']} ms ({row['ratio_view_to_api']}×)"
        )
    print(f"{summary['machine']}; load {summary['load_average']}")


if __name__ == "__main__":
    main()
