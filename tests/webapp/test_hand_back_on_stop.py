"""Stopping `make run` hands back every job its training worker held — its run and its swap
job alike — so the next start takes them at once instead of after the stale-run sweep's wait
(swap jobs once waited for the sweep)."""

import importlib.util
import socket

import pytest

from tests.helpers import ROOT
from webapp import leases
from webapp.attribution.models import SwapJob
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db


def run_script():
    spec = importlib.util.spec_from_file_location("run_script", ROOT / "scripts" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stopping_make_run_hands_back_its_run_and_its_swap_job(
    run, monkeypatch, capsys, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(leases, "send", lambda kind, job: sent.append((kind.name, job.id)))
    worker = f"troupe@{socket.gethostname()}"
    Run.objects.filter(id=run.id).update(status=Run.RUNNING, worker=worker, attempts=1)
    job = SwapJob.objects.create(
        run=run, kind="gain", plan={}, status=SwapJob.RUNNING, worker=worker, attempts=1
    )

    with django_capture_on_commit_callbacks(execute=True):
        run_script().hand_back()

    out = capsys.readouterr().out
    assert f"Queued again to resume on the next start: run {run.id}." in out
    assert f"Queued again to resume on the next start: swap job {job.id}." in out
    assert SwapJob.objects.get(id=job.id).status == SwapJob.QUEUED
    assert sorted(sent) == [("run", run.id), ("swap job", job.id)]
