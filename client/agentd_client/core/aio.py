"""AsyncClient: Client's twin on asyncio, the same methods with the same signatures.

Requests and replies come from _calls, as Client's do; only the awaiting differs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import grpc

from agentd_client.core import calls as rpc
from agentd_client.core.approver import AsyncApprover, AsyncDecide
from agentd_client.core.calls import Event, Session, Task, ToolResult
from agentd_client.core.channel import open_channel
from agentd_client.core.client import DEFAULT_TIMEOUT, _Base
from agentd_client.core.errors import from_grpc
from agentd_client.core.status import Status
from agentd_client.v1 import agentd_pb2 as pb
from agentd_client.v1 import agentd_pb2_grpc as pb_grpc

T = TypeVar("T")


class AsyncStream(Generic[T]):
    """A server stream whose failures are typed errors; cancel() stops listening."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._it: AsyncIterator[T] | None = None

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        if self._it is None:
            self._it = self._call.__aiter__()
        try:
            return await self._it.__anext__()
        except grpc.RpcError as exc:
            raise from_grpc(exc) from exc

    def cancel(self) -> bool:
        return self._call.cancel()

    async def wait_attached(self) -> bool:
        """For an attach: return once the daemon counts it (it then misses no event and
        asks reach it); False if the stream ended first."""
        try:
            metadata = await self._call.initial_metadata() or ()
        except grpc.RpcError as exc:
            raise from_grpc(exc) from exc
        return any(key == rpc.ATTACHED_KEY for key, _ in metadata)


class AsyncClient(_Base):
    """The same calls on asyncio. `async with AsyncClient() as c:`; see Client."""

    def __init__(
        self,
        socket: str | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        tool_timeout: float | None = None,
        address: str | None = None,
        server_name: str = "",
        token: str = "",
        root_certificates: bytes | None = None,
        wait_for_ready: bool = True,
    ) -> None:
        super().__init__(timeout, tool_timeout, wait_for_ready)
        self.channel = open_channel(
            grpc.aio, socket, address, token, root_certificates, server_name
        )
        self.stub = pb_grpc.AgentdStub(self.channel)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def _unary(self, call: rpc.Call, timeout: float | None) -> Any:
        try:
            reply = await getattr(self.stub, call.rpc)(call.request, **self._options(call, timeout))
        except grpc.RpcError as exc:
            raise from_grpc(exc) from exc
        return call.parse(reply)

    def _stream(self, call: rpc.Call, timeout: float | None) -> AsyncStream[Any]:
        return AsyncStream(
            getattr(self.stub, call.rpc)(call.request, **self._options(call, timeout))
        )

    async def status(self, *, timeout: float | None = None) -> Status:
        return await self._unary(rpc.status(), timeout)

    async def create_session(
        self,
        workspace: str | Sequence[str],
        *,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        name: str = "",
        labels: Mapping[str, str] | None = None,
        permission_mode: str = "",
        allow_network: bool = False,
        network: str = "",
        ask_timeout: float = 0,
        review: bool = False,
        timeout: float | None = None,
    ) -> Session:
        """`ask_timeout`: seconds its asks wait for an answer (0: the daemon's).
        `review`: writing Bash calls' changes wait for a person (ListPendingChanges)."""
        call = rpc.create_session(
            workspace,
            cwd,
            env,
            name,
            labels,
            permission_mode,
            allow_network,
            network,
            ask_timeout,
            review,
        )
        return await self._unary(call, timeout)

    async def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        return await self._unary(rpc.get_session(session_id), timeout)

    async def list_sessions(
        self, include_closed: bool = False, *, timeout: float | None = None
    ) -> list[Session]:
        return await self._unary(rpc.list_sessions(include_closed), timeout)

    async def close_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        return await self._unary(rpc.close_session(session_id), timeout)

    async def collect_sessions(
        self,
        idle_seconds: float | None = None,
        reap_after_seconds: float | None = None,
        *,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> list[pb.CollectedSession]:
        """Close sessions idle longer than `idle_seconds` and delete closed ones closed
        longer than `reap_after_seconds` (None: the daemon's settings; 0: all of them
        now). Sessions with running tasks are kept."""
        call = rpc.collect_sessions(idle_seconds, reap_after_seconds, dry_run)
        return await self._unary(call, timeout)

    async def update_permissions(
        self,
        session_id: str,
        *,
        mode: str = "",
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        ask: Sequence[str] = (),
        ask_timeout: float | None = None,
        timeout: float | None = None,
    ) -> Session:
        call = rpc.update_permissions(session_id, mode, allow, deny, ask, ask_timeout)
        return await self._unary(call, timeout)

    async def list_tools(
        self, *, hints: bool = False, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        return await self._unary(rpc.list_tools(hints), timeout)

    def stream_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
        *,
        ask_timeout: float = 0,
        timeout: float | None = None,
    ) -> AsyncStream[pb.ToolCallUpdate]:
        """Progress updates, then the result; `async for` them, cancel() to stop."""
        return self._stream(
            rpc.stream_tool(session_id, name, input, tool_use_id, ask_timeout), timeout
        )

    async def run_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
        *,
        ask_timeout: float = 0,
        timeout: float | None = None,
    ) -> ToolResult:
        return await self._unary(
            rpc.run_tool(session_id, name, input, tool_use_id, ask_timeout), timeout
        )

    async def run_tools(
        self, session_id: str, calls: Iterable[Any], *, timeout: float | None = None
    ) -> list[ToolResult]:
        """See Client.run_tools: results in call order, with the calls' own ids."""
        call = rpc.run_tools(session_id, calls)
        updates = [u async for u in self._stream(call, timeout)]
        assert call.finish is not None
        return call.finish(updates)

    async def cancel(
        self, session_id: str, tool_use_id: str, *, timeout: float | None = None
    ) -> bool:
        return await self._unary(rpc.cancel(session_id, tool_use_id), timeout)

    def attach(
        self,
        session_id: str,
        after_seq: int = 0,
        follow: bool = True,
        *,
        timeout: float | None = None,
    ) -> AsyncStream[Event]:
        """The session's events after `after_seq`, then live ones; cancel() to stop.
        `await wait_attached()` on the stream returns once the daemon counts it. Without
        `follow`, the journal up to its latest event, then the end."""
        call = rpc.attach(session_id, after_seq, follow)
        return AsyncStream(self.stub.Attach(call.request, timeout=timeout))

    def read_output(
        self,
        session_id: str,
        id: str,
        offset: int = 0,
        follow: bool = False,
        *,
        timeout: float | None = None,
    ) -> AsyncStream[pb.OutputChunk]:
        """A Bash call's (tool_use_id) or task's output from `offset`; with `follow`, until
        it ends. Moves nobody's BashOutput cursor. cancel() to stop."""
        call = rpc.read_output(session_id, id, offset, follow)
        return AsyncStream(self.stub.ReadOutput(call.request, timeout=timeout))

    async def resolve_permission(
        self,
        session_id: str,
        request_id: str,
        decision: str,
        scope: str = "once",
        rule: str = "",
        *,
        timeout: float | None = None,
    ) -> pb.ResolvePermissionResponse:
        """Answer a request; with scope always, `rule` picks one of its rule_choices."""
        call = rpc.resolve_permission(session_id, request_id, decision, scope, rule)
        return await self._unary(call, timeout)

    async def append_agent_event(
        self, session_id: str, event: pb.AgentEvent, *, timeout: float | None = None
    ) -> int:
        """Keep one event of an agent loop's conversation in the session (agentctl agent);
        attached clients see it. Returns its seq."""
        return await self._unary(rpc.append_agent_event(session_id, event), timeout)

    async def list_tasks(
        self, session_id: str, include_finished: bool = True, *, timeout: float | None = None
    ) -> list[Task]:
        return await self._unary(rpc.list_tasks(session_id, include_finished), timeout)

    async def list_checkpoints(
        self, session_id: str, *, timeout: float | None = None
    ) -> list[pb.Checkpoint]:
        """The session's writing calls that changed files, oldest first."""
        return await self._unary(rpc.list_checkpoints(session_id), timeout)

    async def diff_checkpoint(
        self,
        session_id: str,
        tool_use_id: str,
        *,
        since: bool = False,
        to: str = "",
        fmt: str = "stat",
        paths: list[str] | None = None,
        timeout: float | None = None,
    ) -> pb.DiffCheckpointResponse:
        """What a call changed (`since`: it and every call after, to now or to `to`)."""
        call = rpc.diff_checkpoint(session_id, tool_use_id, since, to, fmt, paths or [])
        return await self._unary(call, timeout)

    async def restore_checkpoint(
        self,
        session_id: str,
        tool_use_id: str,
        paths: list[str] | None = None,
        *,
        dry_run: bool = False,
        on_conflict: str = "",
        timeout: float | None = None,
    ) -> pb.RestoreCheckpointResponse:
        """Put the paths a call changed back as they were before it."""
        call = rpc.restore_checkpoint(session_id, tool_use_id, paths or [], dry_run, on_conflict)
        return await self._unary(call, timeout)

    async def list_pending_changes(
        self, session_id: str, *, fmt: str = "unified", timeout: float | None = None
    ) -> pb.PendingChanges:
        """The change set waiting for review in a session in review mode (id 0: none)."""
        return await self._unary(rpc.list_pending_changes(session_id, fmt), timeout)

    async def resolve_pending_changes(
        self,
        session_id: str,
        pending_id: int,
        action: str,
        *,
        force: bool = False,
        by: str = "",
        timeout: float | None = None,
    ) -> pb.ResolvePendingChangesResponse:
        """Apply ("apply") or discard ("discard") the change set `pending_id`."""
        call = rpc.resolve_pending_changes(session_id, pending_id, action, force, by)
        return await self._unary(call, timeout)

    async def rewind_to_call(
        self,
        session_id: str,
        tool_use_id: str,
        *,
        dry_run: bool = False,
        on_conflict: str = "",
        timeout: float | None = None,
    ) -> pb.RestoreCheckpointResponse:
        """Undo a call and every call after it."""
        return await self._unary(
            rpc.rewind_to_call(session_id, tool_use_id, dry_run, on_conflict), timeout
        )

    async def classify(self, command: str, *, timeout: float | None = None) -> dict[str, Any]:
        return await self._unary(rpc.classify(command), timeout)

    async def list_trust(
        self, path: str = "", *, timeout: float | None = None
    ) -> list[pb.TrustEntry]:
        """Trusted settings contents, and the settings files of open sessions (or `path`)."""
        return await self._unary(rpc.list_trust(path), timeout)

    async def list_credentials(self, *, timeout: float | None = None) -> pb.ListCredentialsResponse:
        """Credential sources and routes, and which sessions used them (never a secret)."""
        return await self._unary(rpc.list_credentials(), timeout)

    async def approve_trust(
        self, path: str, sha256: str, *, timeout: float | None = None
    ) -> pb.TrustEntry:
        """Trust exactly this content of a settings file; refused if the file holds other."""
        return await self._unary(rpc.approve_trust(path, sha256), timeout)

    async def revoke_trust(
        self, path: str, sha256: str = "", *, timeout: float | None = None
    ) -> list[pb.TrustEntry]:
        """Drop approvals of a settings file (every content, or only `sha256`)."""
        return await self._unary(rpc.revoke_trust(path, sha256), timeout)

    def approver(self, session_id: str, decide: AsyncDecide) -> AsyncApprover:
        """`async with c.approver(sid, decide):` -- see Client.approver."""
        return AsyncApprover(self, session_id, decide)
