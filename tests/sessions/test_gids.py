"""Each session's own group (agentd/sessions/gids.py): never one a session holds, never
one of the host's, never in a subordinate range."""

from __future__ import annotations

import grp
from pathlib import Path

import pytest

from agentd.foundation.errors import ConfigError, Unavailable
from agentd.sessions import gids


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
