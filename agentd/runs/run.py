"""Run and Output: what every run of a command offers, whoever supervises it.

Two kinds satisfy them. A sandboxed run is supervised by a shim of its own
(agentd/runs/shim/client.py: ShimRun, ShimOutput) and can outlive the daemon as a task
(Supervised). A run the daemon supervises itself (agentd/runs/tasks.py InProcessRun
with agentd/runs/output/file.py OutputFile) is an unsandboxed command, or any command
on a machine whose sandbox chain needs a step only subprocess can do. The Bash tool,
the task manager and the output registry see only these faces.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, runtime_checkable


class Output(Protocol):
    """A command's output file: its head up to a bound, a marker, its tail; read by
    anyone through the file at their own offsets."""

    # Called once the file is complete (the output registry forgets it as live).
    on_finish: Callable[[], None] | None

    @property
    def path(self) -> str: ...

    @property
    def id(self) -> str:
        """The output's id: its task id (the file is <id>.output)."""
        ...

    @property
    def size(self) -> int:
        """Bytes in the file so far, marker and tail included."""
        ...

    @property
    def total(self) -> int:
        """Bytes the command printed."""
        ...

    @property
    def done(self) -> bool: ...

    @property
    def truncated(self) -> bool:
        """More was printed than the file's head holds."""
        ...

    @property
    def last_line(self) -> str: ...

    @property
    def head(self) -> bytes | bytearray:
        """The output's first bytes, for the result."""
        ...

    def tail_bytes(self) -> bytes:
        """The output's last bytes, for the result."""
        ...

    def recent(self, offset: int, end: int) -> bytes | None:
        """The file's bytes [offset, end) if held in memory (a terminal's latest output,
        sent live by its shim); None: read them from the file."""
        ...

    def changed(self) -> asyncio.Future[None]:
        """Resolves at the next write or the end (call on the event loop)."""
        ...

    def finish(self, exit_code: int | None) -> None:
        """The file complete: with `exit_code`, its end line."""
        ...


class Run(Protocol):
    """A command running: its output, its end (the exit code), and a way to stop it."""

    @property
    def output(self) -> Output: ...

    @property
    def done(self) -> asyncio.Future[int]:
        """Resolves to the exit code once the command ended and its output is read."""
        ...

    @property
    def exit_code(self) -> int | None: ...

    @property
    def killed(self) -> bool: ...

    def kill(self) -> None: ...


@runtime_checkable
class Supervised(Run, Protocol):
    """A run under a shim: it can become a task that outlives this daemon."""

    @property
    def ended_ms(self) -> int:
        """When it ended, as its shim recorded it (0 while it runs)."""
        ...

    def make_task(self, directory: str) -> None:
        """Outlive this daemon: the shim listens in `directory` and records the end there."""
        ...

    def detach(self) -> None:
        """Let go without stopping it (a task at the daemon's stop)."""
        ...
