"""The daemon's parts a tool call may use, typed and all required.

Built once by the assembly (agentd/daemon.py) and handed to every call in its
ToolContext. Every field is required: a context without the config cannot be made, so
no tool can fall back to searching unsandboxed or to touching files as the daemon's
own identity because a part was left out. Tests build one with
tests/support/services.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentd.foundation.config import Config
from agentd.runs.output.registry import Outputs
from agentd.runs.tasks import TaskManager
from agentd.sessions.event_types import TodoPayload
from agentd.sessions.session import Session

if TYPE_CHECKING:  # the tracker asks people: permissions import the tools
    from agentd.changes.service import ChangeTracker

# TodoWrite changed a session's list: said to the attached clients.
TodosChanged = Callable[[Session, list[TodoPayload]], Awaitable[None]]
# A Bash call moved the session's cwd (session, new cwd, previous cwd).
CwdChanged = Callable[[Session, str, str], None]


@dataclass(frozen=True, slots=True)
class Services:
    config: Config
    # Background tasks of every session (Bash's run_in_background, BashOutput, TaskStop).
    tasks: TaskManager
    # Every session's command output files.
    outputs: Outputs
    on_todos_changed: TodosChanged
    on_cwd_changed: CwdChanged
    # What a writing Bash call changed, its code-bearing changes held for a person.
    changes: ChangeTracker
