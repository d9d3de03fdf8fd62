"""docker-compose.yml gives the workers what the code sandbox needs, and the web server none
of it (read by the real Compose parser, as in tests/test_compose.py)."""

import json

import pytest

from tests.helpers import ROOT
from tests.test_compose import SECRETS, compose


@pytest.fixture(scope="module")
def services() -> dict:
    result = compose(ROOT / "docker-compose.yml", "config", "--format", "json", **SECRETS)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"]


@pytest.mark.parametrize("name", ["worker-cpu", "worker-gpu"])
def test_workers_run_as_root_with_cap_sys_admin_for_the_sandbox(services, name):
    worker = services[name]
    assert worker["user"] == "root"  # a uid of its own per batch of programs
    assert worker["cap_add"] == ["SYS_ADMIN"]  # pid, net, ipc and mount namespaces
    assert worker["security_opt"] == ["apparmor:unconfined"]  # docker-default refuses mount
    assert "seccomp=unconfined" not in worker["security_opt"]  # Docker's profile stays on
    # The merge with the sandbox's settings kept everything else.
    assert worker["environment"]["TROUPE_DATA_DIR"] == "/data"
    assert worker["command"][:4] == ["celery", "-A", "webapp", "worker"]


def test_the_web_server_gets_no_extra_privilege(services):
    web = services["web"]
    assert "cap_add" not in web and "security_opt" not in web
    assert "user" not in web  # the image's own unprivileged user


def test_the_sandbox_minimum_comes_from_the_env_file(services):
    worker = services["worker-cpu"]["environment"]
    assert worker["TROUPE_SANDBOX_MIN_ISOLATION"] == ""  # empty: the built-in default
    result = compose(
        ROOT / "docker-compose.yml",
        "config",
        "--format",
        "json",
        **SECRETS,
        TROUPE_SANDBOX_MIN_ISOLATION="uid,pid,net,ipc,mount,seccomp",
    )
    env = json.loads(result.stdout)["services"]["worker-gpu"]["environment"]
    assert env["TROUPE_SANDBOX_MIN_ISOLATION"] == "uid,pid,net,ipc,mount,seccomp"
