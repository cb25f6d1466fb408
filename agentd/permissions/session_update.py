"""A person's change to a session's permissions (`agentctl perms`): a mode, and rules to
add, how long its asks wait. Every part is checked before anything changes, so a bad
rule changes nothing."""

from __future__ import annotations

from dataclasses import dataclass

from agentd.foundation.errors import InvalidRequest
from agentd.permissions.rules import parse_rule
from agentd.sessions.session import PERMISSION_MODES, Session


@dataclass(frozen=True, slots=True)
class PermissionUpdate:
    mode: str = ""  # "" keeps the session's mode
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    # Seconds its asks wait (0: the daemon's default); None keeps the session's.
    ask_timeout_seconds: float | None = None


def update_permissions(session: Session, update: PermissionUpdate) -> None:
    """Apply `update` to `session` (the caller saves it); a rule the session has already
    is not added again. InvalidRequest says what is wrong with a mode or a rule."""
    if update.mode and update.mode not in PERMISSION_MODES:
        raise InvalidRequest(
            f"unknown permission mode {update.mode!r}; use one of {', '.join(PERMISSION_MODES)}"
        )
    for rule in (*update.allow, *update.deny, *update.ask):
        parse_rule(rule)  # raises InvalidRequest with what is wrong
    if update.mode:
        session.permission_mode = update.mode
    if update.ask_timeout_seconds is not None:
        session.ask_timeout_seconds = update.ask_timeout_seconds
    session.allow_rules.extend(r for r in update.allow if r not in session.allow_rules)
    session.deny_rules.extend(r for r in update.deny if r not in session.deny_rules)
    session.ask_rules.extend(r for r in update.ask if r not in session.ask_rules)
