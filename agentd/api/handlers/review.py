"""Review mode over the API: ListPendingChanges, ResolvePendingChanges (`agentctl
review`). Every field is checked here; the work is agentd/changes/review.py's."""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.api.handlers.checkpoints import file_pb, image_pb, who
from agentd.api.handlers.rpc import require, unary
from agentd.changes import diffs, images
from agentd.changes.review import CHANGED, Reviews
from agentd.changes.service import ChangeTracker
from agentd.foundation.config import Config
from agentd.foundation.errors import FailedPrecondition, InvalidRequest
from agentd.fs.temp_ledger import TempLedger
from agentd.sandboxing import policy as sandbox_policy
from agentd.sessions.session import Session, SessionManager
from agentd_client.v1 import agentd_pb2 as pb

ACTIONS = ("apply", "discard")


class ReviewHandlers:
    def __init__(
        self,
        sessions: SessionManager,
        tracker: ChangeTracker,
        config: Config,
        ledger: TempLedger | None,
        locks: dict[str, asyncio.Lock],
    ) -> None:
        self.sessions = sessions
        self.tracker = tracker
        self.config = config
        self.ledger = ledger
        # Shared with restores: one writer of a session's workspace at a time.
        self.locks = locks

    def _reviews(self) -> Reviews:
        if self.tracker.reviews is None:
            raise FailedPrecondition("this daemon keeps no checkpoints, so no review mode")
        return self.tracker.reviews

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(require(session_id, "session_id"))
        if not session.review:
            raise FailedPrecondition(
                f"session {session.label} is not in review mode; its changes apply at once "
                "(`agentctl checkpoints SESSION` lists them)"
            )
        return session

    @unary
    async def ListPendingChanges(
        self, request: pb.ListPendingChangesRequest, context: Any
    ) -> pb.PendingChanges:
        session = self._session(request.session_id)
        fmt = request.format or "unified"
        if fmt not in diffs.FORMATS:
            raise InvalidRequest(f"format must be one of {', '.join(diffs.FORMATS)}")
        reviews = self._reviews()
        row = reviews.pending(session.id)
        if row is None:
            return pb.PendingChanges()
        found = diffs.collect([row], row, since=False, last=None)
        blobs = reviews.checkpoints.blobs
        text = await asyncio.to_thread(diffs.render, found, fmt, blobs, {})
        if note := row.body.get("incomplete"):
            text = f"{text}\n(incomplete: {note})"
        return pb.PendingChanges(
            id=row.seq,
            tool_use_id=row.tool_use_id,
            command=images.shown(str(row.body.get("command", ""))),
            files=[file_pb(d) for d in found],
            text=images.shown(text),
            time_ms=row.time_ms,
        )

    @unary
    async def ResolvePendingChanges(
        self, request: pb.ResolvePendingChangesRequest, context: Any
    ) -> pb.ResolvePendingChangesResponse:
        session = self._session(request.session_id)
        if request.action not in ACTIONS:
            raise InvalidRequest(f"action must be one of {', '.join(ACTIONS)}")
        if not request.id:
            raise InvalidRequest("id is required: the PendingChanges.id ListPendingChanges gave")
        if len(request.by) > 200 or "\0" in request.by:
            raise InvalidRequest("by is at most 200 characters, with no NUL")
        by = who(request.by, context)
        reviews = self._reviews()
        async with self.locks.setdefault(session.id, asyncio.Lock()):
            row = reviews.find(session, request.id)
            if request.action == "discard":
                reviews.discard(session, row, by)
                return pb.ResolvePendingChangesResponse(
                    discarded=True, message=f"discarded {len(row.body['files'])} path(s)"
                )
            if session.closed:
                raise FailedPrecondition(
                    f"session {session.label} is closed; discard its change set instead"
                )
            if row.body.get("incomplete"):
                raise FailedPrecondition(
                    "this change set is incomplete (too many paths) and cannot be applied; "
                    "discard it"
                )
            identity = sandbox_policy.fs_identity(session, self.config)
            steps = await reviews.plan(row, identity)
            out = [
                pb.RestorePath(
                    root=images.shown(s.root),
                    path=images.shown(s.rel),
                    action=s.action,
                    conflict=s.conflict,
                    to=image_pb(s.to),
                )
                for s in steps
            ]
            stuck = [s for s in steps if s.conflict == CHANGED]
            if stuck and not request.force:
                first = images.shown(stuck[0].rel)
                return pb.ResolvePendingChangesResponse(
                    paths=out,
                    message=f"refused: {first} changed in the workspace since the command ran "
                    f"({len(stuck)} path(s)); nothing was changed (--force applies over them)",
                )
            done, failed = await reviews.apply(
                session, row, steps, identity, force=request.force, by=by, ledger=self.ledger
            )
        written = len(done.body.get("files", []))
        message = f"applied {written} path(s) as checkpoint {done.seq}"
        if failed:
            message += "; not applied: " + "; ".join(
                f"{images.shown(p)}: {why}" for p, why in list(failed.items())[:5]
            )
        if skipped := [s for s in steps if s.conflict and not images.restorable(s.to)]:
            message += f"; {len(skipped)} path(s) could not be applied (see paths)"
        return pb.ResolvePendingChangesResponse(
            paths=out, applied=True, checkpoint=done.seq, message=message
        )
