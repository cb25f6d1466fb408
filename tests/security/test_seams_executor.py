"""An Executor without a permission checker must not exist: it used to allow everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.calls.executor import Executor
from agentd.foundation.config import Config
from agentd.sessions.session import SessionManager
from agentd.sessions.store import Store
from agentd.tools import default_registry


@pytest.fixture
def parts(tmp_path: Path):
    config = Config(socket_path=str(tmp_path / "s.sock"), state_dir=str(tmp_path / "state"))
    store = Store(str(tmp_path / "agentd.db"))
    yield default_registry(), SessionManager(store, config), config
    store.close()


def test_no_checker_no_executor(parts) -> None:
    with pytest.raises(TypeError):
        Executor(*parts)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="needs a permission checker"):
        Executor(*parts, permissions=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a permission checker"):
        Executor(*parts, None)  # type: ignore[arg-type]
