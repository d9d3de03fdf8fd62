"""The embedded default (SQLite, what `make run` uses with no configuration) under the load it
is meant for: a token keeps working after its first request, and several MLflow clients and a
JSON API writer logging to one server at once lose nothing and never see a 500.

The concurrency test always runs on a SQLite file of its own, whichever database the session
uses: it is the embedded default's promise, and CI's PostgreSQL leg must keep it too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from bench.embedded_writers import statuses, writer_command
from tests.helpers import ROOT, service_env
from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, Experiment

CLIENTS = 4  # MLflow client processes, besides one JSON API writer
STEPS = 60
KEYS = 8  # metrics a step, in one log-batch request

API_WRITER = textwrap.dedent(
    """
    import sys, requests
    base, token, run, (steps, keys) = *sys.argv[1:4], map(int, sys.argv[4:6])
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {token}"
        for step in range(steps):
            points = [{"key": f"train/k{k}", "step": step, "value": k + step / 1000}
                      for k in range(keys)]
            for attempt in range(30):  # what a client does with a 503: wait and retry
                response = session.post(f"{base}/api/v1/runs/{run}/metrics",
                                        json={"points": points}, timeout=60)
                if response.status_code != 503:
                    break
                time.sleep(float(response.headers.get("Retry-After", 1)))
            assert response.status_code == 200, (response.status_code, response.text)
    """
).replace("import sys, requests", "import sys, time, requests")


@pytest.mark.django_db
def test_a_token_works_on_its_second_third_and_hundredth_request(client, alice):
    """The MLflow endpoint once answered 500 from a token's second request on SQLite (its raw
    lookup read `last_used` back as a naive datetime); both protocols share one authenticator
    now, and this runs on whichever database the session uses."""
    token, raw = ApiToken.issue(alice, "laptop")
    bearer = {"Authorization": f"Bearer {raw}"}
    experiment = Experiment.objects.create(owner=alice, name="tokens")
    for n in range(1, 101):
        mlflow = client.post(
            "/api/2.0/mlflow/experiments/search",
            {"max_results": 5},
            content_type="application/json",
            headers=bearer,
        )
        api = client.get(f"/api/v1/runs?experiment={experiment.id}", headers=bearer)
        assert (n, mlflow.status_code, api.status_code) == (n, 200, 200), mlflow.content
        if n == 3:  # the token was last used long ago: the next request notes it again
            ApiToken.objects.filter(id=token.id).update(
                last_used=timezone.now() - timedelta(minutes=5)
            )
    token.refresh_from_db()
    assert timezone.now() - token.last_used < timedelta(minutes=1)


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_concurrent_writers_on_sqlite_lose_nothing_and_never_see_a_500(tmp_path):
    data = tmp_path / "data"
    database = f"sqlite:///{tmp_path / 'troupe.sqlite3'}"
    env = service_env(DATABASE_URL=database, TROUPE_DATA_DIR=str(data))
    _manage(env, "migrate", "--noinput", "-v", "0")
    _manage(env, "ensure_login")
    token = _manage(env, "create_token", "troupe").splitlines()[-1]

    # Two server processes of four threads each, as `make run` starts it.
    with live_troupe(tmp_path, threads=4, workers=2, database=database) as base:
        headers = {"Authorization": f"Bearer {token}"}
        created = requests.post(
            f"{base}/api/2.0/mlflow/experiments/create",
            json={"name": "sqlite-writers"},
            headers=headers,
            timeout=30,
        )
        assert created.status_code == 200, created.text
        experiment = created.json()["experiment_id"]
        api_run = requests.post(
            f"{base}/api/v1/runs",
            json={"name": "api writer", "experiment": int(experiment)},
            headers=headers,
            timeout=30,
        )
        assert api_run.status_code == 201, api_run.text
        run_env = service_env(
            **{**mlflow_env(base, token), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": None}
        )
        # The MLflow clients keep their own retries (as a researcher has them): a 503 is
        # retried, and so would a 500 be, so the server's access log says whether one was.
        commands = [writer_command(base, token, experiment, i, STEPS, KEYS) for i in range(CLIENTS)]
        api_writer = [str(api_run.json()["id"]), str(STEPS), str(KEYS)]
        commands.append([sys.executable, "-c", API_WRITER, base, token, *api_writer])
        writers = [
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=run_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for command in commands
        ]
        outputs = [writer.communicate(timeout=360)[0] for writer in writers]
        codes = [writer.returncode for writer in writers]
        assert codes == [0] * len(writers), outputs

        runs = requests.get(
            f"{base}/api/v1/runs", params={"experiment": experiment}, headers=headers, timeout=30
        ).json()["runs"]
        assert len(runs) == CLIENTS + 1
        for run in runs:
            series = requests.get(
                f"{base}/api/v1/runs/{run['id']}/metrics",
                params={"keys": ",".join(f"train/k{k}" for k in range(KEYS)), "max_points": 0},
                headers=headers,
                timeout=30,
            ).json()["series"]
            assert sorted(series) == sorted(f"train/k{k}" for k in range(KEYS)), run["name"]
            assert all(s["steps"] == list(range(STEPS)) for s in series.values()), run["name"]

    access = (tmp_path / "gunicorn.log").read_text()
    answered = statuses(access)
    assert len(answered) >= (CLIENTS + 1) * STEPS
    assert "500" not in answered, access[-3000:]
