"""An Executor without a permission checker must not exist: it used to allow everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.calls.executor import Executor
from agentd.foundation.config import Config
from agentd.sessions.session import SessionManager
from agentd.sessions.store import Store
from agentd.tools import default_registry
from tests.support.services import make_services


@pytest.fixture
def parts(tmp_path: Path):
    config = Config(socket_path=str(tmp_path / "s.sock"), state_dir=str(tmp_path / "state"))
    store = Store(str(tmp_path / "agentd.db"))
    yield default_registry(), SessionManager(store, config), config, make_services(config, store)
    store.close()


def test_no_checker_no_executor(parts) -> None:
    registry, sessions, config, services = parts
    with pytest.raises(TypeError):
        Executor(registry, sessions, config, services=services)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="needs a permission checker"):
        Executor(registry, sessions, config, permissions=None, services=services)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a permission checker"):
        Executor(registry, sessions, config, None, services)  # type: ignore[arg-type]
