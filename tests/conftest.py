"""A real daemon on a temp socket, and the real client talking to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agentd_client import Client

from tests.daemon import DaemonProcess, start_daemon


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = start_daemon(tmp_path_factory.mktemp("agentd"))
    yield proc
    code = proc.stop()
    assert code == 0, f"agentd exited with {code}:\n{proc.log}"
    assert "Traceback" not in proc.log, proc.log


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[Client]:
    with Client(daemon.socket, timeout=60) as c:
        yield c


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def session_id(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace)).id
