"""`manage.py import_runs` reads verl's rollout dumps (`trainer.rollout_data_dir`: one
`<step>.jsonl` a step, a JSON object a sample with `input`, `output`, `score`, `step` and the
reward function's extra columns, as `RayPPOTrainer._dump_generations` writes them) into
episodes: one `solver` turn each, grouped by prompt; a bad line is an error naming it."""

import json

import pytest
from django.core.management import CommandError

from tests.webapp.test_import_runs import run_import, write_verl_jsonl
from webapp.episodes.codec import unpack
from webapp.episodes.models import Episode
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db

PROMPTS = ["user: What is 2+2? assistant:", "user: What is 3*3? assistant:"]


def write_dump(directory, steps=(1, 2)) -> None:
    """Two prompts × two samples a step; the first sample of each prompt right."""
    directory.mkdir(parents=True, exist_ok=True)
    for step in steps:
        lines = []
        for prompt, right in zip(PROMPTS, ("4", "9"), strict=True):
            for sample in range(2):
                answer = right if sample == 0 else "5"
                lines.append(
                    {
                        "input": prompt,
                        "output": f"<think>…</think> The answer is \\boxed{{{answer}}}",
                        "gts": right,
                        "score": 1.0 if sample == 0 else 0.0,
                        "step": step,
                        "acc": sample == 0,
                        "pred": answer,
                    }
                )
        text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n"
        (directory / f"{step}.jsonl").write_text(text)


def records(run, kind="train"):
    rows = Episode.objects.filter(run=run, kind=kind).order_by("step", "index")
    return [unpack(row.data) for row in rows]


def test_a_rollout_directory_becomes_a_run_of_episodes(client, alice, tmp_path):
    write_dump(tmp_path / "rollouts")

    output = run_import(tmp_path / "rollouts", "--owner", "alice", "--experiment", "verl")

    run = Run.objects.get(experiment__name="verl")
    assert run.name == "rollouts" and "8 episodes" in output
    eps = records(run)
    assert [(e["step"], e["index"], e["sample"]) for e in eps] == [
        (s, i, i % 2) for s in (1, 2) for i in range(4)
    ]
    first = eps[0]
    assert first["problem_id"] == eps[1]["problem_id"] != eps[2]["problem_id"]
    assert first["problem_id"] == eps[4]["problem_id"]  # the same prompt at the next step
    assert (first["reward"], first["correct"], first["answer"]) == (1.0, True, "4")
    assert (eps[1]["reward"], eps[1]["correct"]) == (0.0, False)
    (turn,) = first["turns"]
    assert (turn["role"], turn["prompt"], turn["reward"]) == ("solver", PROMPTS[0], 1.0)
    assert turn["completion"].endswith("\\boxed{4}") and turn["advantage"] is None
    assert first["extra"] == {"gts": "4", "acc": True}
    # The run page and the API show them (no token counts or advantages: verl dumps none).
    client.force_login(alice)
    assert client.get(f"/runs/{run.id}/").status_code == 200
    listed = client.get(f"/api/v1/runs/{run.id}/episodes?step=2").json()
    assert listed["count"] == 4


def test_rollouts_attach_to_the_run_of_verls_metrics_and_replace_on_import_again(alice, tmp_path):
    write_verl_jsonl(tmp_path / "metrics.jsonl", steps=3)
    write_dump(tmp_path / "validation", steps=(3,))
    args = ["--owner", "alice", "--experiment", "both", "--rollouts", tmp_path / "validation"]

    run_import(tmp_path / "metrics.jsonl", *args, "--rollout-kind", "eval")
    run_import(tmp_path / "metrics.jsonl", *args, "--rollout-kind", "eval")

    run = Run.objects.get(experiment__name="both")
    assert run.name == "metrics" and Episode.objects.filter(run=run).count() == 4
    assert {e["kind"] for e in records(run, "eval")} == {"eval"}
    # A score-less line is kept (verl's score is the reward: None), correct from `acc`.
    (tmp_path / "validation" / "3.jsonl").write_text(
        json.dumps({"input": "q", "output": "a", "step": 3, "acc": 1}) + "\n"
    )
    run_import(tmp_path / "metrics.jsonl", *args)
    (only,) = records(run)
    assert (only["reward"], only["correct"]) == (None, True)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"2\.jsonl:2: not JSON"),
        ('["input", "output"]', r"2\.jsonl:2: expected a JSON object, not list"),
        ('{"input": "q", "output": 3, "step": 2}', r"2\.jsonl:2: .*needs 'output' text"),
        ('{"input": "q", "output": "a", "score": "high"}', r"2\.jsonl:2: 'score' must be a"),
        ('{"input": "q", "output": "a", "score": NaN}', r"2\.jsonl:2: 'score' must be a finite"),
        ('{"input": "q", "output": "a", "step": -1}', r"2\.jsonl:2: 'step' must be a whole"),
    ],
)
def test_a_bad_line_is_named_and_nothing_of_the_run_is_imported(alice, tmp_path, line, message):
    directory = tmp_path / "rollouts"
    directory.mkdir()
    good = json.dumps({"input": "q", "output": "a", "score": 1.0, "step": 2})
    (directory / "2.jsonl").write_text(good + "\n" + line + "\n")
    with pytest.raises(CommandError, match=message):
        run_import(directory, "--owner", "alice", "--experiment", "bad")
    assert not Run.objects.filter(experiment__name="bad").exists()


def test_rollouts_need_one_run_to_attach_to(alice, tmp_path):
    write_dump(tmp_path / "r")
    write_verl_jsonl(tmp_path / "a.jsonl", steps=2)
    write_verl_jsonl(tmp_path / "b.jsonl", steps=2)
    with pytest.raises(CommandError, match="--rollouts attaches to one run"):
        run_import(
            tmp_path / "a.jsonl",
            tmp_path / "b.jsonl",
            "--owner",
            "alice",
            "--experiment",
            "x",
            "--rollouts",
            tmp_path / "r",
        )
    with pytest.raises(CommandError, match="--rollouts: .*nowhere does not exist"):
        run_import(
            tmp_path / "a.jsonl",
            "--owner",
            "alice",
            "--experiment",
            "x",
            "--rollouts",
            tmp_path / "nowhere",
        )
