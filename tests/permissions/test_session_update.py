"""A person's change to a session's permissions: checked whole before anything changes."""

from __future__ import annotations

import pytest

from agentd.foundation.errors import InvalidRequest
from agentd.permissions.session_update import PermissionUpdate, update_permissions
from agentd.sessions.session import Session


@pytest.fixture
def session() -> Session:
    return Session(id="s-perms", workspace_roots=["/ws"], cwd="/ws", allow_rules=["Bash(ls:*)"])


def test_a_mode_and_new_rules_are_applied_once(session: Session) -> None:
    update = PermissionUpdate(
        mode="acceptEdits",
        allow=("Bash(ls:*)", "Bash(git status)", "Bash(git status)"),
        deny=("Read(./secrets/**)",),
        ask=("WebFetch",),
    )
    update_permissions(session, update)
    assert session.permission_mode == "acceptEdits"
    assert session.allow_rules == ["Bash(ls:*)", "Bash(git status)"]
    assert session.deny_rules == ["Read(./secrets/**)"]
    assert session.ask_rules == ["WebFetch"]


def test_no_mode_keeps_the_mode(session: Session) -> None:
    session.permission_mode = "plan"
    update_permissions(session, PermissionUpdate(ask=("Bash(rm:*)",)))
    assert session.permission_mode == "plan" and session.ask_rules == ["Bash(rm:*)"]


@pytest.mark.parametrize(
    "update, wrong",
    [
        (PermissionUpdate(mode="yolo", allow=("Bash(make)",)), "unknown permission mode 'yolo'"),
        (PermissionUpdate(mode="plan", allow=("Bash(make)", "Bash(")), "Bash("),
        (PermissionUpdate(deny=("Read(",)), "Read("),
    ],
)
def test_anything_wrong_changes_nothing(
    session: Session, update: PermissionUpdate, wrong: str
) -> None:
    before = (session.permission_mode, list(session.allow_rules), list(session.deny_rules))
    with pytest.raises(InvalidRequest, match=wrong.replace("(", r"\(")):
        update_permissions(session, update)
    assert (session.permission_mode, session.allow_rules, session.deny_rules) == before
