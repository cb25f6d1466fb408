"""Session names are printed as they are by every client (session ls, attach, errors): a
name that could forge a terminal's display, or pass for another session's id, is refused,
and an open session's name cannot be taken by a second one."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from agentd_client import Client

HOSTILE = [
    "\x1b]0;owned\x07",  # a terminal title escape
    "web\x1b[2J",  # clear the screen
    "web\nsession 0123 open",  # a forged second line
    "web\u202egnp.exe",  # a bidi override
    "web\u2028x",  # a line separator
    "web\x00",
    " web",
    "x" * 201,
    "deadbeefdeadbeefdeadbeefdeadbeef",  # reads as a session id
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused(client: Client, workspace: Path, name: str) -> None:
    before = {s.id for s in client.list_sessions(include_closed=True)}
    with pytest.raises(grpc.RpcError) as err:
        client.create_session(str(workspace), name=name)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert {s.id for s in client.list_sessions(include_closed=True)} == before


def test_an_open_sessions_name_cannot_be_taken(client: Client, workspace: Path) -> None:
    owner = client.create_session(str(workspace), name="taken-by-owner")
    try:
        with pytest.raises(grpc.RpcError) as err:
            client.create_session(str(workspace), name="taken-by-owner")
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
        named = [s.id for s in client.list_sessions() if s.name == "taken-by-owner"]
        assert named == [owner.id]
    finally:
        client.close_session(owner.id)
