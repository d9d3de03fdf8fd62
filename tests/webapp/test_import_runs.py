"""`manage.py import_runs`: TensorBoard event files (written by TensorBoard's own event-file
writer, as torch's SummaryWriter writes them) and verl's file-logger JSONL become runs of an
experiment, with Troupe's keys mapped, and importing again duplicates nothing."""

import json
import math
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

from webapp.experiments.models import Experiment, MetricPoint, Run
from webapp.metrics.models import EarlierPoint

pytestmark = pytest.mark.django_db

STEPS = 30


def write_events(directory, steps=STEPS) -> None:
    """A TensorBoard run: per-role grad norms as `simple_value` (torch, tensorboardX) and a
    validation accuracy as a TF2-style scalar tensor, plus a text summary (not a scalar)."""
    writer = EventFileWriter(str(directory))
    for step in range(steps):
        values = [
            summary_pb2.Summary.Value(tag=f"actor/{role}/grad_norm", simple_value=step + i / 4)
            for i, role in enumerate(("generator", "evaluator"))
        ]
        if step % 5 == 0:
            metadata = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
            )
            values.append(
                summary_pb2.Summary.Value(
                    tag="val/math/pass@1",
                    metadata=metadata,
                    tensor=tensor_util.make_tensor_proto(0.25 + step / 100),
                )
            )
        summary = summary_pb2.Summary(value=values)
        writer.add_event(
            event_pb2.Event(step=step, wall_time=1_700_000_000 + step, summary=summary)
        )
    writer.flush()
    writer.close()


def write_verl_jsonl(path, steps=STEPS) -> None:
    with path.open("w") as out:
        for step in range(1, steps + 1):
            data = {
                "actor/pg_loss": 1 / step,
                "train/agent_1/grad_norm": 2.0 * step,
                "training/global_step": step,
                "note": "text is skipped",
            }
            if step == 3:
                data["critic/score/mean"] = math.nan
            if step % 10 == 0:
                data["val-core/math/acc/mean@1"] = step / 100
            out.write(json.dumps({"step": step, "data": data}) + "\n")


def run_import(*args) -> str:
    out = StringIO()
    call_command("import_runs", *map(str, args), "--no-progress", stdout=out)
    return out.getvalue()


def series(run, key):
    return list(
        MetricPoint.objects.filter(run=run, key=key).order_by("step").values_list("step", "value")
    )


def test_it_imports_event_files_and_verl_jsonl_with_troupe_keys(alice, tmp_path):
    write_events(tmp_path / "tb" / "voting-seed0")
    write_verl_jsonl(tmp_path / "verl-seed1.jsonl")

    output = run_import(
        tmp_path,
        "--owner",
        "alice",
        "--experiment",
        "imported",
        "--tag",
        "workflow=voting",
        "--tag",
        "sharing=per_role",
        "--tag",
        "task=math",
    )

    experiment = Experiment.objects.get(owner=alice, name="imported")
    runs = {run.name: run for run in experiment.runs.all()}
    assert set(runs) == {"voting-seed0", "verl-seed1"}
    tb, verl = runs["voting-seed0"], runs["verl-seed1"]
    assert all(r.external and r.status == Run.SUCCEEDED for r in (tb, verl))
    assert (tb.workflow, tb.sharing, tb.task) == ("voting", "per_role", "math")

    expected = [(step, float(step + 0.25)) for step in range(STEPS)]
    assert series(tb, "actor/evaluator/grad_norm") == expected
    assert series(tb, "role/evaluator/grad_norm") == expected
    accuracy = series(tb, "eval/accuracy")
    assert [s for s, _ in accuracy] == list(range(0, STEPS, 5))
    assert accuracy[1][1] == pytest.approx(0.30)  # float32 in the event file
    assert series(tb, "val/math/pass@1") == accuracy

    assert series(verl, "train/loss") == series(verl, "actor/pg_loss")
    assert series(verl, "agent/agent1/grad_norm")[-1] == (STEPS, 2.0 * STEPS)
    assert series(verl, "eval/accuracy") == [(10, 0.1), (20, 0.2), (30, 0.3)]
    assert not MetricPoint.objects.filter(run=verl, key__in=["note", "critic/score/mean"]).exists()
    assert "skipped 30 not a number, 1 not finite" in output


def test_importing_again_reuses_the_runs_and_duplicates_nothing(alice, tmp_path):
    write_verl_jsonl(tmp_path / "a.jsonl", steps=20)
    run_import(tmp_path / "a.jsonl", "--owner", "alice", "--experiment", "again")
    before = MetricPoint.objects.count()
    write_verl_jsonl(tmp_path / "a.jsonl", steps=25)  # the job went on; import the longer log

    run_import(tmp_path / "a.jsonl", "--owner", "alice", "--experiment", "again")

    run = Run.objects.get(experiment__name="again")
    assert series(run, "actor/pg_loss") == [(s, 1 / s) for s in range(1, 26)]
    # Only steps 21..25 are new, 5 points each: actor/pg_loss, train/loss, train/agent_1/…,
    # agent/agent1/… and training/global_step.
    assert MetricPoint.objects.count() == before + 5 * 5
    assert not EarlierPoint.objects.exists()  # overwritten: MLflow's history holds 25 too
    assert Run.objects.filter(experiment__name="again").count() == 1


def test_it_names_what_is_wrong(alice, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1, "data": {"x": 1}}\n{"step": "two"}\n')
    with pytest.raises(CommandError, match=r"bad.jsonl:2: needs a whole-number 'step'"):
        run_import(bad, "--owner", "alice", "--experiment", "bad")
    with pytest.raises(CommandError, match="no user 'nobody'"):
        run_import(bad, "--owner", "nobody", "--experiment", "bad")
    with pytest.raises(CommandError, match="does not exist"):
        run_import(tmp_path / "missing", "--owner", "alice", "--experiment", "bad")
