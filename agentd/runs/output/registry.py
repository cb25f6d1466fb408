"""Every Bash output file of every session, found by task id or tool_use_id, read by offset.

A command's output file is the one source for everyone who watches it: the model
(BashOutput, with the session's cursor), people and other clients (ReadOutput, each
with its own offset), and commands in the sandbox (`tail -f` at TASKS_MOUNT). Readers
never move each other's offsets and never hold more than one chunk: the file is the
buffer, so any number of followers cost the command nothing.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncGenerator, Callable

from agentd.foundation.config import Config
from agentd.foundation.errors import NotFound, ToolError
from agentd.runs.output.serving import CHUNK, Chunk, ChunkCache, Pacer
from agentd.runs.run import Output
from agentd.sessions import dirs as session_dirs
from agentd.sessions.store import Store

# Where a session's output files are, read-only, inside its sandbox.
TASKS_MOUNT = "/run/agentd-tasks"
# Seconds a follower waits after a write before reading on (see read()).
COALESCE = 0.05
_TASK_ID = re.compile(r"b[0-9a-f]{8}")


def sandbox_path(output_id: str) -> str:
    """The path of an output file as commands in the session's sandbox see it."""
    return f"{TASKS_MOUNT}/{output_id}.output"


class Outputs:
    """The live output files (commands running) and where finished ones are."""

    def __init__(self, config: Config, store: Store | None = None) -> None:
        self._config = config
        self._live: dict[tuple[str, str], Output] = {}
        # Which output each Bash call wrote, by (session id, tool_use_id): in the store,
        # so `agentctl logs CALL` finds it after a restart too; without one, in memory.
        self._store = store
        self._by_call: dict[tuple[str, str], str] = {}
        self._chunks = ChunkCache()
        self._pacer = Pacer()

    def tasks_dir(self, session_id: str) -> str:
        return session_dirs.of(self._config.state_dir).output_path(session_id)

    def make_tasks_dir(self, session_id: str, group: int | None) -> str:
        """The session's output directory, made if need be: the daemon's, readable by the
        session's sandbox group only, which can change nothing in it (sessions/dirs.py)."""
        try:
            return session_dirs.of(self._config.state_dir).output_dir(session_id, group)
        except OSError as exc:
            raise ToolError(f"Cannot prepare the command's output file: {exc}") from None

    def add(self, session_id: str, tool_use_id: str, out: Output) -> None:
        key = (session_id, out.id)
        self._live[key] = out

        def forget() -> None:
            self._live.pop(key, None)

        out.on_finish = forget
        if not tool_use_id:
            return
        if self._store is not None:
            self._store.save_call_output(session_id, tool_use_id, out.id)
        else:
            self._by_call[(session_id, tool_use_id)] = out.id

    def forget_session(self, session_id: str) -> None:
        for key in [k for k in self._by_call if k[0] == session_id]:
            del self._by_call[key]
        if self._store is not None:
            self._store.forget_call_outputs(session_id)

    def _by_tool_use_id(self, session_id: str, tool_use_id: str) -> str | None:
        if self._store is not None:
            return self._store.call_output(session_id, tool_use_id)
        return self._by_call.get((session_id, tool_use_id))

    def resolve(self, session_id: str, id_: str) -> str:
        """The output id of a task id or a Bash call's tool_use_id in this session."""
        if (session_id, id_) in self._live:
            return id_
        if found := self._by_tool_use_id(session_id, id_):
            return found
        if _TASK_ID.fullmatch(id_) and os.path.exists(self._path(session_id, id_)):
            return id_
        raise NotFound(
            f"no output {id_!r} in this session: give a task id (agentctl tasks) or the "
            "tool_use_id of a Bash call"
        )

    def _path(self, session_id: str, output_id: str) -> str:
        return os.path.join(self.tasks_dir(session_id), f"{output_id}.output")

    async def read(
        self, session_id: str, id_: str, offset: int, follow: bool
    ) -> AsyncGenerator[Chunk, None]:
        """Chunks of the output from `offset` (< 0: that many bytes before the end now);
        with `follow`, until the command ends."""
        output_id = self.resolve(session_id, id_)
        path = self._path(session_id, output_id)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise NotFound(f"the output of {id_} is gone (its session was reaped)") from None
        key = (session_id, output_id)
        if offset < 0:
            live = self._live.get(key)
            end = live.size if live is not None else os.fstat(fd).st_size
            offset = max(0, end + offset)
        try:
            while True:
                live = self._live.get(key)
                # Take the wake-up before looking at the size, so no write is missed.
                changed = live.changed() if live is not None and follow else None
                done = live is None or live.done
                size = live.size if live is not None else os.fstat(fd).st_size
                while offset < size:
                    recent = live.recent(offset, size) if live is not None else None
                    if recent is not None:
                        # A terminal's latest output, as its shim sent it: not read back.
                        yield Chunk(offset, recent, output_id, False)
                        offset += len(recent)
                        continue
                    if live is not None and follow:
                        # The command still writes: its followers take a bounded share.
                        span = min(size, (offset // CHUNK + 1) * CHUNK) - offset
                        await self._pacer.take(span, _ended(live))
                    data = await self._chunks.read(key, fd, offset, size)
                    if not data:
                        break
                    yield Chunk(offset, data, output_id, False)
                    offset += len(data)
                if done or not follow:
                    yield Chunk(offset, b"", output_id, done)
                    return
                if changed is not None:
                    # Shared by every reader: one going away must not cancel it for all.
                    await asyncio.shield(changed)
                    # Let a busy writer run: readers take its output in bursts of at
                    # least COALESCE seconds, not a wake-up per write. A terminal's
                    # (a PTY task's) says less: its echo is a person's keystroke.
                    pause = getattr(live, "coalesce", COALESCE)
                    if pause:
                        await asyncio.sleep(pause)
        finally:
            os.close(fd)


def _ended(out: Output) -> Callable[[], bool]:
    return lambda: out.done
