"""The sandbox runtime (agentd/sandboxing/runtime.py) is what a session's sandbox is
built with: the network a runtime holds is the one a proxied session's policy joins,
and a runtime without one (runtime.bare(), as a policy built without a daemon) gives
that session no network at all, said where the runtime is made, not found missing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.network.service import NetworkService
from agentd.permissions import Asker, SettingsLoader
from agentd.permissions.network_rules import NetworkRulesSource, network_asker
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing import runtime
from agentd.sandboxing.readonly import StagingDir
from agentd.sandboxing.runtime import SandboxRuntime
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import SessionManager
from agentd.sessions.store import Store
from tests.support.services import config_under


@pytest.fixture
async def network(tmp_path: Path) -> AsyncIterator[tuple[NetworkService, SessionManager]]:
    config = config_under(tmp_path)
    store = Store(str(tmp_path / "a.db"))
    sessions = SessionManager(store, config)
    asker = Asker(sessions, 60)
    service = NetworkService(
        config,
        sessions,
        NetworkRulesSource(config, lambda: SettingsLoader(config)),
        network_asker(asker, sessions),
        asker.has_listeners,
        asyncio.get_running_loop(),
    )
    yield service, sessions
    service.stop(keep=lambda session_id: False)
    store.close()
    session_dirs.of(config.state_dir).remove_all()


async def test_a_proxied_session_joins_the_runtimes_network(
    network: tuple[NetworkService, SessionManager], workspace: Path
) -> None:
    service, sessions = network
    if not service.available():
        pytest.skip(f"no network namespaces here: {service.unavailable}")
    config = service.config
    session = sessions.create([str(workspace)], network="proxied")
    with_network = SandboxRuntime(service, None, None, None, StagingDir())
    tmp_dir = sandbox_policy.session_tmp_dir(session, config, with_network)

    policy = sandbox_policy.policy_for(session, config, tmp_dir, with_network)
    assert policy.netns is not None and not policy.network
    assert any(key.lower() == "https_proxy" for key in policy.env)

    bare = sandbox_policy.policy_for(session, config, tmp_dir, runtime.bare())
    assert bare.netns is None and not bare.network
    assert not any(key.lower() == "https_proxy" for key in bare.env)
