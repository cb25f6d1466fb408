"""Client: the daemon's calls, blocking. Its twin AsyncClient (in _aio.py) has the same
methods with the same signatures; both read their requests and replies from _calls.

Needs grpcio and protobuf only; imports nothing of the daemon.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import grpc

from agentd_client.core import calls as rpc
from agentd_client.core.approver import Approver, Decide
from agentd_client.core.calls import Event, Session, Task, ToolResult
from agentd_client.core.channel import default_socket_path, open_channel
from agentd_client.core.errors import from_grpc
from agentd_client.core.status import Status
from agentd_client.v1 import agentd_pb2 as pb
from agentd_client.v1 import agentd_pb2_grpc as pb_grpc

T = TypeVar("T")

# The deadline of a call that is not a tool call, unless the client or the call says.
DEFAULT_TIMEOUT = 30.0


class Stream(Generic[T]):
    """A server stream whose failures are typed errors; cancel() stops listening."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            return next(self._call)
        except grpc.RpcError as exc:
            raise from_grpc(exc) from exc

    def cancel(self) -> bool:
        return self._call.cancel()

    def wait_attached(self) -> bool:
        """For an attach: block until the daemon counts it (it then misses no event and
        asks reach it); False if the stream ended first."""
        try:
            metadata = self._call.initial_metadata() or ()
        except grpc.RpcError as exc:
            raise from_grpc(exc) from exc
        return any(key == rpc.ATTACHED_KEY for key, _ in metadata)


class _Base:
    """What both faces share: the channel's settings, and a call's deadline."""

    def __init__(
        self,
        timeout: float | None,
        tool_timeout: float | None,
        wait_for_ready: bool,
    ) -> None:
        self.timeout = timeout
        self.tool_timeout = tool_timeout
        self.wait_for_ready = wait_for_ready

    def _options(self, call: rpc.Call, timeout: float | None) -> dict[str, Any]:
        if timeout is None:
            timeout = self.tool_timeout if call.tool else self.timeout
        options: dict[str, Any] = {"timeout": timeout}
        if call.safe and self.wait_for_ready:
            options["wait_for_ready"] = True
        return options


class Client(_Base):
    """Blocking client. `with Client() as c:` closes the channel at the end.

    The daemon's unix socket by default; `address="host:port"` with `token` (and the
    server's CA as `root_certificates`, PEM bytes) for its TLS TCP listener.

    Every call takes `timeout=` (seconds); without it, calls use the client's
    `timeout` and tool calls its `tool_timeout` (None: the tool's own limits, which
    the daemon enforces). Calls that only read are retried by gRPC when the daemon is
    briefly unavailable and, with `wait_for_ready`, wait for it to come up until their
    deadline. Failures raise agentd_client.core.errors.AgentdError subclasses.
    """

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
        self.channel = open_channel(grpc, socket, address, token, root_certificates, server_name)
        self.stub = pb_grpc.AgentdStub(self.channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def _unary(self, call: rpc.Call, timeout: float | None) -> Any:
        try:
            reply = getattr(self.stub, call.rpc)(call.request, **self._options(call, timeout))
        except grpc.RpcError as exc:
            raise from_grpc(exc) from exc
        return call.parse(reply)

    def _stream(self, call: rpc.Call, timeout: float | None) -> Stream[Any]:
        return Stream(getattr(self.stub, call.rpc)(call.request, **self._options(call, timeout)))

    def status(self, *, timeout: float | None = None) -> Status:
        return self._unary(rpc.status(), timeout)

    def create_session(
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
        return self._unary(call, timeout)

    def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        return self._unary(rpc.get_session(session_id), timeout)

    def list_sessions(
        self, include_closed: bool = False, *, timeout: float | None = None
    ) -> list[Session]:
        return self._unary(rpc.list_sessions(include_closed), timeout)

    def close_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        return self._unary(rpc.close_session(session_id), timeout)

    def collect_sessions(
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
        return self._unary(call, timeout)

    def update_permissions(
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
        return self._unary(
            rpc.update_permissions(session_id, mode, allow, deny, ask, ask_timeout), timeout
        )

    def list_tools(
        self, *, hints: bool = False, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """The tools in the Anthropic format (`tools=` of messages.create); `hints=True`
        adds each tool's "hints" (read_only, destructive, idempotent, open_world)."""
        return self._unary(rpc.list_tools(hints), timeout)

    def stream_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
        *,
        ask_timeout: float = 0,
        timeout: float | None = None,
    ) -> Stream[pb.ToolCallUpdate]:
        """Progress updates, then the result, as the daemon sends them; cancel() the
        stream to stop listening (cancel(session, id) stops the call itself)."""
        return self._stream(
            rpc.stream_tool(session_id, name, input, tool_use_id, ask_timeout), timeout
        )

    def run_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
        *,
        ask_timeout: float = 0,
        timeout: float | None = None,
    ) -> ToolResult:
        """One call's result (its progress reaches attached clients; see stream_tool)."""
        return self._unary(rpc.run_tool(session_id, name, input, tool_use_id, ask_timeout), timeout)

    def run_tools(
        self, session_id: str, calls: Iterable[Any], *, timeout: float | None = None
    ) -> list[ToolResult]:
        """The tool_use blocks of one assistant message, run as the daemon's batch (reads
        together, others alone, in order); results in call order, with the calls' ids.

        `calls` may be the message's whole content: anthropic SDK ToolUseBlocks, tool_use
        dicts, or (name, input[, id]) tuples; blocks of other types are skipped."""
        call = rpc.run_tools(session_id, calls)
        updates = list(self._stream(call, timeout))
        assert call.finish is not None
        return call.finish(updates)

    def cancel(self, session_id: str, tool_use_id: str, *, timeout: float | None = None) -> bool:
        """Cancel a running call; False when the daemon has no such call running."""
        return self._unary(rpc.cancel(session_id, tool_use_id), timeout)

    def attach(
        self,
        session_id: str,
        after_seq: int = 0,
        follow: bool = True,
        *,
        timeout: float | None = None,
    ) -> Stream[Event]:
        """The session's events after `after_seq`, then live ones; cancel() to stop.
        It follows until cancelled: only an explicit `timeout` ends it. `wait_attached()`
        on the stream returns once the daemon counts it. Without `follow`, the journal up
        to the session's latest event, then the end."""
        call = rpc.attach(session_id, after_seq, follow)
        return Stream(self.stub.Attach(call.request, timeout=timeout))

    def read_output(
        self,
        session_id: str,
        id: str,
        offset: int = 0,
        follow: bool = False,
        *,
        timeout: float | None = None,
    ) -> Stream[pb.OutputChunk]:
        """A Bash call's (tool_use_id) or task's output from `offset`; with `follow`, until
        it ends. Moves nobody's BashOutput cursor. cancel() to stop."""
        call = rpc.read_output(session_id, id, offset, follow)
        return Stream(self.stub.ReadOutput(call.request, timeout=timeout))

    def resolve_permission(
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
        return self._unary(call, timeout)

    def append_agent_event(
        self, session_id: str, event: pb.AgentEvent, *, timeout: float | None = None
    ) -> int:
        """Keep one event of an agent loop's conversation in the session (agentctl agent);
        attached clients see it. Returns its seq."""
        return self._unary(rpc.append_agent_event(session_id, event), timeout)

    def list_tasks(
        self, session_id: str, include_finished: bool = True, *, timeout: float | None = None
    ) -> list[Task]:
        return self._unary(rpc.list_tasks(session_id, include_finished), timeout)

    def list_checkpoints(
        self, session_id: str, *, timeout: float | None = None
    ) -> list[pb.Checkpoint]:
        """The session's writing calls that changed files, oldest first."""
        return self._unary(rpc.list_checkpoints(session_id), timeout)

    def diff_checkpoint(
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
        return self._unary(call, timeout)

    def restore_checkpoint(
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
        return self._unary(call, timeout)

    def list_pending_changes(
        self, session_id: str, *, fmt: str = "unified", timeout: float | None = None
    ) -> pb.PendingChanges:
        """The change set waiting for review in a session in review mode (id 0: none)."""
        return self._unary(rpc.list_pending_changes(session_id, fmt), timeout)

    def resolve_pending_changes(
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
        return self._unary(call, timeout)

    def rewind_to_call(
        self,
        session_id: str,
        tool_use_id: str,
        *,
        dry_run: bool = False,
        on_conflict: str = "",
        timeout: float | None = None,
    ) -> pb.RestoreCheckpointResponse:
        """Undo a call and every call after it."""
        return self._unary(
            rpc.rewind_to_call(session_id, tool_use_id, dry_run, on_conflict), timeout
        )

    def classify(self, command: str, *, timeout: float | None = None) -> dict[str, Any]:
        return self._unary(rpc.classify(command), timeout)

    def list_trust(self, path: str = "", *, timeout: float | None = None) -> list[pb.TrustEntry]:
        """Trusted settings contents, and the settings files of open sessions (or `path`)."""
        return self._unary(rpc.list_trust(path), timeout)

    def list_credentials(self, *, timeout: float | None = None) -> pb.ListCredentialsResponse:
        """Credential sources and routes, and which sessions used them (never a secret)."""
        return self._unary(rpc.list_credentials(), timeout)

    def approve_trust(
        self, path: str, sha256: str, *, timeout: float | None = None
    ) -> pb.TrustEntry:
        """Trust exactly this content of a settings file; refused if the file holds other."""
        return self._unary(rpc.approve_trust(path, sha256), timeout)

    def revoke_trust(
        self, path: str, sha256: str = "", *, timeout: float | None = None
    ) -> list[pb.TrustEntry]:
        """Drop approvals of a settings file (every content, or only `sha256`)."""
        return self._unary(rpc.revoke_trust(path, sha256), timeout)

    def approver(self, session_id: str, decide: Decide) -> Approver:
        """Answers the session's permission asks with `decide` from a background thread.
        `with c.approver(sid, decide):` returns once the daemon counts it as attached,
        so the first call in the block can already be asked about."""
        return Approver(self, session_id, decide)


__all__ = ["Client", "Stream", "ToolResult", "default_socket_path"]
