"""Review mode: a writing Bash call runs on a copy-on-write view of the workspace
(fs/overlay.py), and what it wrote waits for a person instead of reaching the workspace.

The rules, the simplest that stay correct:
- one change set at a time: while one waits, a writing call of the session (Bash not
  read-only, Write, Edit, ...) is refused until a person applies or discards it; a
  read-only call runs as ever, on the workspace, and does not see what waits;
- a writing Bash call in review mode runs in the foreground only (no background task,
  no move to the background at its timeout: it is stopped there, and what it wrote
  waits), and never outside the sandbox;
- Write, Edit and the other file tools write the workspace directly (each is a
  checkpoint of its own) while nothing waits.

When the call ends, the view is unmounted and its upper directory read (upper.py) into
a checkpoint row in state "pending": each path's image in the workspace then (before)
and the one the command made (after), contents in the store. Applying it is a writing
call done as the session's identity with no link followed (restore.py's put_all, as a
restore writes): refused when a path changed in the workspace since (unless forced),
its intent journaled first, and the row then becomes the call's own checkpoint, so a
rewind undoes it. Discarding marks the row "discarded" and touches nothing.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from dataclasses import dataclass
from typing import Any

from agentd.changes import images, restore, upper
from agentd.changes.checkpoints import Budget, Checkpoints, Pending
from agentd.changes.images import Image
from agentd.foundation.errors import FailedPrecondition, NotFound, ToolError
from agentd.fs import overlay
from agentd.fs.identity import FsIdentity, acting_as
from agentd.fs.temp_ledger import TempLedger
from agentd.sessions import dirs as session_dirs
from agentd.sessions.checkpoint_rows import RESTORING, Row
from agentd.sessions.session import Session
from agentd_sandbox import linux
from agentd_sandbox.linux import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS

PENDING, DISCARDED = "pending", "discarded"
CHANGED = "changed in the workspace since the command ran"


@dataclass
class Opened:
    """A review run's views, one per workspace root."""

    views: list[overlay.View]

    def binds(self) -> dict[str, str]:
        return {v.root: v.merged for v in self.views}


class Reviews:
    def __init__(
        self, checkpoints: Checkpoints, state_dir: str, path_limit: int, upper_bytes: int
    ) -> None:
        self.checkpoints = checkpoints
        # What one call may write in its view (what one call's checkpoint may store).
        self._upper_bytes = upper_bytes
        self._dirs = session_dirs.of(state_dir)
        self._limit = path_limit
        # Sessions with a review call running: one change set at a time, made or waiting.
        self._running: set[str] = set()

    def sweep(self) -> int:
        """The views a daemon that died during a call left: unmounted and removed (what
        they hold never reached a workspace, and no row names it); how many."""
        base = self._dirs.existing_base()
        if base is None:
            return 0
        swept = 0
        for name in os.listdir(base):
            review = os.path.join(base, name, "review")
            if not os.path.isdir(review) or os.path.islink(review):
                continue
            for view in os.listdir(review):
                overlay.remove(overlay.View("", os.path.join(review, view)))
                swept += 1
        return swept

    def busy(self, session_id: str) -> bool:
        """Whether a change set of the session is being made or waits."""
        return session_id in self._running or self.pending(session_id) is not None

    def pending(self, session_id: str) -> Row | None:
        """The change set waiting in this session, if one does."""
        rows = self.checkpoints.rows.list(session_id)
        return next((r for r in reversed(rows) if r.state == PENDING), None)

    # ---- a call's views
    async def open(self, session: Session, gid: int | None) -> Opened:
        """Mount a view of each root for one call (OSError when the kernel refuses);
        ToolError while another one runs or a change set waits."""
        if self.busy(session.id):
            raise ToolError(
                "This session is in review mode and another command's changes are being "
                "made or wait for review; run this one once a person has resolved them."
            )
        self._running.add(session.id)
        try:
            return await self._mount(session, gid)
        except BaseException:
            self._running.discard(session.id)
            raise

    async def _mount(self, session: Session, gid: int | None) -> Opened:
        base = await asyncio.to_thread(self._review_dir, session.id, gid)
        token = secrets.token_hex(6)
        views: list[overlay.View] = []
        try:
            for i, root in enumerate(session.workspace_roots):
                at = os.path.join(base, f"{token}-{i}")
                views.append(await asyncio.to_thread(overlay.mount, root, at, self._upper_bytes))
        except BaseException:
            for view in views:
                await asyncio.to_thread(overlay.remove, view)
            raise
        return Opened(views)

    def _review_dir(self, session_id: str, gid: int | None) -> str:
        path = self._dirs.review_dir(session_id, gid)
        if gid is None:
            os.chmod(path, 0o711)  # the identity walks through; no group to admit it
        return path

    async def close(
        self,
        session: Session,
        opened: Opened,
        identity: FsIdentity | None,
        *,
        tool_use_id: str,
        command: str,
    ) -> str:
        """The call ended: its change set saved as pending, the views gone; what the
        model is told."""
        try:
            return await self._close(session, opened, identity, tool_use_id, command)
        finally:
            self._running.discard(session.id)

    def abandon(self, session: Session, opened: Opened) -> None:
        """The call never started: its views go, nothing waits."""
        self._running.discard(session.id)
        for view in opened.views:
            overlay.remove(view)

    async def _close(
        self,
        session: Session,
        opened: Opened,
        identity: FsIdentity | None,
        tool_use_id: str,
        command: str,
    ) -> str:
        try:
            for view in opened.views:
                await asyncio.to_thread(overlay.unmount, view)
            budget = self.checkpoints.budget(session.id)
            items: list[Pending] = []
            truncated = False
            for view in opened.views:
                scan = await asyncio.to_thread(upper.scan, view.upper, budget.file, self._limit)
                truncated = truncated or scan.truncated
                items += await asyncio.to_thread(self._items, view.root, scan, identity, budget)
        finally:
            for view in opened.views:
                await asyncio.to_thread(overlay.remove, view)
        if not items:
            return "The command changed no files (review mode: nothing waits for review)."
        body: dict[str, Any] = {
            "files": [i.entry() for i in items],
            "stored": budget.stored,
            "command": command[:2000],
        }
        if truncated:
            body["incomplete"] = f"more than {self._limit} paths: it cannot be applied"
        row = self.checkpoints.save(
            session, tool_use_id, "Bash", body, "pending review", state=PENDING
        )
        self.checkpoints.announce(row, "pending review")
        return _told(items, truncated)

    def _items(
        self, root: str, scan: upper.Scan, identity: FsIdentity | None, budget: Budget
    ) -> list[Pending]:
        """Each path the scan names, with its image in the workspace now (its content
        stored, so the diff shows it) and the one the command made."""
        wanted: dict[str, tuple[Image, bytes | None]] = {
            e.rel: (e.image, e.data) for e in scan.entries
        }
        for rel in scan.opaque:
            for name in _names(root, rel, identity):
                wanted.setdefault(f"{rel}/{name}", (images.none(), None))
        out: list[Pending] = []
        for rel in sorted(wanted):
            to, data = wanted[rel]
            now, seen = images.look(root, rel, identity, budget.file)
            if _unchanged(now, to):
                continue  # a directory the view only passed through, a link made again
            if to["kind"] == images.NONE and now["kind"] == images.NONE:
                continue
            kind = "added" if now["kind"] == images.NONE else "changed"
            if to["kind"] == images.NONE:
                kind = "deleted"
            item = Pending(root, rel, kind, now, dict(to))
            if seen is not None:
                item.data["before"] = seen
            if data is not None:
                item.data["after"] = data
            self.checkpoints.store(item, "before", budget)
            self.checkpoints.store(item, "after", budget)
            if kind == "changed" and images.same(item.before, item.after):
                continue  # rewritten with the same content and mode
            out.append(item)
        return out

    # ---- a person's answer
    def find(self, session: Session, pending_id: int) -> Row:
        row = self.pending(session.id)
        if row is None:
            raise NotFound(f"nothing waits for review in session {session.label}")
        if pending_id and row.seq != pending_id:
            raise FailedPrecondition(
                f"the change set waiting is {row.seq}, not {pending_id}: "
                "`agentctl review SESSION` shows it"
            )
        return row

    async def plan(self, row: Row, identity: FsIdentity | None) -> list[restore.Step]:
        """Each path to make what the command made, with a conflict when the workspace
        no longer holds what it held when the command ran."""
        steps = [restore.Step(e["root"], e["path"], e["after"]) for e in row.body["files"]]
        await asyncio.to_thread(restore.look_all, steps, identity, self.checkpoints)
        for step, entry in zip(steps, row.body["files"], strict=True):
            if not images.restorable(step.to):
                step.conflict = "not applied: " + str(step.to.get("why") or "no content kept")
            elif restore.differs(entry["before"], step.now):
                step.conflict = CHANGED
        return steps

    async def apply(
        self,
        session: Session,
        row: Row,
        steps: list[restore.Step],
        identity: FsIdentity | None,
        *,
        force: bool,
        by: str,
        ledger: TempLedger | None,
    ) -> tuple[Row, dict[str, str]]:
        """Write the change set into the workspace; the call's checkpoint, and the paths
        that could not be written with why."""
        todo = [
            s
            for s in steps
            if images.restorable(s.to) and s.action != "none" and (force or not s.conflict)
        ]
        budget = self.checkpoints.budget(session.id)
        pending = await asyncio.to_thread(
            restore.pre_images, self.checkpoints, todo, identity, budget
        )
        body: dict[str, Any] = {
            "files": [p.entry() for p in pending],
            "stored": budget.stored,
            "command": row.body.get("command", ""),
            "by": by,
        }
        cp = self.checkpoints
        cp.save(
            session, row.tool_use_id, "Bash", body, "applied", by=by, state=RESTORING, seq=row.seq
        )
        failed = await asyncio.to_thread(restore.put_all, cp, todo, identity, ledger)
        for item in pending:
            item.after = images.none()
        await asyncio.to_thread(cp.post_images, pending, identity, budget)
        body["files"] = [p.entry() for p in pending]
        body["stored"] = budget.stored
        if failed:
            body["failed"] = failed
        done = cp.save(session, row.tool_use_id, "Bash", body, "applied", by=by, seq=row.seq)
        return done, failed

    def discard(self, session: Session, row: Row, by: str) -> None:
        body = {**row.body, "by": by}
        self.checkpoints.rows.save(
            Row(
                row.session_id,
                row.seq,
                row.tool_use_id,
                row.tool_name,
                DISCARDED,
                row.time_ms,
                body,
            ),
            now=True,
        )
        self.checkpoints.announce(row, "discarded", by)


def _unchanged(now: Image, to: Image) -> bool:
    if now["kind"] == to["kind"] == images.DIR:
        return bool(now.get("mode") == to.get("mode"))
    return now["kind"] == to["kind"] == images.LINK and now.get("target") == to.get("target")


def _told(items: list[Pending], truncated: bool) -> str:
    """The model's notice: the change waits, and what it is."""
    sign = {"added": "+", "changed": "~", "deleted": "-"}
    shown = [sign[i.kind] + images.shown(i.rel) for i in items[:20]]
    more = f" and {len(items) - 20} more" if len(items) > 20 else ""
    text = (
        "Review mode: this command's changes to the workspace were NOT applied. They wait "
        f"for a person to review them ({len(items)} path(s): {', '.join(shown)}{more}). "
        "Until they are applied or discarded, the workspace does not hold them, and "
        "further writing calls in this session are refused."
    )
    if truncated:
        text += " The change set is too large to apply as a whole; it can only be discarded."
    return text


_NO_LINKS = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS


def _names(root: str, rel: str, identity: FsIdentity | None) -> list[str]:
    """The names in the workspace directory `rel` (none when it is missing, not a
    directory, or a link is on its way)."""
    with acting_as(identity):
        try:
            top = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return []
        try:
            fd = linux.openat2(top, rel, os.O_RDONLY | os.O_DIRECTORY, resolve=_NO_LINKS)
        except OSError:
            return []
        finally:
            os.close(top)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)
