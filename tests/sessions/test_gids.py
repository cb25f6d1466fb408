"""Each session's own group (agentd/sessions/gids.py): never one a session holds, never
one of the host's, never in a subordinate range."""

from __future__ import annotations

import grp
from pathlib import Path

import pytest

from agentd.foundation.config import Config
from agentd.foundation.errors import ConfigError, Unavailable
from agentd.sessions import gids
from agentd.sessions.session import SessionManager
from agentd.sessions.store import Store
from tests.support.services import config_under


def test_a_group_no_session_holds() -> None:
    first, count = 1879113728, 8
    taken = [first + i for i in range(count) if i != 5]
    for _ in range(20):
        assert gids.allocate([first, count], taken) == first + 5
    with pytest.raises(Unavailable, match="every group of sandbox_gid_range"):
        gids.allocate([first, count], [*taken, first + 5])


def test_a_range_holding_a_host_group_is_refused() -> None:
    group = next(g for g in grp.getgrall() if g.gr_gid > 0)
    with pytest.raises(ConfigError, match=group.gr_name):
        gids.check_range([group.gr_gid, 1])
    gids.check_range([1879113728, 65536])  # the default: no group of this host


def test_a_range_overlapping_a_subordinate_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subgid = tmp_path / "subgid"
    subgid.write_text("someone:1879150000:65536\n")
    monkeypatch.setattr(gids, "SUBGID_FILE", str(subgid))
    with pytest.raises(ConfigError, match="someone's subordinate groups"):
        gids.check_range([1879113728, 65536])
    gids.check_range([1879113728, 36272])  # ends just below it


def test_a_sessions_group_is_kept_across_a_restart(tmp_path: Path) -> None:
    if not gids.enabled(Config().sandbox_gid_range):
        pytest.skip("sessions get groups of their own only from a root daemon")
    config = config_under(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    store = Store(str(tmp_path / "a.db"))
    try:
        made = [SessionManager(store, config).create([str(ws)]) for _ in range(3)]
    finally:
        store.close()
    assert all(s.sandbox_gid for s in made) and len({s.sandbox_gid for s in made}) == 3
    store = Store(str(tmp_path / "a.db"))
    try:
        again = SessionManager(store, config)
        assert [again.get(s.id).sandbox_gid for s in made] == [s.sandbox_gid for s in made]
    finally:
        store.close()
