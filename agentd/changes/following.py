"""Following background tasks' changes: checked every changes_check_seconds while a
task runs and once at its end (a person asked without holding the task up, the model
told through the task's notices), its checkpoint recorded when it ends, and a task a
previous daemon left running followed again from its log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentd.changes.files import Entry
from agentd.changes.holding import Held
from agentd.changes.tracked import Tracked
from agentd.fs.identity import FsIdentity
from agentd.sessions.session import Session

if TYPE_CHECKING:
    from agentd.changes.service import ChangeTracker

log = logging.getLogger(__name__)


class TaskFollowing:
    """The tracker's part for tasks (`tracker.follow`, `readopt`, `sweep` call it)."""

    def __init__(self, tracker: ChangeTracker) -> None:
        self._t = tracker

    async def readopt(
        self,
        session: Session,
        identity: FsIdentity | None,
        done: asyncio.Future[Any],
        *,
        task_id: str,
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        """Follow again a task a previous daemon left running: its reader has gone on
        writing its log. What the task touched before now is not known good: compared
        with the known good the last daemon kept, each difference is held; with none
        kept, it is left out of the baseline this daemon builds (a file it made is held,
        one it changed is held as changed from an unknown content)."""
        path = os.path.join(self._t._dir, f"{task_id}.log")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return  # started by a daemon without events: nothing to read
        roots = [os.path.realpath(r) for r in session.workspace_roots]
        tracked = Tracked(task_id, session.id, roots, identity, log_path=path, log=fd)
        tracked.events = True
        touched_before = await asyncio.to_thread(tracked.touched_paths)
        for root in roots:
            await self._t._refresh(root, identity)
            baseline = self._t._baselines[(root, identity)]
            if (root, identity) in self._t._loaded:
                continue  # every difference from the kept known good is a suspect already
            prefix = root.rstrip("/") + "/"
            for touched in touched_before:
                if touched.startswith(prefix):
                    baseline.forget(touched[len(prefix) :])
        self._t._active[tracked.id] = tracked
        self._follow_future(session, tracked, done, made_by, tool_use_id, notify)

    def sweep(self, keep: set[str]) -> None:
        """Remove change logs of runs no one follows (a previous daemon's)."""
        try:
            names = os.listdir(self._t._dir)
        except OSError:
            return
        for name in names:
            if name.endswith(".log") and name.removesuffix(".log") not in keep:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self._t._dir, name))

    def follow(
        self,
        session: Session,
        tracked: Tracked,
        done: asyncio.Future[Any],
        *,
        task_id: str,
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        """Check a background task every changes_check_seconds while it runs and once at
        its end; a person is asked without holding the task up, and the model told
        through `notify(session_id, text)`."""
        if tracked.log_path:
            with contextlib.suppress(OSError):
                renamed = os.path.join(self._t._dir, f"{task_id}.log")
                os.rename(tracked.log_path, renamed)
                tracked.log_path = renamed
        self._follow_future(session, tracked, done, made_by, tool_use_id, notify)

    def _follow_future(
        self,
        session: Session,
        tracked: Tracked,
        done: asyncio.Future[Any],
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        future = asyncio.ensure_future(
            self._follow(session, tracked, done, made_by, tool_use_id, notify)
        )
        self._t._followers.add(future)
        future.add_done_callback(self._t._followers.discard)

    async def _follow(
        self,
        session: Session,
        tracked: Tracked,
        done: asyncio.Future[Any],
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        known: dict[str, Entry] = {}
        try:
            while True:
                ended = done.done()
                if not ended:
                    await asyncio.wait({done}, timeout=self._t._check)
                    ended = done.done()
                try:
                    await self._t.known_before(tracked, known)
                    items = await self._t.hold(tracked, final=ended)
                except OSError as exc:  # this check only; the next one looks again
                    log.warning("checking the changes of task run %s: %s", tracked.id, exc)
                    items = []
                if items:
                    decided = asyncio.ensure_future(
                        self._decide_later(session, tracked, items, made_by, tool_use_id, notify)
                    )
                    self._t._followers.add(decided)
                    decided.add_done_callback(self._t._followers.discard)
                if ended:
                    break
            await self._t.checkpoint(
                session, tracked, known, tool_use_id=tool_use_id, tool_name="Bash", action="task"
            )
        except asyncio.CancelledError:
            # The daemon is stopping and the task lives on: its log stays for the next.
            self._t.close(tracked, keep_log=True)
            raise
        except Exception:
            log.exception("following the changes of task run %s failed", tracked.id)
        self._t.close(tracked)

    async def _decide_later(
        self,
        session: Session,
        tracked: Tracked,
        items: list[Held],
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        text = await self._t.decide(
            session, tracked, items, made_by=made_by, tool_use_id=tool_use_id
        )
        notify(session.id, text)
