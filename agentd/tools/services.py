"""The daemon's parts a tool call may use, typed and all required.

Built once by the assembly (agentd/daemon.py) and handed to every call in its
ToolContext. Every field is required: a context without the config cannot be made, so
no tool can fall back to searching unsandboxed or to touching files as the daemon's
own identity because a part was left out; a part this daemon has not got (no network
namespaces, no control groups) is None in the sandbox runtime, said where it is made,
never found missing. Tests build one with tests/support/services.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentd.foundation.config import Config
from agentd.foundation.offload import Offload
from agentd.fs.temp_ledger import TempLedger
from agentd.runs.command import Commands
from agentd.runs.output.registry import Outputs
from agentd.runs.tasks import TaskManager
from agentd.sandboxing.runtime import SandboxRuntime
from agentd.sessions.event_types import TodoPayload
from agentd.sessions.session import Session

# TodoWrite changed a session's list: said to the attached clients.
TodosChanged = Callable[[Session, list[TodoPayload]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Services:
    config: Config
    # Background tasks of every session (Bash's run_in_background, BashOutput, TaskStop).
    tasks: TaskManager
    # Every session's command output files.
    outputs: Outputs
    on_todos_changed: TodosChanged
    # Runs a command and knows what it did (Bash, StartTask): agentd/runs/command.py.
    commands: Commands
    # What every sandbox is built with: the network's namespaces and proxies, the
    # ssh-agent, control groups, temp dir mounts (Grep and Glob search in one too).
    sandbox: SandboxRuntime
    # Where atomic writes record their temp files first (None: nowhere).
    temp_ledger: TempLedger | None
    # Worker processes for CPU-heavy work (the patch of a large Write or Edit).
    offload: Offload
