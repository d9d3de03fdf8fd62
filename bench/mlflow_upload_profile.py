"""Profile: one small artifact upload (`PUT /api/2.0/mlflow-artifacts/artifacts/…`, what
`MlflowClient.log_artifact` sends per file) through Troupe's whole Django stack, in-process.

Django is set up on a fresh, migrated PostgreSQL database (`--postgres`, dropped at the end;
`--sqlite` a temporary SQLite file instead), a user with an API token logs one MLflow run,
then `--files` uploads of `--bytes` bytes each go through `django.test.Client` (every
middleware, the token look-up, the run's look-up, the quota, the file) under cProfile. It
prints the milliseconds a request, the part spent writing the file itself
(`artifacts.receive` plus the rename), and the functions that cost most beside it; the
profile's own overhead inflates every number alike. No HTTP server, so what gunicorn adds is
not here: `bench/mlflow_artifacts.py --small-files` measures that end to end.

    .venv/bin/python bench/mlflow_upload_profile.py --files 500
    .venv/bin/python bench/mlflow_upload_profile.py --sqlite --files 500
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import DEFAULT_POSTGRES, django_database, log  # noqa: E402

FILE_WORK = ("receive", "replace")  # artifacts.receive and os.replace: the file itself


@contextlib.contextmanager
def sqlite_database():
    with tempfile.TemporaryDirectory() as folder:
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/bench.sqlite3"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        yield


def setup_run() -> tuple[object, dict, str]:
    """A client, its bearer header and the artifact path prefix of a fresh MLflow run."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from webapp.experiments.models import ApiToken

    user, _ = get_user_model().objects.get_or_create(username="bench")
    _, token = ApiToken.issue(user, "bench")
    headers = {"Authorization": f"Bearer {token}"}
    client = Client(HTTP_HOST="localhost")
    made = client.post(
        "/api/2.0/mlflow/runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=headers,
    )
    info = made.json()["run"]["info"]
    prefix = info["artifact_uri"].removeprefix("mlflow-artifacts:")
    return client, headers, f"/api/2.0/mlflow-artifacts/artifacts{prefix}"


def upload_all(client, headers: dict, prefix: str, files: int, size: int) -> None:
    body = os.urandom(size)
    for i in range(files):
        response = client.put(
            f"{prefix}/small/note-{i:05d}.txt",
            body,
            content_type="application/octet-stream",
            headers=headers,
        )
        assert response.status_code == 200, response.content


def file_seconds(stats: pstats.Stats) -> float:
    """Seconds inside the calls that write the file itself."""
    total = 0.0
    for (filename, _, name), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if name in FILE_WORK and ("artifacts.py" in filename or name == "replace"):
            total += cumulative
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--bytes", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--sqlite", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        os.environ["TROUPE_DATA_DIR"] = data
        database = (
            sqlite_database()
            if args.sqlite
            else django_database(args.postgres, "troupe_upload_profile")
        )
        with database:
            client, headers, prefix = setup_run()
            upload_all(client, headers, prefix, 20, args.bytes)  # warm: imports, first queries
            started = time.perf_counter()
            upload_all(client, headers, prefix, args.files, args.bytes)
            plain = time.perf_counter() - started
            profile = cProfile.Profile()
            profile.enable()
            upload_all(client, headers, prefix, args.files, args.bytes)
            profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    profiled = sum(row[3] for row in stats.stats.values()) and stats.total_tt  # type: ignore[attr-defined]
    per_file = 1000 * file_seconds(stats) / args.files
    log(f"{args.files} uploads of {args.bytes} B, {'SQLite' if args.sqlite else 'PostgreSQL'}")
    print(f"ms a request, unprofiled: {1000 * plain / args.files:.2f}")
    print(f"ms a request, profiled: {1000 * profiled / args.files:.2f}")
    print(f"ms a request writing the file itself (profiled): {per_file:.2f}")
    stats.sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
