"""Checkpoints over the API: ListCheckpoints, DiffCheckpoint, RestoreCheckpoint,
RewindToCall (`agentctl checkpoints|diff|restore|rewind`). Every field is checked here;
the work is agentd/changes/ (checkpoints.py, diffs.py, restore.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.api.handlers.rpc import client_identity, require, unary
from agentd.changes import diffs, images, restore
from agentd.changes.service import ChangeTracker
from agentd.foundation.config import Config
from agentd.foundation.errors import FailedPrecondition, InvalidRequest
from agentd.fs.temp_ledger import TempLedger
from agentd.sandboxing import policy as sandbox_policy
from agentd.sessions.checkpoint_rows import Row
from agentd.sessions.session import Session, SessionManager
from agentd_client.v1 import agentd_pb2 as pb

MAX_ID = 200
MAX_PATHS = 1000
MAX_PATH = 4096


def image_pb(image: dict[str, Any]) -> pb.FileImage:
    return pb.FileImage(
        kind=image["kind"],
        mode=int(image.get("mode", 0)),
        size=int(image.get("size", 0)),
        sha256=str(image.get("blob", "")),
        target=images.shown(str(image.get("target", ""))),
        why=str(image.get("why", "")),
    )


def file_pb(d: diffs.FileDiff) -> pb.CheckpointFile:
    return pb.CheckpointFile(
        root=images.shown(d.root),
        path=images.shown(d.rel),
        change=d.change,
        before=image_pb(d.before),
        after=image_pb(d.after),
    )


def _checkpoint(row: Row) -> pb.Checkpoint:
    entries = row.body.get("files", [])
    counts = {k: sum(1 for e in entries if e["kind"] == k) for k in ("added", "changed", "deleted")}
    lost = sum(1 for e in entries if not images.restorable(e["before"]))
    note = str(row.body.get("incomplete", ""))
    if failed := row.body.get("failed"):
        note = f"{len(failed)} path(s) could not be restored"
    if of := row.body.get("of"):
        note = f"undoes {of}" + (f" ({note})" if note else "")
    return pb.Checkpoint(
        seq=row.seq,
        tool_use_id=row.tool_use_id,
        tool_name=row.tool_name,
        state=row.state,
        time_ms=row.time_ms,
        added=counts["added"],
        changed=counts["changed"],
        deleted=counts["deleted"],
        not_restorable=lost,
        action=str(row.body.get("action", "call")),
        note=note,
    )


def _id(value: str, what: str) -> str:
    require(value, what)
    if len(value) > MAX_ID or "\0" in value:
        raise InvalidRequest(f"{what} is not a call's id (at most {MAX_ID} characters, no NUL)")
    return value


def _paths(paths: Any) -> list[str]:
    if len(paths) > MAX_PATHS:
        raise InvalidRequest(f"at most {MAX_PATHS} paths may be given at once; give fewer")
    for p in paths:
        if not p or len(p) > MAX_PATH or "\0" in p:
            raise InvalidRequest("a path is empty, longer than 4096 characters or has a NUL")
    return [p.rstrip("/") or p for p in paths]


def who(said: str, context: Any) -> str:
    """Who asked, as the transport says (a client cannot name someone else); what it
    said of itself (a script's name) after it."""
    who = client_identity(context)
    return f"{who} for {said[:60]}" if said else who


def _policy(value: str) -> str:
    value = value or restore.REFUSE
    if value not in restore.POLICIES:
        raise InvalidRequest(f"on_conflict must be one of {', '.join(restore.POLICIES)}")
    return value


class CheckpointHandlers:
    def __init__(
        self,
        sessions: SessionManager,
        tracker: ChangeTracker,
        config: Config,
        ledger: TempLedger | None,
    ) -> None:
        self.sessions = sessions
        self.tracker = tracker
        self.config = config
        self.ledger = ledger
        self.locks: dict[str, asyncio.Lock] = {}

    def _service(self) -> Any:
        if self.tracker.checkpoints is None:
            raise FailedPrecondition("this daemon keeps no checkpoints")
        return self.tracker.checkpoints

    def _session(self, session_id: str) -> Session:
        return self.sessions.get(require(session_id, "session_id"))

    @unary
    async def ListCheckpoints(
        self, request: pb.ListCheckpointsRequest, context: Any
    ) -> pb.ListCheckpointsResponse:
        session = self._session(request.session_id)
        rows = self._service().rows.list(session.id)
        return pb.ListCheckpointsResponse(checkpoints=[_checkpoint(r) for r in rows])

    @unary
    async def DiffCheckpoint(
        self, request: pb.DiffCheckpointRequest, context: Any
    ) -> pb.DiffCheckpointResponse:
        session = self._session(request.session_id)
        tool_use_id = _id(request.tool_use_id, "tool_use_id")
        fmt = request.format or "stat"
        if fmt not in diffs.FORMATS:
            raise InvalidRequest(f"format must be one of {', '.join(diffs.FORMATS)}")
        paths = _paths(request.paths)
        if request.to_tool_use_id and not request.since:
            raise InvalidRequest("to_tool_use_id needs since (a range of calls)")
        service = self._service()
        rows = service.rows.list(session.id)
        first = restore.find(rows, tool_use_id)
        last = (
            restore.find(rows, _id(request.to_tool_use_id, "to"))
            if request.to_tool_use_id
            else None
        )
        found = diffs.collect(rows, first, since=request.since, last=last)
        if paths:
            found = [d for d in found if restore.matches((d.root, d.rel), paths)]
        contents: dict[str, bytes] = {}
        if request.since and last is None:
            identity = sandbox_policy.fs_identity(session, self.config)
            contents = await asyncio.to_thread(diffs.against_now, found, identity, service.cap)
        text = await asyncio.to_thread(diffs.render, found, fmt, service.blobs, contents)
        return pb.DiffCheckpointResponse(
            files=[file_pb(d) for d in found if d.change != "none"],
            text=images.shown(text),
        )

    @unary
    async def RestoreCheckpoint(
        self, request: pb.RestoreCheckpointRequest, context: Any
    ) -> pb.RestoreCheckpointResponse:
        return await self._restore(
            request.session_id,
            request.tool_use_id,
            rewind=False,
            dry_run=request.dry_run,
            paths=_paths(request.paths),
            on_conflict=_policy(request.on_conflict),
            by=who(request.by, context),
        )

    @unary
    async def RewindToCall(
        self, request: pb.RewindToCallRequest, context: Any
    ) -> pb.RestoreCheckpointResponse:
        return await self._restore(
            request.session_id,
            request.tool_use_id,
            rewind=True,
            dry_run=request.dry_run,
            paths=[],
            on_conflict=_policy(request.on_conflict),
            by=who(request.by, context),
        )

    async def _ask(
        self, session: Session, the_plan: restore.Plan, on_conflict: str, by: str
    ) -> None:
        """A restore that would write files that make code run later asks a person, as
        a command's change to one is held and asked about: without a yes (nobody
        attached, a no, no answer in time) those paths are left as they are."""
        held = restore.code_bearing(restore.to_do(the_plan, on_conflict))
        if not held:
            return
        of = the_plan.of.tool_use_id
        asked = await asyncio.to_thread(restore.ask_input, self._service(), held, by, of)
        refused = await self.tracker.ask_person(
            session,
            tool_use_id=of,
            tool_name=restore.RESTORE_PROMPT,
            tool_input=asked,
            reasons=restore.ask_reasons(held, by, of),
        )
        for step, name in held:
            if refused:
                step.held = f"it makes code run later ({name}) and {refused}"

    async def _restore(
        self,
        session_id: str,
        tool_use_id: str,
        *,
        rewind: bool,
        dry_run: bool,
        paths: list[str],
        on_conflict: str,
        by: str,
    ) -> pb.RestoreCheckpointResponse:
        session = self._session(session_id)
        tool_use_id = _id(tool_use_id, "tool_use_id")
        if session.closed and not dry_run:
            raise FailedPrecondition(
                f"session {session.label} is closed; its files are not restored"
            )
        service = self._service()
        identity = sandbox_policy.fs_identity(session, self.config)
        async with self.locks.setdefault(session.id, asyncio.Lock()):
            running = self.tracker.running(session.id)
            the_plan = await restore.plan(
                service, session, identity, tool_use_id, rewind=rewind, paths=paths, running=running
            )
            conflicts = [s for s in the_plan.conflicts() if images.restorable(s.to)]
            out = _paths_of(the_plan)
            if dry_run:
                message = _summary(the_plan, False)
                if asked := restore.code_bearing(restore.to_do(the_plan, on_conflict)):
                    message += (
                        f"; {len(asked)} of them make code run later: a person attached to the "
                        "session is asked first"
                    )
                return pb.RestoreCheckpointResponse(paths=out, message=message)
            if conflicts and on_conflict == restore.REFUSE:
                first = conflicts[0]
                return pb.RestoreCheckpointResponse(
                    paths=out,
                    message=f"refused: {images.shown(first.rel)} {first.conflict}; nothing "
                    f"was changed ({len(conflicts)} conflict(s); --force overwrites, --skip "
                    "leaves them)",
                )
            await self._ask(session, the_plan, on_conflict, by)
            out = _paths_of(the_plan)
            row, _ = await restore.apply(
                service,
                session,
                identity,
                the_plan,
                on_conflict=on_conflict,
                by=by,
                ledger=self.ledger,
            )
        message = _summary(the_plan, True)
        if row is not None and (failed := row.body.get("failed")):
            message += "; not restored: " + "; ".join(
                f"{images.shown(p)}: {why}" for p, why in list(failed.items())[:5]
            )
        return pb.RestoreCheckpointResponse(
            paths=out, applied=row is not None, checkpoint=row.seq if row else 0, message=message
        )


def _paths_of(the_plan: restore.Plan) -> list[pb.RestorePath]:
    return [
        pb.RestorePath(
            root=images.shown(s.root),
            path=images.shown(s.rel),
            action=s.action,
            conflict=s.held or s.conflict,
            to=image_pb(s.to),
        )
        for s in the_plan.steps
    ]


def _summary(the_plan: restore.Plan, applied: bool) -> str:
    acting = [s for s in the_plan.steps if s.action != "none" and not s.conflict and not s.held]
    stuck = [s for s in the_plan.steps if s.conflict]
    held = [s for s in the_plan.steps if s.held]
    verb = "restored" if applied else "would restore"
    text = f"{verb} {len(acting)} path(s)"
    if stuck:
        text += f"; {len(stuck)} path(s) conflict or cannot be restored"
    if held:
        text += (
            f"; {len(held)} path(s) left as they are: {held[0].held} (restore them again "
            "while a person is attached to answer: `agentctl attach SESSION`)"
        )
    return text
