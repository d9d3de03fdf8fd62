"""An artifact upload's database work is one query: its token and the run its path names are
looked up together (`webapp.jsonapi.bearer.Rider`), so a client logging a thousand small files
pays one round trip a file. Every answer stays what it was with two look-ups: the run by its
32-hex id or its number, a missing run, a teammate's run, a revoked token (refused at once:
the token is read on every request, never cached)."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from webapp.experiments.models import ApiToken, Run
from webapp.tracking import artifacts

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"


def headers(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def put(client, raw, path, data=b"x"):
    return client.put(
        ARTIFACTS + path, data, content_type="application/octet-stream", headers=headers(raw)
    )


def test_an_upload_is_one_query_and_answers_as_before(client, alice, bob):
    token, raw = ApiToken.issue(alice, "t")
    _, bobs = ApiToken.issue(bob, "t")
    response = client.post(
        API + "runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=headers(raw),
    )
    info = response.json()["run"]["info"]
    run = Run.objects.get()
    by_id = f"/{run.experiment_id}/{info['run_id']}/artifacts"
    by_number = f"/{run.experiment_id}/{run.id}/artifacts"
    put(client, raw, by_id + "/warm.txt")  # the token's last use is noted (once a minute)

    for i, root in enumerate((by_id, by_number)):
        with CaptureQueriesContext(connection) as queries:
            response = put(client, raw, f"{root}/f{i}.txt", b"hello")
        assert response.status_code == 200, response.content
        assert len(queries.captured_queries) == 1, [q["sql"][:80] for q in queries]
    assert (artifacts.run_folder(run.id) / "f1.txt").read_bytes() == b"hello"
    got = client.get(f"{ARTIFACTS}{by_id}/f0.txt", headers=headers(raw))
    assert b"".join(got.streaming_content) == b"hello"

    missing = put(client, raw, f"/{run.experiment_id}/{'f' * 32}/artifacts/x.txt")
    assert missing.status_code == 404 and missing.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    missing = put(client, raw, f"/{run.experiment_id}/99999/artifacts/x.txt")
    assert missing.status_code == 404 and missing.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    wrong = put(client, raw, f"/{run.experiment_id + 1}/{info['run_id']}/artifacts/x.txt")
    assert wrong.status_code == 404
    denied = put(client, bobs, by_id + "/x.txt")
    assert denied.status_code == 403 and denied.json()["error_code"] == "PERMISSION_DENIED"
    assert put(client, "trp_not_a_token", by_id + "/x.txt").status_code == 401
    assert client.put(ARTIFACTS + by_id + "/x.txt", b"x").status_code == 401

    token.delete()  # revoked: the very next upload is refused
    assert put(client, raw, by_id + "/after.txt").status_code == 401
    assert not (artifacts.run_folder(run.id) / "after.txt").exists()
