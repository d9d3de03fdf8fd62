"""scripts/run.py (`make run`) refuses to start, with one line saying why, when a service it
needs does not answer or its port is taken — before it starts anything."""

import socket
import subprocess
import sys

from tests.helpers import ROOT, free_port, service_env


def run_script(tmp_path, **variables: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/run.py"],
        cwd=ROOT,
        env=service_env(
            **{
                "DATABASE_URL": None,
                "CELERY_BROKER_URL": None,
                "TROUPE_DATA_DIR": str(tmp_path),
                "PORT": str(free_port()),
                **variables,
            }
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unreachable_broker_is_one_line_naming_celery_broker_url(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"

    result = run_script(tmp_path, CELERY_BROKER_URL=url)

    assert result.returncode == 1
    assert result.stderr.startswith(
        f"Error: Cannot connect to the broker at CELERY_BROKER_URL={url}"
    )
    assert result.stderr.count("\n") == 1, result.stderr


def test_an_unreachable_database_is_one_line_naming_database_url(tmp_path):
    url = f"postgres://postgres@127.0.0.1:{free_port()}/troupe"

    result = run_script(tmp_path, DATABASE_URL=url)

    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: Cannot connect to the database at DATABASE_URL={url}")
    assert result.stderr.count("\n") == 1, result.stderr


def test_a_port_in_use_is_one_line_naming_port(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        result = run_script(tmp_path, PORT=str(port))

    assert result.returncode == 1
    assert result.stderr == (
        f"Error: port {port} on 127.0.0.1 is in use: stop what holds it, or set PORT=<another>.\n"
    )


def test_it_warns_when_the_workers_would_start_as_root():
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_script", ROOT / "scripts" / "run.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert "starting as root" in script.root_warning(euid=0)
    assert "docs/security.md" in script.root_warning(euid=0)
    assert script.root_warning(euid=1000) is None


def test_composes_web_and_radar_worker_run_as_the_images_ordinary_user():
    import yaml

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name in ("web", "worker-radar"):
        assert services[name].get("user") in (None, "troupe"), name
    assert "USER troupe" in (ROOT / "Dockerfile").read_text()
