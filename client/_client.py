"""Client and AsyncClient: the daemon's nouns over gRPC, for scripts and agentctl.

Needs grpcio and protobuf only; imports nothing of the daemon.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from agentd_client.v1 import agentd_pb2 as pb
from agentd_client.v1 import agentd_pb2_grpc as pb_grpc

Session = pb.Session
Event = pb.Event
Task = pb.Task
Progress = pb.Progress


def default_socket_path() -> str:
    """The daemon's default socket, found the same way the daemon chooses it."""
    if path := os.environ.get("AGENTD_SOCKET"):
        return path
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(runtime, "agentd", "agentd.sock")
    return os.path.join(os.path.expanduser("~"), ".agentd", "agentd.sock")


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ImageBlock:
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_use_id: str
    content: list[TextBlock | ImageBlock]
    is_error: bool
    data: Any

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @classmethod
    def from_pb(cls, r: pb.ToolResult) -> ToolResult:
        blocks: list[TextBlock | ImageBlock] = []
        for b in r.content:
            if b.HasField("text"):
                blocks.append(TextBlock(b.text.text))
            else:
                blocks.append(ImageBlock(b.image.media_type, b.image.data))
        data = json.loads(r.data_json) if r.data_json else None
        return cls(r.tool_use_id, blocks, r.is_error, data)

    def to_dict(self) -> dict[str, Any]:
        """The tool_result as plain data: content blocks in the Anthropic format."""
        content: list[dict[str, Any]] = []
        for b in self.content:
            if isinstance(b, TextBlock):
                content.append({"type": "text", "text": b.text})
            else:
                import base64

                content.append(
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": b.media_type,
                            "data": base64.b64encode(b.data).decode(),
                        },
                    }
                )
        return {"content": content, "is_error": self.is_error, "data": self.data}


def _tool_use(name: str, input: Mapping[str, Any] | str, tool_use_id: str | None) -> pb.ToolUse:
    text = input if isinstance(input, str) else json.dumps(input)
    return pb.ToolUse(
        tool_use_id=tool_use_id or f"toolu_{uuid.uuid4().hex[:24]}", name=name, input_json=text
    )


def _create_request(
    workspace: str | Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    name: str,
    labels: Mapping[str, str] | None,
    permission_mode: str,
    allow_network: bool,
) -> pb.CreateSessionRequest:
    roots = [workspace] if isinstance(workspace, str) else list(workspace)
    return pb.CreateSessionRequest(
        workspace_roots=[os.path.abspath(r) for r in roots],
        cwd=cwd,
        env=dict(env or {}),
        name=name,
        labels=dict(labels or {}),
        permission_mode=permission_mode,
        allow_network=allow_network,
    )


def _target(socket: str | None) -> str:
    return f"unix:{socket or default_socket_path()}"


def _tls_credentials(root_certificates: bytes | None, token: str) -> grpc.ChannelCredentials:
    """TLS for a daemon's TCP listener, with the bearer token it requires on every call
    (without one, only health checks are answered)."""
    tls = grpc.ssl_channel_credentials(root_certificates=root_certificates)
    if not token:
        return tls
    return grpc.composite_channel_credentials(tls, grpc.access_token_call_credentials(token))


def _channel(
    flavour: Any, socket: str | None, address: str | None, token: str, roots: bytes | None
) -> Any:
    """A channel of `flavour` (grpc or grpc.aio): the unix socket, or TLS TCP with a token."""
    if address:
        creds = _tls_credentials(roots, token)
        return flavour.secure_channel(address, creds, options=_OPTIONS)
    return flavour.insecure_channel(_target(socket), options=_OPTIONS)


def identity() -> str:
    """Who this client is (user, host, terminal), sent as its user agent when it connects:
    the daemon records it with the decisions this client makes."""
    import getpass
    import socket as socket_

    def clean(text: str) -> str:
        return "".join(ch for ch in text if ch.isprintable() and ch not in "();=")[:80]

    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid())
    tty = ""
    for fd in (0, 1, 2):
        try:
            tty = os.ttyname(fd)
            break
        except OSError:
            continue
    return (
        f"agentd-client (user={clean(user)}; host={clean(socket_.gethostname())}; tty={clean(tty)})"
    )


_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.primary_user_agent", identity()),
]


class Client:
    """Blocking client. `with Client() as c:` closes the channel at the end.

    The daemon's unix socket by default; `address="host:port"` with `token` (and the
    server's CA as `root_certificates`, PEM bytes) for its TLS TCP listener.
    """

    def __init__(
        self,
        socket: str | None = None,
        *,
        timeout: float | None = None,
        address: str | None = None,
        token: str = "",
        root_certificates: bytes | None = None,
    ) -> None:
        self.channel = _channel(grpc, socket, address, token, root_certificates)
        self.stub = pb_grpc.AgentdStub(self.channel)
        self.timeout = timeout

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def status(self) -> pb.Status:
        return self.stub.GetStatus(pb.GetStatusRequest(), timeout=self.timeout)

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
    ) -> Session:
        request = _create_request(workspace, cwd, env, name, labels, permission_mode, allow_network)
        return self.stub.CreateSession(request, timeout=self.timeout)

    def get_session(self, session_id: str) -> Session:
        return self.stub.GetSession(
            pb.GetSessionRequest(session_id=session_id), timeout=self.timeout
        )

    def list_sessions(self, include_closed: bool = False) -> list[Session]:
        reply = self.stub.ListSessions(
            pb.ListSessionsRequest(include_closed=include_closed), timeout=self.timeout
        )
        return list(reply.sessions)

    def close_session(self, session_id: str) -> Session:
        return self.stub.CloseSession(
            pb.CloseSessionRequest(session_id=session_id), timeout=self.timeout
        )

    def update_permissions(
        self,
        session_id: str,
        *,
        mode: str = "",
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        ask: Sequence[str] = (),
    ) -> Session:
        return self.stub.UpdatePermissions(
            pb.UpdatePermissionsRequest(
                session_id=session_id,
                permission_mode=mode,
                add_allow=list(allow),
                add_deny=list(deny),
                add_ask=list(ask),
            ),
            timeout=self.timeout,
        )

    def list_tools(self) -> list[dict[str, Any]]:
        reply = self.stub.ListTools(pb.ListToolsRequest(), timeout=self.timeout)
        return [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": json.loads(t.input_schema_json),
            }
            for t in reply.tools
        ]

    def stream_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
    ) -> Iterator[pb.ToolCallUpdate]:
        """Progress updates, then the result, as the daemon sends them; cancel() the
        iterator to stop listening (CancelCall stops the call itself)."""
        request = pb.RunToolRequest(session_id=session_id, call=_tool_use(name, input, tool_use_id))
        return self.stub.RunTool(request)

    def run_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
    ) -> ToolResult:
        """One call's result (its progress reaches attached clients; see stream_tool)."""
        request = pb.RunToolRequest(session_id=session_id, call=_tool_use(name, input, tool_use_id))
        return ToolResult.from_pb(self.stub.CallTool(request))

    def run_tools(
        self,
        session_id: str,
        calls: Sequence[tuple[str, Mapping[str, Any] | str]] | Sequence[dict[str, Any]],
    ) -> list[ToolResult]:
        """The tool_use blocks of one assistant message; results in call order."""
        uses = []
        for call in calls:
            if isinstance(call, dict):
                uses.append(_tool_use(call["name"], call.get("input", {}), call.get("id")))
            else:
                uses.append(_tool_use(call[0], call[1], None))
        request = pb.RunToolsRequest(session_id=session_id, calls=uses)
        return [
            ToolResult.from_pb(u.result)
            for u in self.stub.RunTools(request)
            if u.HasField("result")
        ]

    def cancel(self, session_id: str, tool_use_id: str, timeout: float | None = None) -> bool:
        """Cancel a running call; False when the daemon has no such call running."""
        reply = self.stub.CancelCall(
            pb.CancelCallRequest(session_id=session_id, tool_use_id=tool_use_id),
            timeout=timeout or self.timeout,
        )
        return reply.cancelled

    def attach(self, session_id: str, after_seq: int = 0) -> Iterator[Event]:
        """The session's events after `after_seq`, then live ones; cancel() the iterator to stop."""
        return self.stub.Attach(pb.AttachRequest(session_id=session_id, after_seq=after_seq))

    def read_output(
        self, session_id: str, id: str, offset: int = 0, follow: bool = False
    ) -> Iterator[pb.OutputChunk]:
        """A Bash call's (tool_use_id) or task's output from `offset`; with `follow`, until
        it ends. Moves nobody's BashOutput cursor. cancel() the iterator to stop."""
        return self.stub.ReadOutput(
            pb.ReadOutputRequest(session_id=session_id, id=id, offset=offset, follow=follow)
        )

    def resolve_permission(
        self,
        session_id: str,
        request_id: str,
        decision: str,
        scope: str = "once",
        rule: str = "",
    ) -> pb.ResolvePermissionResponse:
        """Answer a request; with scope always, `rule` picks one of its rule_choices."""
        return self.stub.ResolvePermission(
            pb.ResolvePermissionRequest(
                session_id=session_id,
                request_id=request_id,
                decision=decision,
                scope=scope,
                rule=rule,
            ),
            timeout=self.timeout,
        )

    def list_tasks(self, session_id: str, include_finished: bool = True) -> list[Task]:
        reply = self.stub.ListTasks(
            pb.ListTasksRequest(session_id=session_id, include_finished=include_finished),
            timeout=self.timeout,
        )
        return list(reply.tasks)

    def classify(self, command: str) -> dict[str, Any]:
        reply = self.stub.Classify(pb.ClassifyRequest(command=command), timeout=self.timeout)
        return json.loads(reply.classification_json)

    # workspace trust
    def list_trust(self, path: str = "") -> list[pb.TrustEntry]:
        """Trusted settings contents, and the settings files of open sessions (or `path`)."""
        reply = self.stub.ListTrust(pb.ListTrustRequest(path=path), timeout=self.timeout)
        return list(reply.entries)

    def approve_trust(self, path: str, sha256: str) -> pb.TrustEntry:
        """Trust exactly this content of a settings file; refused if the file holds other."""
        return self.stub.ApproveTrust(
            pb.ApproveTrustRequest(path=path, sha256=sha256), timeout=self.timeout
        )

    def revoke_trust(self, path: str, sha256: str = "") -> list[pb.TrustEntry]:
        reply = self.stub.RevokeTrust(
            pb.RevokeTrustRequest(path=path, sha256=sha256), timeout=self.timeout
        )
        return list(reply.revoked)


class AsyncClient:
    """The same calls on asyncio. `async with AsyncClient() as c:`."""

    def __init__(
        self,
        socket: str | None = None,
        *,
        timeout: float | None = None,
        address: str | None = None,
        token: str = "",
        root_certificates: bytes | None = None,
    ) -> None:
        self.channel = _channel(grpc.aio, socket, address, token, root_certificates)
        self.stub = pb_grpc.AgentdStub(self.channel)
        self.timeout = timeout

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def status(self) -> pb.Status:
        return await self.stub.GetStatus(pb.GetStatusRequest(), timeout=self.timeout)

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
    ) -> Session:
        request = _create_request(workspace, cwd, env, name, labels, permission_mode, allow_network)
        return await self.stub.CreateSession(request, timeout=self.timeout)

    async def get_session(self, session_id: str) -> Session:
        return await self.stub.GetSession(
            pb.GetSessionRequest(session_id=session_id), timeout=self.timeout
        )

    async def close_session(self, session_id: str) -> Session:
        return await self.stub.CloseSession(
            pb.CloseSessionRequest(session_id=session_id), timeout=self.timeout
        )

    async def stream_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
    ) -> AsyncIterator[pb.ToolCallUpdate]:
        request = pb.RunToolRequest(session_id=session_id, call=_tool_use(name, input, tool_use_id))
        async for update in self.stub.RunTool(request):
            yield update

    async def run_tool(
        self,
        session_id: str,
        name: str,
        input: Mapping[str, Any] | str,
        tool_use_id: str | None = None,
    ) -> ToolResult:
        """One call's result (its progress reaches attached clients; see stream_tool)."""
        request = pb.RunToolRequest(session_id=session_id, call=_tool_use(name, input, tool_use_id))
        return ToolResult.from_pb(await self.stub.CallTool(request))

    async def run_tools(
        self,
        session_id: str,
        calls: Sequence[tuple[str, Mapping[str, Any] | str]],
    ) -> list[ToolResult]:
        request = pb.RunToolsRequest(
            session_id=session_id, calls=[_tool_use(n, i, None) for n, i in calls]
        )
        return [
            ToolResult.from_pb(u.result)
            async for u in self.stub.RunTools(request)
            if u.HasField("result")
        ]

    async def cancel(self, session_id: str, tool_use_id: str) -> bool:
        reply = await self.stub.CancelCall(
            pb.CancelCallRequest(session_id=session_id, tool_use_id=tool_use_id),
            timeout=self.timeout,
        )
        return reply.cancelled

    async def attach(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        async for event in self.stub.Attach(
            pb.AttachRequest(session_id=session_id, after_seq=after_seq)
        ):
            yield event

    async def read_output(
        self, session_id: str, id: str, offset: int = 0, follow: bool = False
    ) -> AsyncIterator[pb.OutputChunk]:
        async for chunk in self.stub.ReadOutput(
            pb.ReadOutputRequest(session_id=session_id, id=id, offset=offset, follow=follow)
        ):
            yield chunk

    async def resolve_permission(
        self,
        session_id: str,
        request_id: str,
        decision: str,
        scope: str = "once",
        rule: str = "",
    ) -> pb.ResolvePermissionResponse:
        return await self.stub.ResolvePermission(
            pb.ResolvePermissionRequest(
                session_id=session_id,
                request_id=request_id,
                decision=decision,
                scope=scope,
                rule=rule,
            ),
            timeout=self.timeout,
        )

    async def list_tasks(self, session_id: str, include_finished: bool = True) -> list[Task]:
        reply = await self.stub.ListTasks(
            pb.ListTasksRequest(session_id=session_id, include_finished=include_finished),
            timeout=self.timeout,
        )
        return list(reply.tasks)

    # workspace trust
    async def list_trust(self, path: str = "") -> list[pb.TrustEntry]:
        reply = await self.stub.ListTrust(pb.ListTrustRequest(path=path), timeout=self.timeout)
        return list(reply.entries)

    async def approve_trust(self, path: str, sha256: str) -> pb.TrustEntry:
        return await self.stub.ApproveTrust(
            pb.ApproveTrustRequest(path=path, sha256=sha256), timeout=self.timeout
        )

    async def revoke_trust(self, path: str, sha256: str = "") -> list[pb.TrustEntry]:
        reply = await self.stub.RevokeTrust(
            pb.RevokeTrustRequest(path=path, sha256=sha256), timeout=self.timeout
        )
        return list(reply.revoked)
