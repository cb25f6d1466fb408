"""Keeping the state bounded: idle sessions closed, closed sessions deleted after their
retention time, the oldest closed sessions first when the state passes its size cap.

What a session leaves: its rows (session, journal, what it read, tasks), its saved
large results (state_dir/sessions/<id>), and its directory under the daemon's base for
session directories (agentd/sessions/dirs.py): its command output files and its
sandbox temp dir. The temp dir goes when the session closes; the rest when the session
is reaped, so its journal and output can still be read for `retention_seconds` after it
closed.

A session with a running task is never reaped (nor closed for idleness): its output
file is still being written. Nothing another daemon made is touched: only sessions
this daemon's store knows are reaped, by their uuid-named directories.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentd.foundation.config import Config
from agentd.foundation.errors import InvalidRequest, StorageFull
from agentd.fs import tmpfs, trees
from agentd.sessions import dirs as session_dirs
from agentd.sessions import tmp_owners
from agentd.sessions.session import Session, SessionManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Collected:
    """What one pass did, or would do, with one session."""

    id: str
    name: str
    action: str  # "closed", "reaped" or "kept"
    idle_seconds: float
    reason: str = ""


class RunningTasks(Protocol):
    """What retention asks of the background tasks (agentd/runs/tasks.py TaskManager)."""

    def list(
        self, session_id: str, include_finished: bool = True
    ) -> Sequence[Mapping[str, Any]]: ...


class OutputDirs(Protocol):
    """What retention asks of the output files (agentd/runs/output/registry.py Outputs)."""

    def tasks_dir(self, session_id: str) -> str: ...

    def forget_session(self, session_id: str) -> None: ...


class Reaper:
    def __init__(
        self,
        config: Config,
        sessions: SessionManager,
        tasks: RunningTasks,
        outputs: OutputDirs,
        tmp_dir_of: Callable[[Session], str],
    ) -> None:
        """`tmp_dir_of`: where a session's sandbox temp dir is (made or not), as the
        sandbox names it (agentd/sandboxing/policy.py session_tmp_path)."""
        self.config = config
        self._tmp_dir_of = tmp_dir_of
        self._sessions = sessions
        self._tasks = tasks
        self._outputs = outputs
        self.idle_closed = 0
        self.reaped = 0
        self.used_bytes = 0
        # The sessions' files at the last measure (walking them is work for a pass).
        self._files_bytes = 0
        # Over the cap with nothing left to reap: said once, until it is under again.
        self._over_cap = False
        self._runner: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        # Session directories made from here on are of sessions this daemon just made.
        self._started = time.time()
        self._dirs = session_dirs.of(config.state_dir)
        # Called with each session once its rows are gone (the checkpoint store drops
        # the contents no row names any more).
        self.on_reaped: list[Callable[[Session], Awaitable[None]]] = []

    # ---- the daemon's own timer ----
    def start(self) -> None:
        self._runner = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)

    async def _run(self) -> None:
        first = True
        while True:
            try:
                if first:
                    await self.remove_leftovers()
                # session_idle_seconds = 0: open sessions are never closed for idleness.
                idle = self.config.session_idle_seconds or None
                await self.collect(idle, self.config.retention_seconds)
            except asyncio.CancelledError:
                raise
            except StorageFull as exc:
                log.warning("reaper pass stopped: %s", exc)
            except Exception:
                log.exception("reaper pass failed; the next one runs as planned")
            first = False
            await asyncio.sleep(self.config.reap_interval_seconds)

    # ---- one pass ----
    async def collect_asked(
        self,
        idle_seconds: float | None = None,
        reap_after_seconds: float | None = None,
        *,
        dry_run: bool = False,
    ) -> list[Collected]:
        """A pass a person asked for (`agentctl gc`): the configured idle and retention
        times unless given (InvalidRequest unless between 0 and 1e9)."""
        for name, value in (
            ("idle_seconds", idle_seconds),
            ("reap_after_seconds", reap_after_seconds),
        ):
            if value is not None and not 0 <= value <= 10**9:
                raise InvalidRequest(f"{name} must be between 0 and 1e9")
        # session_idle_seconds = 0: open sessions are never closed for idleness.
        idle = (self.config.session_idle_seconds or None) if idle_seconds is None else idle_seconds
        reap_after = (
            self.config.retention_seconds if reap_after_seconds is None else reap_after_seconds
        )
        return await self.collect(idle, reap_after, dry_run=dry_run)

    async def collect(
        self, idle_seconds: float | None, reap_after: float | None, dry_run: bool = False
    ) -> list[Collected]:
        """Close the open sessions idle longer than `idle_seconds` (None: none), reap the
        closed ones closed longer than `reap_after` (None: none), then hold the cap.
        One pass at a time (the timer's and `agentctl session gc`'s)."""
        async with self._lock:
            return await self._collect(idle_seconds, reap_after, dry_run)

    async def _collect(
        self, idle_seconds: float | None, reap_after: float | None, dry_run: bool
    ) -> list[Collected]:
        now_ms = time.time() * 1000
        done: list[Collected] = []
        for session in self._sessions.list(include_closed=True):
            busy = self._running_tasks(session)
            if not session.closed:
                idle = (now_ms - self._sessions.last_activity_ms(session)) / 1000
                if idle_seconds is None or idle < idle_seconds:
                    done.append(self._kept(session, idle, "active"))
                elif busy:
                    done.append(self._kept(session, idle, busy))
                else:
                    if not dry_run:
                        log.info("closing session %s: idle for %.0fs", session.id, idle)
                        await self._sessions.close(session.id)
                        self.idle_closed += 1
                    done.append(Collected(session.id, session.name, "closed", idle))
                continue
            closed_for = (now_ms - self._closed_ms(session)) / 1000
            if reap_after is None or closed_for < reap_after:
                done.append(self._kept(session, closed_for, "closed, within retention"))
            elif busy:
                done.append(self._kept(session, closed_for, busy))
            else:
                if not dry_run:
                    await self.reap(session, f"closed for {closed_for:.0f}s")
                done.append(Collected(session.id, session.name, "reaped", closed_for))
        if not dry_run:
            done += await self.hold_cap(now_ms)
        return done

    async def hold_cap(self, now_ms: float) -> list[Collected]:
        """Reap the oldest closed sessions while the state is over state_max_bytes."""
        sizes = await self.measure()
        cap = self.config.state_max_bytes
        if not cap or self.used_bytes <= cap:
            self._over_cap = False
            return []
        reaped: list[Collected] = []
        closed = [s for s in self._sessions.list(include_closed=True) if s.closed]
        for session in sorted(closed, key=self._closed_ms):
            if self.used_bytes <= cap:
                break
            if self._running_tasks(session):
                continue
            before = self._sessions.store.used_bytes()
            await self.reap(session, f"the state is over its cap of {cap} bytes")
            freed = sizes.get(session.id, 0) + max(0, before - self._sessions.store.used_bytes())
            self.used_bytes -= freed
            self._files_bytes -= sizes.get(session.id, 0)
            closed_for = (now_ms - self._closed_ms(session)) / 1000
            reaped.append(Collected(session.id, session.name, "reaped", closed_for, "size cap"))
        over = self.used_bytes > cap
        if over and not self._over_cap:
            log.warning(
                "state uses %d bytes, over its cap of %d, and no closed session is left to "
                "delete: the rest belongs to open sessions",
                self.used_bytes,
                cap,
            )
        self._over_cap = over
        return reaped

    async def measure(self) -> dict[str, int]:
        """Bytes each known session's files take; sets used_bytes (database included)."""
        sessions = self._sessions.list(include_closed=True)
        dirs = {s.id: self._kept_dirs(s) for s in sessions}

        def walk() -> dict[str, int]:
            return {sid: sum(trees.tree_bytes(d) for d in paths) for sid, paths in dirs.items()}

        sizes = await asyncio.get_running_loop().run_in_executor(None, walk)
        self._files_bytes = sum(sizes.values())
        self.used_bytes = self._sessions.store.used_bytes() + self._files_bytes
        return sizes

    # ---- one session ----
    async def reap(self, session: Session, why: str) -> None:
        """Delete everything a closed session left: its directories first, then its
        rows. A crash in between leaves rows that the next pass reaps again (the other
        order would leave files nothing knows of). On a full state disk the rows may
        not go yet (deleting needs room in the log), but the files, which free the
        space, do."""
        self._outputs.forget_session(session.id)
        paths = [
            *self._kept_dirs(session),
            self._tmp_dir_of(session),
            self._dirs.session_path(session.id),
        ]
        await asyncio.get_running_loop().run_in_executor(None, _remove_all, paths)
        try:
            self._sessions.forget(session.id)
        except StorageFull as exc:
            log.warning("session %s: files deleted, its rows not yet: %s", session.id, exc)
            return
        tmp_owners.forget(self.config.tmp_owners_dir, session.id)
        self.reaped += 1
        log.info("reaped session %s (%s)", session.id, why)
        for hook in self.on_reaped:
            try:
                await hook(session)
            except Exception:
                log.exception("session %s: a step after reaping it failed", session.id)

    def on_create(self, session: Session) -> None:
        """Record whose the session's directories will be (see tmp_owners)."""
        paths = [self._tmp_dir_of(session), self._dirs.session_path(session.id)]
        tmp_owners.record(self.config.tmp_owners_dir, session.id, self.config.state_dir, paths)

    async def on_close(self, session: Session) -> None:
        """A closed session's temp dir is of no use to anyone: it goes at once."""
        path = self._tmp_dir_of(session)
        await asyncio.get_running_loop().run_in_executor(None, tmpfs.remove, path)

    async def remove_leftovers(self) -> None:
        """At start: the temp dirs of closed sessions that a crashed daemon left, and the
        directories of daemons gone for good; those of sessions this store does not know
        are left and reported (sessions/tmp_owners.py)."""
        paths = [self._tmp_dir_of(s) for s in self._sessions.list(include_closed=True) if s.closed]
        loop = asyncio.get_running_loop()
        removed = await loop.run_in_executor(None, _remove_all, paths)
        if removed:
            log.info("removed %d temp dirs of closed sessions left by an earlier run", removed)
        ids = {s.id for s in self._sessions.list(include_closed=True)}
        cleaned, unknown = await loop.run_in_executor(
            None,
            tmp_owners.sweep,
            self.config.tmp_owners_dir,
            self.config.state_dir,
            ids.__contains__,
            self._started,
        )
        if cleaned:
            log.info("removed the directories of %d sessions whose daemon is gone", cleaned)
        if unknown:
            shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" * (len(unknown) > 5))
            log.warning(
                "left the directories of %d sessions the state database does not know, "
                "as their owner records in %s name them (%s): not removed, in case they "
                "are of sessions a lost or restored journal no longer holds; remove them "
                "by hand once sure",
                len(unknown),
                self.config.tmp_owners_dir,
                shown,
            )

    def _kept_dirs(self, session: Session) -> list[str]:
        return [self.config.session_dir(session.id), self._outputs.tasks_dir(session.id)]

    def _closed_ms(self, session: Session) -> float:
        # Sessions closed before closed_ms was kept: their last event is their close.
        return session.closed_ms or self._sessions.last_activity_ms(session)

    def _running_tasks(self, session: Session) -> str:
        running = self._tasks.list(session.id, include_finished=False)
        return f"{len(running)} running tasks" if running else ""

    def _kept(self, session: Session, idle: float, reason: str) -> Collected:
        return Collected(session.id, session.name, "kept", idle, reason)

    def usage(self) -> dict[str, Any]:
        store = self._sessions.store
        return {
            # The database and its log as they are now (they grow between passes), and
            # the files as the last pass found them.
            "used_bytes": store.used_bytes() + self._files_bytes,
            "max_bytes": self.config.state_max_bytes,
            "retention_seconds": self.config.retention_seconds,
            "session_idle_seconds": self.config.session_idle_seconds,
            "sessions_idle_closed": self.idle_closed,
            "sessions_reaped": self.reaped,
            "closed_sessions": sum(1 for s in self._sessions.list(include_closed=True) if s.closed),
            "disk_full": bool(store.full_since),
            "events_unjournaled": store.unjournaled,
            "database_problem": store.problem,
        }


def _remove_all(paths: list[str]) -> int:
    removed = 0
    for path in paths:
        try:
            tmpfs.unmount(path)  # a session's temp dir is a tmpfs of its own
            removed += trees.remove_tree(path)
        except OSError as exc:
            log.warning("could not delete %s: %s", os.path.basename(path), exc)
    return removed
