"""`RunSummary` reads a stored summary as fields and gives back the very dict it read, so the
pages can drop their `(x or {}).get(...)` chains while what is cached and served stays the
same bytes."""

import json

from analysis.cliffs import summarize_accuracy
from analysis.runs import AccuracySummary, RunSummary, summarize_run

SERIES = {
    "eval/accuracy": ([0, 10, 20, 30, 40, 50, 60], [0.2, 0.5, 0.7, 0.3, 0.1, 0.1, 0.1]),
    "eval/accuracy_se": ([0, 10, 20, 30, 40, 50, 60], [0.02] * 7),
    "role/generator/grad_norm": (list(range(60)), [1.0] * 30 + [5.0] * 30),
    "role/generator/grad_share": (list(range(60)), [0.8] * 60),
    "role/aggregator/grad_share": (list(range(60)), [0.2] * 60),
}


def test_a_summary_read_as_fields_gives_back_the_same_json():
    summary = summarize_run(SERIES, sharing="shared")
    read = RunSummary.of(summary)

    assert json.dumps(read.as_dict()) == json.dumps(summary)
    assert read.accuracy.cliff_status == "cliff" and read.accuracy.cliff_onset == 30
    assert read.capture == "generator" and read.roles == ["aggregator", "generator"]
    assert read.amplification["generator"] == summary["amplification"]["generator"]


def test_every_key_of_an_accuracy_verdict_is_a_field():
    fields = set(AccuracySummary().as_dict())
    for running in (False, True):
        assert set(summarize_accuracy([0, 1, 2, 3], [0.1, 0.5, 0.1, 0.1], running=running)) == (
            fields
        )
    assert set(summarize_accuracy([], [])) == fields


def test_a_run_without_a_summary_reads_as_one_without_evaluations():
    read = RunSummary.of(None)

    assert read.accuracy.cliff_status == "insufficient" and not read.accuracy.judged
    assert read.accuracy.peak is None and read.accuracy.cliff_onset is None
    assert (read.roles, read.lead, read.capture, read.capture_fractions) == ([], {}, None, {})
