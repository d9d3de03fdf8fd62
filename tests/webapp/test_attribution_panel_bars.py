"""The run page's attribution chart: a bar per role and one for the change, the interaction in
words beside them (exact Shapley values already add up to the change); a mix-and-match
source named as the user chose it, with its step, not as a path on the server."""

from types import SimpleNamespace

from webapp.attribution.panel import bars, combinations, source_text


def _interval(v):
    return {"value": v, "low": v - 0.05, "high": v + 0.05}


def test_the_bars_are_the_roles_and_the_change_and_the_interaction_is_no_bar():
    result = {
        "method": "shapley",
        "roles": ["generator", "aggregator"],
        "shares": {"generator": _interval(0.2), "aggregator": _interval(0.1)},
        "interaction": _interval(0.04),
        "change": _interval(0.3),
    }
    drawn = bars(result)
    assert [row["label"] for row in drawn["rows"]] == ["generator", "aggregator", "total change"]
    assert drawn["interaction"]["value"] == 0.04 and drawn["adds_up"] is True


def test_a_mix_source_reads_as_chosen_with_its_step():
    assert source_text("/data/runs/7/checkpoints/step-000012", "latest") == "latest (step 12)"
    assert source_text("/data/runs/7/checkpoints/best-000010", "best") == "best (step 10)"
    assert source_text("/data/runs/7/checkpoints/step-000012") == "step (step 12)"
    assert source_text("base", "base") == "base"
    assert source_text("latest") == "latest"  # a stored reference is shown as it is
    job = SimpleNamespace(
        kind="mix",
        plan={
            "roles": ["generator", "aggregator"],
            "evaluations": [
                {
                    "key": "generator=base aggregator=latest",
                    "sources": {
                        "generator": "base",
                        "aggregator": "/srv/troupe/runs/7/checkpoints/step-000012",
                    },
                    "reuse_step": None,
                }
            ],
        },
        evaluations={},
    )
    (row,) = combinations(job)
    assert row["sources"] == ["base", "latest (step 12)"]
