"""The Tool contract, and defaults that fail closed.

A tool is one module: its schema, the text the model reads, its validation, its
permission hints and its call. The executor does the rest (name lookup, input
coercion and schema validation, permissions, events, size budget).

A tool is not read-only and not concurrency-safe unless it says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from agentd.foundation.errors import InputError, ToolError
from agentd.fs.identity import FsIdentity
from agentd.runs.launch import Interactive
from agentd.runs.tasks import Task
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions.event_types import ResultPayload
from agentd.tools.services import Services

if TYPE_CHECKING:
    from agentd.sessions.session import Session

__all__ = [
    "ContentBlock",
    "DocumentBlock",
    "FileAccess",
    "Hints",
    "ImageBlock",
    "InputError",
    "ReadOnlyTool",
    "TextBlock",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
]


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ImageBlock:
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class DocumentBlock:
    """A document the model reads itself (a PDF: its pages' text and images), as the
    Messages API's `document` block carries it."""

    media_type: str
    data: bytes


ContentBlock = TextBlock | ImageBlock | DocumentBlock


@dataclass(slots=True)
class ToolResult:
    content: list[ContentBlock]
    is_error: bool = False
    # Structured data for programs (JSON-serialisable), like the reference's tool_use_result.
    data: Any = None
    # The finished result's wire form (executor.result_payload), built once when the
    # call ends and reused by the journal and every reply; None until then.
    payload: ResultPayload | None = field(default=None, repr=False, compare=False)
    # The background task the call started (Bash in the background), for callers that
    # take it as a task (StartTask); never on the wire.
    task: Task | None = field(default=None, repr=False, compare=False)

    @classmethod
    def text(cls, text: str, data: Any = None, *, is_error: bool = False) -> ToolResult:
        return cls([TextBlock(text)], is_error=is_error, data=data)

    @classmethod
    def error(cls, message: str, *, input_error: bool = False) -> ToolResult:
        text = f"<tool_use_error>{message}</tool_use_error>" if input_error else message
        data = (
            message
            if message.startswith(("Error", "InputValidationError"))
            else f"Error: {message}"
        )
        return cls([TextBlock(text)], is_error=True, data=data)

    def text_content(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True, slots=True)
class FileAccess:
    """The path a call reads or writes, as given, for permission rules."""

    mode: Literal["read", "write"]
    path: str


ProgressFn = Callable[..., Awaitable[None]]


@dataclass
class ToolContext:
    """What a running call may see and do besides its input."""

    session: Session
    tool_use_id: str
    state_dir: str
    # await ctx.progress(output="chunk", message="...") streams to the caller and attached clients.
    progress: ProgressFn
    # The daemon's parts a tool may use (config, tasks, outputs, events to clients).
    services: Services
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    # Paths outside the workspace that a permission decision granted to this call.
    granted_paths: list[str] = field(default_factory=list)
    # How a Bash call's sandbox is built, from the permission decision (Decision.sandbox).
    sandbox: SandboxMode = SandboxMode.NORMAL
    # A person will drive the command (a PTY or stdin): set by StartTask only, never
    # from the model's input (agentd/calls/tasks.py).
    interactive: Interactive | None = None
    # How long this call's asks wait for a person (0: the session's or the daemon's):
    # what the caller gave with the request, never the model's input.
    ask_timeout: float = 0.0

    def roots(self, mode: Literal["read", "write"] = "read") -> list[str]:
        """Where this call may touch files: the workspace, granted paths, and for reads the
        session's own state (task output files, saved large results)."""
        roots = [*self.session.workspace_roots, *self.session.additional_dirs, *self.granted_paths]
        if mode == "read":
            roots.append(self.state_dir)
            roots.append(self.services.outputs.tasks_dir(self.session.id))  # Bash output files
        return roots

    def fs_identity(self) -> FsIdentity | None:
        """Whose rights the daemon's file work for this call has: the identity the
        session's sandboxed commands run as (agentd/fs/identity.py); None when the daemon
        is not root, and so is that identity already."""
        return sandbox_policy.fs_identity(self.session, self.services.config)


@dataclass(frozen=True, slots=True)
class Hints:
    """What any call of a tool may do, whatever its input, for clients that show or sort
    tools by it (MCP's tool annotations). Hints, never guarantees: each call is still
    decided and sandboxed on its own. The defaults fail closed: may change and destroy."""

    read_only: bool = False
    destructive: bool = True  # may change or delete what was there, not only add
    idempotent: bool = False  # a second identical call changes nothing more
    open_world: bool = False  # may reach beyond the workspace (the network)


# A tool's input: a TypedDict of its schema's properties (the executor checks the input
# against the schema before any method below sees it; tests/tools/test_inputs.py checks
# that each TypedDict says what its schema says).
In = TypeVar("In", bound=Mapping[str, Any])


class Tool(Generic[In]):
    """Subclass as Tool[ItsInput], fill in the class attributes, implement `call`;
    register in tools/__init__."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    # Our own words, for the model.
    description: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]]
    # A result whose text is longer goes to a file, replaced by a preview and the path.
    max_result_chars: ClassVar[int] = 100_000
    hints: ClassVar[Hints] = Hints()

    def is_read_only(self, args: In) -> bool:
        return False

    def is_concurrency_safe(self, args: In) -> bool:
        return False

    def file_access(self, args: In) -> FileAccess | None:
        """The file this call touches, for path permission rules; None if none."""
        return None

    def lenient_input(self, args: dict[str, Any]) -> dict[str, Any]:
        """Inputs the reference takes although its schema does not (Read's offset -1),
        put in the schema's terms; runs before the schema check."""
        return args

    async def validate_input(self, args: In, ctx: ToolContext) -> None:
        """Raise InputError when the input cannot be run; runs before permissions."""

    async def call(self, args: In, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """The Anthropic tool format."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


class ReadOnlyTool(Tool[In]):
    """A tool that changes nothing: it may run without asking and beside other such calls."""

    hints: ClassVar[Hints] = Hints(read_only=True, destructive=False, idempotent=True)

    def is_read_only(self, args: In) -> bool:
        return True

    def is_concurrency_safe(self, args: In) -> bool:
        return True


def reminder(text: str) -> str:
    """A note to the model, set apart from the tool's output as the reference sets it."""
    return f"<system-reminder>{text}</system-reminder>"
