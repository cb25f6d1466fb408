"""Session, and the SessionManager that owns every session of the daemon."""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any

from agentd.foundation.config import Config
from agentd.foundation.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidRequest,
    SessionNotFound,
    StorageFull,
)
from agentd.foundation.errors import SessionClosed as SessionClosedError
from agentd.sessions import gids
from agentd.sessions.event_types import SessionClosed, TodoPayload
from agentd.sessions.events import EventLog, Replay
from agentd.sessions.store import Store

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class FileState:
    """A file as the session last read or wrote it: the base of the modified-since checks."""

    content_hash: str
    mtime_ns: int
    size: int
    # A Read with offset/limit saw only part of the file.
    partial: bool = False


class ReadState(dict[str, FileState]):
    """path -> FileState, remembering which paths changed since the last save.

    A save then writes those rows only: a long session may have read thousands of
    files, and serialising all of them after every call made each call slower.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changed: set[str] = set()

    def __setitem__(self, path: str, state: FileState) -> None:
        if self.get(path) == state:
            return  # a Read of a file as it was: nothing to save
        super().__setitem__(path, state)
        self.changed.add(path)

    def __delitem__(self, path: str) -> None:
        super().__delitem__(path)
        self.changed.add(path)

    def pop(self, path: str, *default: Any) -> Any:
        self.changed.add(path)
        return super().pop(path, *default)


@dataclass
class Session:
    id: str
    workspace_roots: list[str]
    cwd: str
    owner_uid: int = field(default_factory=os.getuid)
    # The session's own group, a supplementary group of its commands and file work, the
    # only one that may enter its temp and output dirs (agentd/sessions/gids.py); 0
    # where sessions get none (a daemon not root, or no sandbox_gid_range).
    sandbox_gid: int = 0
    home: str = field(default_factory=lambda: os.path.expanduser("~"))
    env: dict[str, str] = field(default_factory=dict)
    name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    closed: bool = False
    # When it closed (ms since the epoch); 0 while open (or closed before this was kept).
    closed_ms: int = 0
    permission_mode: str = "default"
    allow_rules: list[str] = field(default_factory=list)
    deny_rules: list[str] = field(default_factory=list)
    ask_rules: list[str] = field(default_factory=list)
    allow_network: bool = False
    # "proxied", "off" or "on" (network_mode); "" in sessions stored before it existed.
    network: str = ""
    allow_unsandboxed: bool = False
    # How long its asks wait for an answer, in seconds; 0: the daemon's default.
    ask_timeout_seconds: float = 0.0
    # Review mode: a writing Bash call runs on a copy-on-write view of the workspace and
    # its changes wait for a person (agentd/changes/review.py).
    review: bool = False
    # Directories outside the workspace roots that tools may use (additionalDirectories).
    additional_dirs: list[str] = field(default_factory=list)
    # path -> state at the last Read (or write by a tool) in this session
    read_state: ReadState = field(default_factory=ReadState)
    todos: list[TodoPayload] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The session as a person knows it, for messages: its name and a short id when
        it has a name, else its id."""
        return f"{self.name!r} ({self.id[:12]})" if self.name else self.id


# read_state is stored row by row (Store.save_read_state), not in the session's body.
_SESSION_FIELDS = tuple(f.name for f in fields(Session) if f.name != "read_state")
_FILE_STATE_FIELDS = tuple(f.name for f in fields(FileState))


def _session_to_dict(session: Session) -> dict[str, Any]:
    """The session as JSON-able data, for the store (which serialises it at once).

    Shallow: the lists and dicts are the session's own, not copies (dataclasses.asdict
    deep-copies every field, which was most of the cost of saving after each call).
    """
    return {name: getattr(session, name) for name in _SESSION_FIELDS}


def _file_state_to_dict(state: FileState) -> dict[str, Any]:
    return {name: getattr(state, name) for name in _FILE_STATE_FIELDS}


def _session_from_dict(body: dict[str, Any], read_state: dict[str, Any]) -> Session:
    known = set(_SESSION_FIELDS)
    session = Session(**{k: v for k, v in body.items() if k in known})
    session.read_state = ReadState({p: FileState(**s) for p, s in read_state.items()})
    return session


NETWORK_MODES = ("proxied", "off", "on")


def network_mode(session: Session) -> str:
    """The session's network: a session stored before modes existed keeps what its
    allow_network meant then ("on" or "off")."""
    if session.network in NETWORK_MODES:
        return session.network
    return "on" if session.allow_network else "off"


_ID = re.compile(r"[0-9a-f]{32}")
PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")


class SessionManager:
    """Owns every session: creates, finds, persists and closes them."""

    def __init__(self, store: Store, config: Config) -> None:
        self._store = store
        self._config = config
        self._sessions: dict[str, Session] = {}
        self._logs: dict[str, EventLog] = {}
        # How every session's journal is read back (its threads, its turns).
        self._replay = Replay()
        # Called with the session when it closes (stops its tasks, ...).
        self.on_close: list[Callable[[Session], Awaitable[None]]] = []
        # Called with a session once it is created and stored.
        self.on_create: list[Callable[[Session], None]] = []
        # Called with a new session before it is stored; one that raises refuses it.
        self.admit: list[Callable[[Session], None]] = []
        for body in store.load_sessions():
            session = _session_from_dict(body, store.load_read_state(body["id"]))
            self._sessions[session.id] = session
        for session in self._sessions.values():
            # Made before sessions had groups of their own: one now, kept from here on.
            if not session.sandbox_gid and self._assign_gid(session):
                self.save(session)

    def _assign_gid(self, session: Session) -> bool:
        """Give `session` a group of its own, if this daemon gives them; whether it did."""
        if not gids.enabled(self._config.sandbox_gid_range):
            return False
        taken = (s.sandbox_gid for s in self._sessions.values())
        session.sandbox_gid = gids.allocate(self._config.sandbox_gid_range, taken)
        return True

    def create(
        self,
        workspace_roots: list[str],
        *,
        cwd: str = "",
        env: dict[str, str] | None = None,
        name: str = "",
        labels: dict[str, str] | None = None,
        permission_mode: str = "",
        allow_network: bool = False,
        allow_unsandboxed: bool = False,
        owner_uid: int | None = None,
        network: str = "",
        ask_timeout_seconds: float = 0.0,
        review: bool = False,
    ) -> Session:
        if not workspace_roots:
            raise InvalidRequest("a session needs at least one workspace root (--workspace DIR)")
        roots: list[str] = []
        for raw in workspace_roots:
            if not raw or "\0" in raw or not os.path.isabs(raw):
                raise InvalidRequest(f"workspace root {raw!r} must be an absolute path")
            real = os.path.realpath(raw)
            if not os.path.isdir(real):
                raise InvalidRequest(f"workspace root {raw} is not an existing directory")
            roots.append(real)
        if cwd:
            if "\0" in cwd or not os.path.isabs(cwd):
                raise InvalidRequest(f"cwd {cwd!r} must be an absolute path")
            cwd = os.path.realpath(cwd)
            if not any(cwd == r or cwd.startswith(r.rstrip("/") + "/") for r in roots):
                raise InvalidRequest(f"cwd {cwd} is not inside a workspace root")
            if not os.path.isdir(cwd):
                raise InvalidRequest(f"cwd {cwd} is not an existing directory")
        if network and network not in NETWORK_MODES:
            raise InvalidRequest(
                f"unknown network mode {network!r}; use one of {', '.join(NETWORK_MODES)}"
            )
        mode = permission_mode or self._config.default_permission_mode
        if mode not in PERMISSION_MODES:
            raise InvalidRequest(
                f"unknown permission mode {mode!r}; use one of {', '.join(PERMISSION_MODES)}"
            )
        for key, value in (env or {}).items():
            if not key or "=" in key or "\0" in key:
                raise InvalidRequest(f"invalid environment variable name {key!r}")
            if "\0" in value:
                raise InvalidRequest(f"environment variable {key} contains a NUL byte")
        if name:
            self._check_name(name)
        if review and os.geteuid() != 0:
            raise FailedPrecondition(
                "review mode needs a daemon running as root (it mounts an overlay per "
                "call); create the session without review"
            )
        uid = os.getuid() if owner_uid is None else owner_uid
        session = Session(
            id=uuid.uuid4().hex,
            workspace_roots=roots,
            cwd=cwd or roots[0],
            owner_uid=uid,
            home=_home_of(uid),
            env=dict(env or {}),
            name=name,
            labels=dict(labels or {}),
            permission_mode=mode,
            allow_network=allow_network,
            network=network or ("on" if allow_network else self._config.network_default),
            allow_unsandboxed=allow_unsandboxed,
            ask_timeout_seconds=ask_timeout_seconds,
            review=review,
        )
        self._assign_gid(session)
        for admit in self.admit:
            admit(session)
        # Stored and committed before it exists for anyone: a session the state disk
        # could not take is not half-created (not in memory, no row left to commit).
        try:
            self.save(session)
            self._store.flush()
        except StorageFull:
            self._store.forget_session_body(session.id)
            with contextlib.suppress(StorageFull):
                self._store.delete_session(session.id)
            raise
        self._sessions[session.id] = session
        for hook in self.on_create:
            hook(session)
        return session

    @property
    def store(self) -> Store:
        return self._store

    def storage_full(self) -> bool:
        """Whether the state disk is full now: after a write failed for want of space, a
        commit is tried again (space may have been freed since)."""
        if not self._store.full_since:
            return False
        try:
            self._store.flush()
        except StorageFull:
            return True
        return False

    def _check_name(self, name: str) -> None:
        """A name must pick one open session (clients resolve names to ids), and must not
        read as an id: closed sessions may share it (the open one wins)."""
        # Printed as it is by every client: no control, format or separator characters
        # (terminal escapes, bidi overrides, newlines) that could forge what a person sees.
        if len(name) > 200 or name != name.strip() or not name.isprintable():
            raise InvalidRequest(
                f"session name {name!r}: at most 200 printable characters, no leading or "
                "trailing space"
            )
        if _ID.fullmatch(name):
            raise InvalidRequest(f"session name {name!r} reads as a session id; choose another")
        for other in self._sessions.values():
            if other.name == name and not other.closed:
                raise AlreadyExists(
                    f"a session named {name!r} is already open ({other.id}); close it "
                    "(`agentctl session close NAME`) or choose another name"
                )

    def get(self, session_id: str, *, open_only: bool = False) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        if open_only and session.closed:
            raise SessionClosedError(session.label)
        return session

    def list(self, include_closed: bool = False) -> list[Session]:
        return [s for s in self._sessions.values() if include_closed or not s.closed]

    def log(self, session_id: str) -> EventLog:
        log = self._logs.get(session_id)
        if log is None:
            self.get(session_id)
            log = self._logs[session_id] = EventLog(session_id, self._store, self._replay)
            if self._sessions[session_id].closed:
                log.close()
        return log

    def save(self, session: Session) -> None:
        self._store.save_session(session.id, session.created_ms, _session_to_dict(session))
        changed = session.read_state.changed
        if changed:
            states = session.read_state
            self._store.save_read_state(
                session.id,
                {p: _file_state_to_dict(states[p]) for p in changed if p in states},
                [p for p in changed if p not in states],
            )
            changed.clear()

    def last_activity_ms(self, session: Session) -> int:
        """When the session last did anything: its latest event, else its creation."""
        return max(self.log(session.id).last_time_ms, session.created_ms)

    def forget(self, session_id: str) -> None:
        """Delete a closed session for good: its rows, journal included, and its memory."""
        session = self.get(session_id)
        if not session.closed:
            raise InvalidRequest(f"session {session.label} is open; close it first")
        self._store.delete_session(session_id)
        self._sessions.pop(session_id, None)
        self._logs.pop(session_id, None)

    async def close(self, session_id: str) -> Session:
        session = self.get(session_id)
        if session.closed:
            return session
        for hook in self.on_close:
            # Each under its own error handling: one that fails is logged, the others
            # still run, and the session ends closed.
            try:
                await hook(session)
            except Exception:
                _log.exception("closing session %s: a close step failed", session_id)
        session.closed = True
        session.closed_ms = int(time.time() * 1000)
        self.save(session)
        log = self.log(session_id)
        log.emit(SessionClosed())
        log.close()
        # Committed before the caller hears it is closed: a crash never reopens it.
        self._store.flush()
        return session


def _home_of(uid: int) -> str:
    if uid == os.getuid():
        return os.path.expanduser("~")
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return "/"
