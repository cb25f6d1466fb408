"""Masked credentials (`sandbox.credentials`): what each session's sandbox is shown in
place of a secret, and the proxy's side of it.

A sandbox is shown, for a "mask" entry, a placeholder of the secret's shape made for
its session (placeholders.py): the variable set to it, or the file bound with it in
place of the secret; for a "deny" entry, nothing (the variable unset, the file empty).
The real value stays here. A proxied session's sandbox also trusts the session's own
CA (session_ca.py), and the proxy terminates TLS to a host some entry injects to,
swapping placeholders for real values on the way out and back (terminate.py); every
other host is tunnelled untouched. What `agentctl credentials` shows is kept per
entry and session: requests that carried the placeholder, and refusals.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentd.credentials.injection import Injection, Swap
from agentd.credentials.masked_config import MaskedEntry, workspace_entry
from agentd.credentials.placeholders import placeholder
from agentd.credentials.session_ca import (
    BUNDLE_MOUNT,
    CA_MOUNT,
    SYSTEM_BUNDLE,
    SessionCA,
    sandbox_environment,
    system_bundle,
)
from agentd.credentials.sources import SourceError, Sources
from agentd.credentials.terminate import Reports, terminate
from agentd.foundation.errors import ConfigError
from agentd.network.connection import Answers, Interceptor, Listener, Request
from agentd.network.rules import normal_host
from agentd.sessions.event_types import PermissionDecided
from agentd.sessions.session import Session, SessionManager

log = logging.getLogger(__name__)

SESSIONS_KEPT = 256
# A secret shorter than this is not masked (shown as denied).
MIN_SECRET = 8
# A masked file's template is read up to this much.
MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SandboxView:
    """What a session's sandbox is given in place of its masked credentials."""

    env: dict[str, str]
    unset: list[str]
    files: list[tuple[bytes, str]]


@dataclass
class Use:
    requests: int = 0
    refused: int = 0
    last_ms: int = 0


@dataclass
class _Session:
    swaps: dict[str, Swap] = field(default_factory=dict)  # by entry label
    entries: dict[str, MaskedEntry] = field(default_factory=dict)  # its "mask" ones
    ca: SessionCA | None = None
    # Real values fetched off the daemon's loop just before a sandbox is built (prepare):
    # by source name, with when.
    fetched: dict[str, tuple[float, str]] = field(default_factory=dict)


# A value `prepare` fetched is used by the sandbox built right after it, if this fresh.
PREPARED_SECONDS = 30.0


# A session's workspace entries: (kind, entry, the settings file it came from).
WorkspaceEntries = Callable[[Session], list[tuple[str, dict[str, Any], str]]]


def _template(path: str) -> bytes:
    """A host file the operator named, read without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(fd, MAX_FILE_BYTES)
    finally:
        os.close(fd)


class CredentialMasks(Listener):
    """Made once by the daemon; a `Listener` of the network service with no port of
    its own (its environment, its files and its interception are what it adds)."""

    def __init__(
        self,
        entries: list[MaskedEntry],
        state_dir: str,
        sessions: SessionManager,
        upstream_ca_file: str = "",
        workspace: WorkspaceEntries | None = None,
        to_daemon: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.entries = entries
        self.workspace = workspace
        # Workspace entries some session was shown, for `agentctl credentials`.
        self._seen: dict[str, MaskedEntry] = {}
        self.masked = [e for e in entries if e.mode == "mask"]
        sources = {e.source.name: e.source for e in self.masked if e.source is not None}
        self.sources = Sources(sources, state_dir)
        self.sessions = sessions
        self.upstream_ca_file = upstream_ca_file
        self._sessions: dict[str, _Session] = {}
        self.use: dict[str, dict[str, Use]] = {e.label: {} for e in self.masked}
        self._lock = threading.Lock()
        # Made at start: a CA file that cannot be read stops the daemon, naming it.
        self._verify = self._verifier_for(upstream_ca_file)
        # How a record reaches the session's journal (on the daemon's loop); None: logged.
        self.to_daemon = to_daemon

    # --- the sandbox ----------------------------------------------------------------------

    def entries_for(self, session: Session) -> list[MaskedEntry]:
        """The daemon's entries, and the workspace's: a "deny" of the workspace's wins
        over anything; its "mask" (trusted content only) adds what the config lacks."""
        chosen = {e.label: e for e in self.entries}
        for kind, raw, path in self.workspace(session) if self.workspace else []:
            entry = workspace_entry(kind, raw, path)
            if entry is None:
                continue
            if entry.mode == "deny" or entry.label not in chosen:
                chosen[entry.label] = entry
                with self._lock:
                    self._seen.setdefault(f"{entry.label}\0{path}", entry)
                    self.use.setdefault(entry.label, {})
        return list(chosen.values())

    async def prepare(self, session: Session) -> None:
        """Each masked entry's real value fetched in a thread (a source may be a command
        taking its time), so the sandbox built next finds it without blocking the loop."""
        sources = {
            e.source.name for e in self.entries_for(session) if e.mode == "mask" and e.source
        }
        loop = asyncio.get_running_loop()
        for name in sorted(sources):
            try:
                real = await loop.run_in_executor(None, self.sources.get, name, session.owner_uid)
            except SourceError:
                continue  # said when the sandbox is built
            except Exception:  # a source that fails shows nothing, never crashes
                log.exception("credential source %s failed", name)
                continue
            with self._lock:
                state = self._sessions.setdefault(session.id, _Session())
                state.fetched[name] = (time.monotonic(), real.password)

    def sandbox_view(self, session: Session) -> SandboxView:
        """The sandbox's variables, the variables it loses and the files it is shown.
        Blocking when a source must be read (call `prepare` first, off the loop)."""
        env: dict[str, str] = {}
        unset: list[str] = []
        files: list[tuple[bytes, str]] = []
        entries = self.entries_for(session)
        masked = {e.label: e for e in entries if e.mode == "mask"}
        with self._lock:
            state = self._sessions.setdefault(session.id, _Session())
            state.entries = masked
            for label in [k for k in state.swaps if k not in masked]:
                del state.swaps[label]
        for entry in entries:
            shown = self._shown(session, entry) if entry.mode == "mask" else None
            if shown is None:  # not shown now: its placeholder goes nowhere either
                with self._lock:
                    state.swaps.pop(entry.label, None)
            if entry.kind == "envVars":
                if shown is None:
                    unset.append(entry.name)
                else:
                    env[entry.name] = shown.placeholder.decode()
            elif shown is None:
                files.append((b"", entry.name))
            else:
                files.append((self._file(entry, shown), entry.name))
        return SandboxView(env, unset, files)

    def _shown(self, session: Session, entry: MaskedEntry) -> Swap | None:
        if entry.source is None:  # a workspace's: the value the session was given
            real = session.env.get(entry.name, "")
            if not real:
                return None
        elif (prepared := self._prepared(session.id, entry.source.name)) is not None:
            real = prepared
        else:
            try:
                real = self.sources.get(entry.source.name, session.owner_uid).password
            except SourceError as exc:
                log.warning("session %s: %s is not shown: %s", session.id, entry.label, exc)
                return None
        if len(real) < MIN_SECRET:
            # Swapped wherever it appears, a short value would turn up by chance.
            log.warning("session %s: %s is too short to mask; not shown", session.id, entry.label)
            return None
        with self._lock:
            state = self._sessions.setdefault(session.id, _Session())
            kept = state.swaps.get(entry.label)
            # The same placeholder while the secret keeps its length (a command's token
            # renewed): processes started earlier keep working.
            same = kept is not None and len(kept.placeholder) == len(real)
            if kept is not None and same and kept.placeholder != real.encode():
                shown = kept.placeholder.decode()
            else:
                shown = placeholder(real)
            swap = Swap(entry.label, shown.encode(), real.encode(), tuple(entry.hosts))
            state.swaps[entry.label] = swap
            return swap

    def _prepared(self, session_id: str, source: str) -> str | None:
        with self._lock:
            state = self._sessions.get(session_id)
            kept = state.fetched.get(source) if state is not None else None
        if kept is None or time.monotonic() - kept[0] > PREPARED_SECONDS:
            return None
        return kept[1]

    def _file(self, entry: MaskedEntry, swap: Swap) -> bytes:
        if not entry.template:
            return swap.placeholder + b"\n"
        try:
            content = _template(entry.template)
        except OSError as exc:
            log.warning("%s: its template %s cannot be read (%s)", entry.label, entry.template, exc)
            return swap.placeholder + b"\n"
        return content.replace(swap.real, swap.placeholder)

    def forget(self, session_id: str) -> None:
        """The session closed: its placeholders and its CA go."""
        with self._lock:
            self._sessions.pop(session_id, None)

    # --- the network's Listener -----------------------------------------------------------

    def port(self) -> int | None:
        return None

    def _masks(self, session_id: str) -> bool:
        """Whether the session's sandbox is shown a placeholder (sandbox_view ran)."""
        with self._lock:
            state = self._sessions.get(session_id)
            return state is not None and bool(state.swaps)

    def environment(self, session_id: str) -> dict[str, str]:
        return sandbox_environment() if self._masks(session_id) else {}

    def files(self, session_id: str) -> list[tuple[bytes, str]]:
        if not self._masks(session_id):
            return []
        ca = self._ca(session_id)
        bundle = system_bundle().rstrip(b"\n") + b"\n" + ca.pem
        return [(ca.pem, CA_MOUNT), (bundle, BUNDLE_MOUNT), (bundle, SYSTEM_BUNDLE)]

    def _ca(self, session_id: str) -> SessionCA:
        with self._lock:
            state = self._sessions.setdefault(session_id, _Session())
            if state.ca is None:
                state.ca = SessionCA(session_id)
            return state.ca

    @staticmethod
    def _verifier_for(ca_file: str) -> ssl.SSLContext:
        """How upstreams are verified: the system's CAs, and `ca_file`'s."""
        ctx = ssl.create_default_context()
        if ca_file:
            try:
                ctx.load_verify_locations(ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"network_upstream_ca_file: cannot read {ca_file} ({exc}); "
                    "give a PEM file of CA certificates"
                ) from None
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def intercept(self, session_id: str, request: Request) -> Interceptor | None:
        """A terminated connection for a host some entry injects to; None: tunnelled."""
        host = normal_host(request.host)
        with self._lock:
            state = self._sessions.get(session_id)
            swaps = list(state.swaps.values()) if state is not None else []
            entries = dict(state.entries) if state is not None else {}
        given = [
            s
            for s in swaps
            if s.label in entries and entries[s.label].injects_to(host, request.port)
        ]
        if not given:
            return None
        others = [s for s in swaps if s not in given]
        injection = Injection(host, given, others)
        server = self._ca(session_id).server_context(host)
        verify = self._verify
        reports = Reports(
            used=lambda label: self._used(session_id, label, False, f"{host}:{request.port}"),
            refused=lambda swap, where: self._refused(session_id, swap, where),
            failed=lambda line: self._failed(session_id, request, line),
        )

        async def run(
            reader: asyncio.StreamReader,
            writer: asyncio.StreamWriter,
            upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
            answers: Answers,
        ) -> None:
            await terminate(
                reader, writer, upstream, answers, request, server, verify, injection, reports
            )

        return run

    def carries(self, session_id: str, request: Request, parts: list[bytes]) -> str | None:
        """A placeholder in a plain http request: refused, whatever the host (a real
        value never goes out in the clear, and a placeholder never leaves untold)."""
        with self._lock:
            state = self._sessions.get(session_id)
            swaps = list(state.swaps.values()) if state is not None else []
        for swap in swaps:
            if any(swap.placeholder in part for part in parts):
                where = f"{request.host}:{request.port}"
                self._refused(session_id, swap, f"{where} (plain http)")
                hosts = ", ".join(swap.hosts) or "no host"
                return (
                    f"agentd refused this request to {where}: it carries the placeholder of "
                    f"the masked credential {swap.label}, which goes only to {hosts}, over "
                    "https.\n"
                )
        return None

    # --- what happened --------------------------------------------------------------------

    def _used(self, session_id: str, label: str, refused: bool, where: str = "") -> None:
        first = False
        with self._lock:
            sessions = self.use.setdefault(label, {})
            use = sessions.get(session_id)
            if use is None:
                use = sessions[session_id] = Use()
                while len(sessions) > SESSIONS_KEPT:
                    sessions.pop(next(iter(sessions)))
            if refused:
                use.refused += 1
            else:
                first = use.requests == 0
                use.requests += 1
            use.last_ms = int(time.time() * 1000)
        if first:  # what `attach` shows: the first use of each entry in a session
            self._journal(
                session_id,
                f"the masked credential {label}",
                f"{where} (its placeholder replaced by the real value, first use)",
                behavior="allow",
            )

    def _refused(self, session_id: str, swap: Swap, where: str) -> None:
        self._used(session_id, swap.label, refused=True)
        hosts = ", ".join(swap.hosts) or "no host"
        self._journal(
            session_id,
            f"the masked credential {swap.label} goes only to {hosts}",
            f"{where} (its placeholder, refused)",
        )

    def _failed(self, session_id: str, request: Request, line: str) -> None:
        self._journal(session_id, line, f"{request.host}:{request.port} (TLS)")

    def _journal(
        self, session_id: str, decided_by: str, reason: str, behavior: str = "deny"
    ) -> None:
        log.info("session %s: %s %s: %s", session_id, behavior, reason, decided_by)
        if self.to_daemon is None:
            return

        def emit() -> None:
            try:
                self.sessions.log(session_id).emit(
                    PermissionDecided(
                        tool_use_id="",
                        tool_name="Network",
                        behavior=behavior,
                        decided_by=decided_by,
                        reason=reason,
                    )
                )
            except Exception:  # the session closed meanwhile
                log.debug("session %s: a refusal could not be journaled", session_id)

        self.to_daemon(emit)

    def summary(self) -> list[dict[str, Any]]:
        """Every entry, its hosts and each session's use; never a value."""
        with self._lock:
            return [
                {
                    "kind": e.kind,
                    "name": e.name,
                    "mode": e.mode,
                    "inject_hosts": e.hosts,
                    "source": e.source.where
                    if e.source is not None
                    else f"the session's environment ({e.origin})",
                    "sessions": {
                        sid: vars(use).copy() for sid, use in self.use.get(e.label, {}).items()
                    },
                }
                for e in [*self.entries, *self._seen.values()]
            ]
