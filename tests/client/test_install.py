"""The client installs alone, as a laptop gets it: the wheel `make dist` builds, into a
fresh venv, offline (no index: only the wheels `make dist` left beside it).

A laptop that only talks to a dev box needs Client and agentctl, not bubblewrap,
tree-sitter or seccomp. The venv cannot import the daemon, its agentctl talks to the
real daemon and keeps contexts, and a command that needs an extra says, in one line,
the command that adds it from that very wheel, which then works offline.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from agentd_client.core import origin
from tests.support import data
from tests.support.daemon import DaemonProcess

ROOT = data.ROOT
# pip's own settings only: no machine-wide index or wheel dirs, and no index at all.
OFFLINE = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "dist", f"DIST={out}"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (ROOT / "client" / "build").exists()  # nothing left in the tree
    return out


@pytest.fixture(scope="module")
def client_venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("laptop") / "venv"
    venv.create(env_dir, with_pip=True)
    (wheel,) = dist.glob("agentd_client-*.whl")
    # No compiler on the PATH either: a source build of anything would fail.
    env = {**os.environ, **OFFLINE, "PATH": f"{env_dir / 'bin'}:/nonexistent", "CC": "/bin/false"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--only-binary=:all:",
         "--find-links", str(dist), str(wheel)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return env_dir


def _run(env_dir: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(OFFLINE)
    env["PATH"] = f"{env_dir / 'bin'}:/usr/bin:/bin"
    env.pop("PYTHONPATH", None)
    env["AGENTD_CLIENT_CONFIG"] = str(env_dir / "client.toml")
    return subprocess.run(
        list(argv), env=env, capture_output=True, text=True, timeout=300, cwd=env_dir, input=stdin
    )


def _installed(env_dir: Path) -> set[str]:
    r = _run(env_dir, str(env_dir / "bin/python"), "-m", "pip", "list", "--format=json")
    return {p["name"].lower().replace("_", "-") for p in json.loads(r.stdout)}


def test_only_the_client_and_what_it_needs(client_venv: Path) -> None:
    installed = _installed(client_venv)
    assert {"agentd-client", "grpcio", "protobuf", "tomli-w", "wcwidth"} <= installed
    daemon_only = {"agentd", "tree-sitter", "tree-sitter-bash", "pyseccomp", "jsonschema"}
    assert not installed & daemon_only, installed & daemon_only
    assert not installed & {"mcp", "anthropic"}  # the extras stay extras


def test_the_daemon_cannot_be_imported_there(client_venv: Path) -> None:
    python = str(client_venv / "bin/python")
    r = _run(client_venv, python, "-c", "import agentd")
    assert r.returncode != 0 and "No module named 'agentd'" in r.stderr
    r = _run(client_venv, python, "-c", "import agentd_client.v1.agentd_pb2, agentd_client")
    assert r.returncode == 0, r.stderr


def test_agentctl_from_the_wheel_alone_talks_to_the_daemon(
    client_venv: Path, daemon: DaemonProcess
) -> None:
    agentctl = str(client_venv / "bin/agentctl")
    version = _run(client_venv, agentctl, "--version")
    assert version.returncode == 0 and version.stdout.strip() == "agentctl 0.1.0"
    # A laptop's first steps: a context, then commands through it.
    added = _run(client_venv, agentctl, "context", "add", "box", "--socket", daemon.socket)
    assert added.returncode == 0, added.stderr
    status = _run(client_venv, agentctl, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["socket_path"] == daemon.socket
    completion = _run(client_venv, agentctl, "completion", "bash")
    assert completion.returncode == 0 and "agentctl" in completion.stdout, completion.stderr


def test_a_missing_extra_names_a_command_that_works_from_there(
    client_venv: Path, dist: Path, daemon: DaemonProcess
) -> None:
    agentctl = str(client_venv / "bin/agentctl")
    r = _run(client_venv, agentctl, "--socket", daemon.socket, "mcp", "--workspace", "/tmp")
    assert r.returncode == 69, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "Traceback" not in line and "agentd-client[" not in line, line
    command = line.partition("package: ")[2]
    (wheel,) = dist.glob("agentd_client-*.whl")
    argv = shlex.split(command)
    assert argv[0] == str(client_venv / "bin" / "python") and f"{wheel}[mcp]" in argv, command
    added = _run(client_venv, *argv)  # offline: the wheels beside the client's
    assert added.returncode == 0, added.stdout + added.stderr
    assert "mcp" in _installed(client_venv)
    serving = _run(client_venv, agentctl, "--socket", daemon.socket, "mcp", "--workspace", "/tmp")
    assert serving.returncode == 0, serving.stderr  # stdin closed at once: a clean end


def test_a_checkout_install_names_the_checkout() -> None:
    """This venv has the client editable from the checkout (`make`)."""
    assert origin.source() == (str(ROOT / "client"), True)
    command = origin.install_command("mcp")
    assert shlex.split(command) == [
        sys.executable, "-m", "pip", "install", "-e", f"{ROOT / 'client'}[mcp]"
    ]  # fmt: skip
