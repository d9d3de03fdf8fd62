"""GET /api/v1/runs/<id>/episodes and episodes.jsonl: stored once however often they are
written, filtered and paged, bad parameters named in a 400, odd texts served safely, and gone
with their run."""

import json

import pytest

from tests.people import bearer
from webapp.episodes import store
from webapp.episodes.models import Episode
from webapp.experiments.models import Run
from webapp.runs.run_files import delete_runs

pytestmark = pytest.mark.django_db


def record(kind="train", step=1, index=0, *, correct=False, completion="\\boxed{4}", **extra):
    return {
        "kind": kind,
        "step": step,
        "index": index,
        "problem_id": f"p{index // 2}",
        "sample": index % 2,
        "answer": completion,
        "reward": float(correct),
        "correct": correct,
        "malformed": {},
        "turns": [
            {
                "role": "solver",
                "agent": "solver",
                "policy": "shared",
                "stage": 0,
                "prompt": "What is 2+2?",
                "completion": completion,
                "prompt_tokens": 5,
                "completion_tokens": 3,
                "logprob_mean": -0.7,
                "reward": float(correct),
                "advantage": 0.5 if correct else -0.5,
                "score": float(correct),
                "truncated": False,
            }
        ],
        **extra,
    }


@pytest.fixture
def stored(run) -> Run:
    """Steps 1 and 2 with 4 training episodes each (the first 2 correct), and 2 at step 2's
    evaluation."""
    records = [record("train", s, i, correct=i < 2) for s in (1, 2) for i in range(4)]
    records += [record("eval", 2, i, correct=i == 0) for i in range(2)]
    store.write_episodes(run.id, records)
    return run


def get(client, user, run, query="", path="episodes"):
    return client.get(f"/api/v1/runs/{run.id}/{path}{query}", headers=bearer(user))


def test_a_batch_written_again_is_stored_once(stored):
    store.write_episodes(stored.id, [record("train", 1, i) for i in range(4)])
    assert Episode.objects.filter(run=stored).count() == 10
    # the first write stands: a replay never changes what was scored
    assert Episode.objects.get(run=stored, kind="train", step=1, index=0).correct


def test_a_run_keeps_at_most_its_bound(run, monkeypatch):
    monkeypatch.setattr(store, "MAX_EPISODES_PER_RUN", 3)
    store.write_episodes(run.id, [record("train", 1, i) for i in range(5)])
    store.write_episodes(run.id, [record("train", 2, i) for i in range(5)])
    assert Episode.objects.filter(run=run).count() == 3


def test_a_resumed_run_forgets_the_episodes_past_its_checkpoint(stored):
    store.delete_from(stored.id, 2)
    assert set(Episode.objects.filter(run=stored).values_list("step", flat=True)) == {1}


def test_anyone_signed_in_reads_a_page_in_step_order(client, stored, bob):
    response = get(client, bob, stored, "?per_page=3&page=2")
    body = response.json()
    assert response.status_code == 200
    assert (body["count"], body["pages"], body["page"], body["per_page"]) == (10, 4, 2, 3)
    keys = [(e["kind"], e["step"], e["index"]) for e in body["episodes"]]
    assert keys == [("train", 1, 3), ("eval", 2, 0), ("eval", 2, 1)]
    assert body["episodes"][0]["turns"][0]["advantage"] == -0.5
    assert get(client, bob, stored, "?page=9").json()["episodes"] == []


def test_an_outsider_gets_401(client, stored):
    assert client.get(f"/api/v1/runs/{stored.id}/episodes").status_code == 401


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?step=1", 4),
        ("?kind=eval", 2),
        ("?step=2&kind=train&correct=true", 2),
        ("?correct=false", 5),
        ("?problem=p1", 4),
        ("?step=7", 0),
        ("?q=BOXED", 10),
        ("?q=nothing-like-it", 0),
    ],
)
def test_filters_narrow_the_episodes(client, stored, alice, query, expected):
    assert get(client, alice, stored, query).json()["count"] == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?step=-1", "step"),
        ("?step=one", "step"),
        ("?step=" + "9" * 5000, "step"),
        ("?kind=test", "kind"),
        ("?correct=maybe", "correct"),
        ("?page=0", "page"),
        ("?per_page=1000", "per_page"),
        ("?q=" + "x" * 201, "q"),
        ("?problem=" + "p" * 201, "problem"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(client, stored, alice, query, field):
    paging = field in ("page", "per_page")  # the export has no pages
    for path in ("episodes",) if paging else ("episodes", "episodes.jsonl"):
        response = get(client, alice, stored, query, path)
        assert response.status_code == 400
        assert list(response.json()["fields"]) == [field]


def test_a_search_over_too_many_episodes_asks_to_narrow_it(client, stored, alice, monkeypatch):
    from webapp.episodes import views

    monkeypatch.setattr(views, "MAX_SCAN", 3)
    response = get(client, alice, stored, "?q=x")
    assert response.status_code == 400 and "narrow" in response.json()["fields"]["q"]
    assert get(client, alice, stored, "?q=x&step=1&kind=eval").status_code == 200


def test_a_missing_run_is_a_404(client, alice):
    assert get(client, alice, Run(id=99999)).status_code == 404


def test_the_export_streams_every_matching_episode_as_a_line(client, stored, alice):
    response = get(client, alice, stored, "?kind=train", "episodes.jsonl")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    assert "attachment" in response["Content-Disposition"]
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [(e["step"], e["index"]) for e in map(json.loads, lines)] == [
        (s, i) for s in (1, 2) for i in range(4)
    ]


def test_html_odd_characters_and_huge_completions_are_stored_and_served_safely(client, run, alice):
    odd = "<script>alert(1)</script> \udcff \x00 é"
    huge = "7" * 2_000_000
    store.write_episodes(run.id, [record(completion=odd), record(index=1, completion=huge)])
    body = get(client, alice, run).json()
    first, second = body["episodes"]
    assert first["turns"][0]["completion"] == "<script>alert(1)</script> ? \x00 é"
    assert len(second["turns"][0]["completion"]) == 2_000_000
    row = Episode.objects.get(run=run, index=1)
    assert len(bytes(row.data)) < 20_000  # compressed
    lines = b"".join(get(client, alice, run, path="episodes.jsonl").streaming_content)
    assert [json.loads(line)["index"] for line in lines.decode("utf-8").splitlines()] == [0, 1]


def test_non_finite_numbers_are_stored_as_null(run, client, alice):
    store.write_episodes(run.id, [record(reward_extra=float("nan"))])
    assert get(client, alice, run).json()["episodes"][0]["reward_extra"] is None


def test_deleting_a_run_deletes_its_episodes(stored):
    delete_runs(Run.objects.filter(id=stored.id))
    assert not Episode.objects.filter(run_id=stored.id).exists()
