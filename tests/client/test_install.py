"""The client installs alone: `pip install ./client` in a fresh venv, no daemon, no compiler.

A laptop that only talks to a dev box needs Client and agentctl, not bubblewrap,
tree-sitter or seccomp. The venv gets the client's two dependencies from wheels only
(`--only-binary`: nothing is compiled), cannot import the daemon, and its agentctl
talks to the real daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.support import data
from tests.support.daemon import DaemonProcess

ROOT = data.ROOT


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("client-venv")
    # A copy, so the build leaves nothing in the tree.
    source = base / "client"
    shutil.copytree(
        ROOT / "client",
        source,
        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"),
    )
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    # No compiler on the PATH either: a source build of anything would fail.
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}:/nonexistent", "CC": "/bin/false"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--only-binary=grpcio,protobuf",
            str(source),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return env_dir


def _run(env_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["PATH"] = f"{env_dir / 'bin'}:/usr/bin:/bin"
    env.pop("PYTHONPATH", None)
    env["AGENTD_CLIENT_CONFIG"] = str(env_dir / "client.toml")
    return subprocess.run(
        list(argv), env=env, capture_output=True, text=True, timeout=60, cwd=env_dir
    )


def test_only_the_client_and_its_two_dependencies(client_venv: Path) -> None:
    r = _run(client_venv, str(client_venv / "bin/python"), "-m", "pip", "list", "--format=json")
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(r.stdout)}
    assert {"agentd-client", "grpcio", "protobuf"} <= installed
    daemon_only = {"agentd", "tree-sitter", "tree-sitter-bash", "pyseccomp", "jsonschema"}
    assert not installed & daemon_only, installed & daemon_only


def test_the_daemon_cannot_be_imported_there(client_venv: Path) -> None:
    python = str(client_venv / "bin/python")
    r = _run(client_venv, python, "-c", "import agentd")
    assert r.returncode != 0 and "No module named 'agentd'" in r.stderr
    r = _run(client_venv, python, "-c", "import agentd_client.v1.agentd_pb2, agentd_client")
    assert r.returncode == 0, r.stderr


def test_agentctl_from_the_client_alone_talks_to_the_daemon(
    client_venv: Path, daemon: DaemonProcess
) -> None:
    agentctl = str(client_venv / "bin/agentctl")
    version = _run(client_venv, agentctl, "--version")
    assert version.returncode == 0 and version.stdout.strip() == "agentctl 0.1.0"
    status = _run(client_venv, agentctl, "--socket", daemon.socket, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["socket_path"] == daemon.socket


def test_a_missing_extra_is_one_line_saying_what_to_install(client_venv: Path) -> None:
    r = _run(client_venv, str(client_venv / "bin/agentctl"), "completion", "bash")
    assert r.returncode == 69, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'agentd-client[cli]'" in lines[0], r.stderr
    r = _run(
        client_venv,
        str(client_venv / "bin/agentctl"),
        "context",
        "add",
        "box",
        "--socket",
        "/tmp/x.sock",
    )
    assert r.returncode == 69 and "agentd-client[cli]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
