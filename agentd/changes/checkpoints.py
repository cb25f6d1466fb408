"""Checkpoints: what each writing call changed, with each path's image before and after,
so any call can be diffed and undone (restore.py), Bash included.

A checkpoint is built from the call's change set (tracked.py, changeset.py), never from
a walk of the tree: its cost follows what changed. Post-images are read at the end of
the call as the session's identity (images.py) into the content-addressed store
(blobs.py). Pre-images, in order: what a file tool overwrote (it read it anyway); the
path's image after the last checkpoint that changed it; the tracker's known good
content (code-bearing files); git's index (a file git tracks; gitblobs.py); else the
path says "no pre-image (not captured)". Caps per file, per call and per session turn
a content into "not restorable: too large", in plain view.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentd.changes import changeset, files, gitblobs, images
from agentd.changes.blobs import Blobs
from agentd.changes.capture import Capture
from agentd.changes.files import Entry
from agentd.changes.images import Image
from agentd.changes.tracked import Tracked
from agentd.foundation.config import Config
from agentd.fs.identity import FsIdentity
from agentd.sandboxing import codebearing
from agentd.sessions.checkpoint_rows import DONE, CheckpointRows, Row
from agentd.sessions.event_types import FilesChanged
from agentd.sessions.session import Session, SessionManager

log = logging.getLogger(__name__)

# Paths an event names (the checkpoint holds them all).
EVENT_PATHS = 50
_SIGN = {"added": "+", "changed": "~", "deleted": "-"}


@dataclass
class Budget:
    """What one call may still add to the store."""

    file: int
    call: int
    stored: int = 0

    def take(self, size: int) -> bool:
        if size > self.file or self.stored + size > self.call:
            return False
        self.stored += size
        return True


@dataclass
class Pending:
    """One path of a checkpoint being built."""

    root: str
    rel: str
    kind: str  # added, changed, deleted
    before: Image
    after: Image = field(default_factory=images.none)
    data: dict[str, bytes] = field(default_factory=dict)  # "before"/"after" -> content

    def entry(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "path": self.rel,
            "kind": self.kind,
            "before": self.before,
            "after": self.after,
        }


def split(path: str, roots: Iterable[str]) -> tuple[str, str] | None:
    for root in sorted(roots, key=len, reverse=True):
        if path.startswith(root.rstrip("/") + "/"):
            return root, path[len(root.rstrip("/")) + 1 :]
    return None


def _entry_image(entry: Entry) -> Image:
    if entry.kind == files.FILE and entry.content is not None:
        return {"kind": images.FILE, "mode": entry.mode & 0o7777, "size": len(entry.content)}
    if entry.kind == files.SYMLINK and entry.content is not None:
        return {"kind": images.LINK, "target": os.fsdecode(entry.content)}
    if entry.kind == files.DIR:
        return {"kind": images.DIR, "mode": entry.mode & 0o7777}
    return images.unknown(images.NOT_CAPTURED)


class Checkpoints:
    def __init__(self, config: Config, sessions: SessionManager) -> None:
        self.blobs = Blobs(os.path.join(config.state_dir, "checkpoints"))
        self.rows = CheckpointRows(sessions.store)
        self._sessions = sessions
        self._config = config
        self.cap = config.checkpoint_file_bytes
        self._table = codebearing.table()
        # Bytes each session's checkpoints added to the store (their rows' "stored").
        self._stored: dict[str, int] = {}

    def budget(self, session_id: str) -> Budget:
        """What a call of the session may still add to the store."""
        if session_id not in self._stored:  # read once; kept up to date by save
            self._stored[session_id] = self.rows.stored_bytes(session_id)
        left = self._config.checkpoint_session_bytes - self._stored[session_id]
        return Budget(
            self._config.checkpoint_file_bytes,
            max(0, min(self._config.checkpoint_call_bytes, left)),
        )

    async def reap(self, session: Session) -> None:
        """A session's rows are gone: the contents of its roots no row names go too."""
        self._stored.pop(session.id, None)
        for root in {os.path.realpath(r) for r in session.workspace_roots}:
            named = self.rows.blobs_named(root)
            removed = await asyncio.to_thread(self.blobs.keep_only, root, named)
            if removed:
                log.info("checkpoints of %s: %d stored contents no longer named", root, removed)

    # ---- a Bash call or a task
    async def record_run(
        self,
        session: Session,
        tracked: Tracked,
        known: dict[str, Entry],
        *,
        tool_use_id: str,
        tool_name: str,
        action: str = "call",
        captured: dict[str, Capture] | None = None,
    ) -> Row | None:
        """The checkpoint of a run that ended (its change set read to the end);
        `captured`: each root's copies taken before its first writing command."""
        captured = captured or {}
        change_set = tracked.changes
        pending: list[Pending] = []
        listed: list[Pending] = []  # past the cap on paths: named, never imaged
        cap = self._config.checkpoint_call_paths
        many = images.unknown(f"not restorable: more than {cap} paths changed in one call")
        for change in change_set.changes():
            where = split(change.path, tracked.roots)
            if where is None:
                continue
            kind = {changeset.ADDED: "added", changeset.DELETED: "deleted"}.get(
                change.kind, "changed"
            )
            if len(pending) >= cap:
                listed.append(Pending(where[0], where[1], kind, dict(many), dict(many)))
                continue
            before = images.none() if kind == "added" else self._last_after(*where)
            pending.append(Pending(where[0], where[1], kind, before))
        if not pending:
            return None
        for item in pending:  # the tracker's known good, for what no checkpoint saw
            if item.before["kind"] == images.UNKNOWN and (
                entry := known.get(os.path.join(item.root, item.rel))
            ):
                item.before = _entry_image(entry)
                if entry.kind == files.FILE and entry.content is not None:
                    item.data["before"] = entry.content
        budget = self.budget(session.id)
        await asyncio.to_thread(self._images, pending, tracked.identity, budget, captured)
        # What ends as it began (a change held and reverted, a file put back) is no change.
        pending = [p for p in pending if not images.same(p.before, p.after)]
        if not pending and not listed:
            return None
        body: dict[str, Any] = {
            "files": [p.entry() for p in pending + listed],
            "stored": budget.stored,
        }
        if not change_set.complete:
            body["incomplete"] = "file events were lost: paths this call changed may be missing"
        return self.save(session, tool_use_id, tool_name, body, action)

    def _last_after(self, root: str, rel: str) -> Image:
        after = self.rows.last_after(root, rel)
        if after is None or (after.get("blob") and not self.blobs.has(root, after["blob"])):
            return images.unknown(images.NOT_CAPTURED)
        return after

    def _images(
        self,
        pending: list[Pending],
        identity: FsIdentity | None,
        budget: Budget,
        captured: dict[str, Capture] | None = None,
    ) -> None:
        """The captured copies' and git's pre-images for the rest, then every
        post-image (a worker thread's job)."""
        captured = captured or {}
        by_root: dict[str, list[Pending]] = {}
        for item in pending:
            if item.before["kind"] != images.UNKNOWN:
                continue
            if (capture := captured.get(item.root)) is not None:
                if (got := capture.pre_image(item.rel)) is not None:
                    item.before, item.data["before"] = got
                    continue
                if not capture.git_trusted(item.rel):  # edited outside: not the index's
                    item.before = images.unknown(capture.why_not(item.rel))
                    continue
            by_root.setdefault(item.root, []).append(item)
        for root, items in by_root.items():
            # Git's index is the sandbox's to write: its copy of a code-bearing file (or
            # of git's own files) would put back what a command planted, unheld.
            items = [i for i in items if self._table.for_file_tools(i.rel) is None]
            found = gitblobs.blobs(root, identity, [i.rel for i in items])
            for item in items:
                if (blob := found.get(item.rel)) is None:
                    continue
                mode, data = blob
                if mode == 0o120000:
                    item.before = {"kind": images.LINK, "target": os.fsdecode(data), "from": "git"}
                else:
                    item.before = {"kind": images.FILE, "mode": mode & 0o777, "size": len(data)}
                    item.before["from"] = "git"
                    item.data["before"] = data
        for item in pending:
            if item.before.get("why") == images.NOT_CAPTURED and item.root in captured:
                item.before = images.unknown(captured[item.root].why_not(item.rel))
            self.store(item, "before", budget)
        self.post_images(pending, identity, budget)

    def post_images(
        self, pending: list[Pending], identity: FsIdentity | None, budget: Budget
    ) -> None:
        """Each path as it is now, stored as its image after (a worker thread's job)."""
        for item in pending:
            if item.kind != "deleted":
                item.after, seen = images.look(item.root, item.rel, identity, budget.file)
                if seen is not None:
                    item.data["after"] = seen
            self.store(item, "after", budget)

    def store(self, item: Pending, side: str, budget: Budget) -> None:
        image: Image = getattr(item, side)
        data = item.data.pop(side, None)
        if image["kind"] != images.FILE or image.get("blob") or image.get("why"):
            return
        if data is None or not budget.take(len(data)):
            image["why"] = images.TOO_LARGE if data is not None else images.NOT_CAPTURED
            return
        image["blob"], _ = self.blobs.put(item.root, data)

    # ---- a file tool
    async def record_file(
        self,
        session: Session,
        *,
        tool_use_id: str,
        tool_name: str,
        root: str,
        rel: str,
        identity: FsIdentity | None,
        before: tuple[bytes, int] | None,
    ) -> Row | None:
        """The checkpoint of a file tool's write: `before` is what it overwrote (its
        content and mode), None for a new file."""
        if before is None:
            item = Pending(root, rel, "added", images.none())
        else:
            data, mode = before
            image = {"kind": images.FILE, "mode": mode & 0o7777, "size": len(data)}
            item = Pending(root, rel, "changed", image, data={"before": data})
        budget = self.budget(session.id)
        await asyncio.to_thread(self._images, [item], identity, budget)
        body = {"files": [item.entry()], "stored": budget.stored}
        return self.save(session, tool_use_id, tool_name, body, "call")

    # ---- rows and the event
    def save(
        self,
        session: Session,
        tool_use_id: str,
        tool_name: str,
        body: dict[str, Any],
        action: str,
        *,
        by: str = "",
        state: str = DONE,
        seq: int = 0,
    ) -> Row:
        body.setdefault("action", action)
        row = Row(
            session.id,
            seq or self.rows.next_seq(session.id),
            tool_use_id,
            tool_name,
            state,
            int(time.time() * 1000),
            body,
        )
        self.rows.save(row, now=state != DONE)
        if state == DONE and session.id in self._stored:
            self._stored[session.id] += int(body.get("stored", 0))
        if state == DONE:
            self.announce(row, action, by)
        return row

    def announce(self, row: Row, action: str, by: str = "") -> None:
        """The files_changed event every attached terminal sees."""
        entries = row.body.get("files", [])
        counts = {k: sum(1 for e in entries if e["kind"] == k) for k in _SIGN}
        unrestorable = sum(
            1
            for e in entries
            if not (images.restorable(e["before"]) and images.restorable(e["after"]))
        )
        self._sessions.log(row.session_id).emit(
            FilesChanged(
                tool_use_id=row.tool_use_id,
                tool_name=row.tool_name,
                checkpoint=row.seq,
                added=counts["added"],
                changed=counts["changed"],
                deleted=counts["deleted"],
                paths=[_SIGN[e["kind"]] + images.shown(e["path"]) for e in entries[:EVENT_PATHS]],
                not_restorable=unrestorable,
                action=action,
                by=by,
            )
        )
