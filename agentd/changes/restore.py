"""Restoring a checkpoint: each path put back as it was before a call (restore), or
before a call and every call after it (rewind).

A restore is planned first: for each path, the image to make it (the call's
pre-image; for a rewind the pre-image of the first call from there that changed it)
and a conflict, if any: the path is no longer what the last checkpoint left (changed
outside the agent since), a later call changed it again (a restore of one call only),
or a background task of the session still runs and may write it. On a conflict the
policy decides: refuse the whole restore (the default), skip those paths, or
overwrite. A path whose pre-image is unknown or too large is never touched and says
why.

Applying it is itself a writing call: its intent (the plan, with every path's image
now as its pre-image, stored) is committed to the journal before the workspace is
touched; each path is made so by putback.py as the session's identity; then the row
becomes the restore's own checkpoint, so a restore can be rewound like any call.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentd.changes import images, putback
from agentd.changes.checkpoints import Budget, Checkpoints, Pending
from agentd.changes.images import Image
from agentd.foundation.errors import InvalidRequest, NotFound
from agentd.fs.identity import FsIdentity
from agentd.fs.temp_ledger import TempLedger
from agentd.sessions.checkpoint_rows import DONE, RESTORING, Row
from agentd.sessions.session import Session

REFUSE, SKIP, OVERWRITE = "refuse", "skip", "overwrite"
# Files written at once by a restore.
_WRITERS = 16
POLICIES = (REFUSE, SKIP, OVERWRITE)
OUTSIDE = "changed outside the agent since its last checkpoint"
LATER = "changed again by a later call (checkpoint {}); rewind to undo both"
TASK = "a command of this session is still running (run {}) and may write it"


@dataclass
class Step:
    root: str
    rel: str
    to: Image
    conflict: str = ""
    now: Image = field(default_factory=images.none)

    @property
    def action(self) -> str:
        kind = self.to["kind"]
        if not images.restorable(self.to) or images.same(self.to, self.now):
            return "none"
        return {images.FILE: "write", images.LINK: "link", images.DIR: "mkdir"}.get(kind, "remove")


@dataclass
class Plan:
    steps: list[Step]
    of: Row
    rewind: bool

    def conflicts(self) -> list[Step]:
        return [s for s in self.steps if s.conflict]


def find(rows: list[Row], tool_use_id: str) -> Row:
    for row in reversed(rows):
        if row.tool_use_id == tool_use_id:
            return row
    raise NotFound(
        f"no checkpoint of call {tool_use_id[:100]!r} in this session: "
        "`agentctl checkpoints SESSION` lists the calls that changed files"
    )


async def plan(
    checkpoints: Checkpoints,
    session: Session,
    identity: FsIdentity | None,
    tool_use_id: str,
    *,
    rewind: bool,
    paths: list[str],
    running: list[str],
) -> Plan:
    """What a restore of `tool_use_id` would do, each path with its conflict."""
    rows = [r for r in checkpoints.rows.list(session.id) if r.state == DONE]
    row = find(rows, tool_use_id)
    wanted: dict[tuple[str, str], Image] = {}
    last_seq: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.seq < row.seq or (r.seq > row.seq and not rewind):
            if r.seq > row.seq:
                for e in r.body.get("files", []):
                    last_seq[(e["root"], e["path"])] = r.seq
            continue
        for e in r.body.get("files", []):
            wanted.setdefault((e["root"], e["path"]), e["before"])
    if paths:
        picked = {k: v for k, v in wanted.items() if matches(k, paths)}
        if not picked:
            raise InvalidRequest(
                "none of the paths given was changed by that call: "
                "`agentctl diff SESSION CALL` names the paths it changed"
            )
        wanted = picked
    steps = [Step(root, rel, to) for (root, rel), to in sorted(wanted.items())]
    await asyncio.to_thread(look_all, steps, identity, checkpoints)
    for step in steps:
        key = (step.root, step.rel)
        if not images.restorable(step.to):
            step.conflict = step.to.get("why") or images.NOT_CAPTURED
        elif running:
            step.conflict = TASK.format(running[0])
        elif not rewind and key in last_seq:
            step.conflict = LATER.format(last_seq[key])
        else:
            expected = checkpoints.rows.last_after(step.root, step.rel)
            if expected is not None and differs(expected, step.now):
                step.conflict = OUTSIDE
    return Plan(steps, row, rewind)


def differs(expected: Image, now: Image) -> bool:
    """Whether the path is no longer what the last checkpoint left (a file whose content
    was not kept is compared by kind, mode and size)."""
    if expected["kind"] == images.FILE and not expected.get("blob"):
        keys = ("kind", "mode", "size")
        return any(expected.get(k) != now.get(k) for k in keys)
    return not images.same(expected, now)


def matches(key: tuple[str, str], paths: list[str]) -> bool:
    root, rel = key
    full = f"{root.rstrip('/')}/{rel}"
    return any(p in (rel, full) or rel.startswith(p.rstrip("/") + "/") for p in paths)


def look_all(steps: list[Step], identity: FsIdentity | None, checkpoints: Checkpoints) -> None:
    """Each path's image now (its content hashed, not stored yet)."""
    for step in steps:
        now, data = images.look(step.root, step.rel, identity, checkpoints.cap)
        if data is not None:
            now["blob"] = checkpoints.blobs.digest(data)
        step.now = now


async def apply(
    checkpoints: Checkpoints,
    session: Session,
    identity: FsIdentity | None,
    the_plan: Plan,
    *,
    on_conflict: str,
    by: str,
    ledger: TempLedger | None,
) -> tuple[Row | None, list[Step]]:
    """Carry a plan out (the caller has refused it on conflicts when the policy says);
    the restore's own checkpoint and the steps done."""
    todo = [
        s
        for s in the_plan.steps
        if s.action != "none"
        and images.restorable(s.to)
        and not (s.conflict and on_conflict != OVERWRITE)
    ]
    if not todo:
        return None, []
    budget = checkpoints.budget(session.id)
    pending = await asyncio.to_thread(pre_images, checkpoints, todo, identity, budget)
    action = "rewind" if the_plan.rewind else "restore"
    tool_use_id = f"{action}-{secrets.token_hex(6)}"
    body: dict[str, Any] = {
        "files": [p.entry() for p in pending],
        "of": the_plan.of.tool_use_id,
        "action": action,
        "by": by,
        "stored": budget.stored,
    }
    name = "RewindToCall" if the_plan.rewind else "RestoreCheckpoint"
    intent = checkpoints.save(session, tool_use_id, name, body, action, by=by, state=RESTORING)
    failed = await asyncio.to_thread(put_all, checkpoints, todo, identity, ledger)
    for item in pending:  # what each path is now: the restore's post-images
        item.after = images.none()
    await asyncio.to_thread(checkpoints.post_images, pending, identity, budget)
    body["files"] = [p.entry() for p in pending]
    body["stored"] = budget.stored
    if failed:
        body["failed"] = failed
    row = checkpoints.save(session, tool_use_id, name, body, action, by=by, seq=intent.seq)
    return row, todo


def pre_images(
    checkpoints: Checkpoints, todo: list[Step], identity: FsIdentity | None, budget: Budget
) -> list[Pending]:
    """Each path as it is now, stored: the restore's pre-images."""
    out: list[Pending] = []
    for step in todo:
        now, data = images.look(step.root, step.rel, identity, budget.file)
        kind = "added" if now["kind"] == images.NONE else "changed"
        if step.to["kind"] == images.NONE:
            kind = "deleted"
        item = Pending(step.root, step.rel, kind, now)
        if data is not None:
            item.data["before"] = data
        checkpoints.store(item, "before", budget)
        out.append(item)
    return out


def put_all(
    checkpoints: Checkpoints,
    todo: list[Step],
    identity: FsIdentity | None,
    ledger: TempLedger | None,
) -> dict[str, str]:
    """Removals deepest first, then directories top down, then files and links, those
    at once on a few threads (each write is synced: together the filesystem commits
    them in one go); then each directory once."""

    def order(step: Step) -> tuple[int, int]:
        depth = step.rel.count("/")
        if step.to["kind"] == images.NONE:
            return (0, -depth)
        return (1, depth)

    failed: dict[str, str] = {}

    def one(step: Step) -> None:
        data = None
        if step.to["kind"] == images.FILE:
            data = checkpoints.blobs.get(step.root, step.to["blob"])
        try:
            putback.put(step.root, step.rel, step.to, data, identity, ledger)
        except putback.Refused as exc:
            failed[step.rel] = str(exc)
        except OSError as exc:
            failed[step.rel] = exc.strerror or str(exc)

    contents = [s for s in todo if s.to["kind"] in (images.FILE, images.LINK)]
    for step in sorted((s for s in todo if s not in contents), key=order):
        one(step)
    with ThreadPoolExecutor(_WRITERS) as pool:
        list(pool.map(one, contents))
    by_root: dict[str, set[str]] = {}
    for step in todo:
        by_root.setdefault(step.root, set()).add(os.path.dirname(step.rel))
    for root, dirs in by_root.items():
        putback.sync_dirs(root, dirs, identity)
    return failed
