"""The captures the tracker keeps (capture.py): one per workspace root and identity,
taken before the root's first writing command with the host watch told the names first
(so a change after the copy drops it), the least recently used dropped past
MAX_CAPTURES, those of a reaped session's roots gone. What a previous daemon took is
removed at start: its host watch, which kept them true, is gone with it."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets

from agentd.changes import capture
from agentd.changes.capture import Capture
from agentd.changes.host import HostWatch
from agentd.changes.pack import Pack
from agentd.foundation.config import Config
from agentd.foundation.privdir import ensure_private_dir
from agentd.fs.identity import FsIdentity, call_as

log = logging.getLogger(__name__)

Key = tuple[str, FsIdentity | None]

# Captures kept at once (one per root and identity); the least recently used goes first.
MAX_CAPTURES = 8


class Captures:
    def __init__(self, config: Config) -> None:
        self.dir = os.path.join(config.state_dir, "capture")
        self.budget = capture.Budget(
            config.checkpoint_capture_files, config.checkpoint_capture_bytes
        )
        capture.clear(self.dir)
        self._taken: dict[Key, Capture] = {}

    def get(self, key: Key) -> Capture | None:
        return self._taken.get(key)

    async def take(self, key: Key, host: HostWatch, lock: asyncio.Lock) -> None:
        """The capture of `key`, taken unless it is (the last used goes last)."""
        if key in self._taken:
            self._taken[key] = self._taken.pop(key)
            return
        async with lock:
            if key in self._taken:
                return
            while len(self._taken) >= MAX_CAPTURES:
                await self.drop(next(iter(self._taken)))
            root, identity = key
            where = os.path.join(self.dir, secrets.token_hex(8) + ".pack")
            try:
                taken = await self._take(root, identity, host, where)
            except OSError as exc:  # the state disk, or the root gone: the call goes on
                log.warning("cannot capture %s before its first writing command: %s", root, exc)
                taken = Capture(root, None)
            self._taken[key] = taken
            if taken.over:
                log.info("capture of %s: %d files, %s", root, len(taken.files), taken.over)

    async def _take(
        self, root: str, identity: FsIdentity | None, host: HostWatch, where: str
    ) -> Capture:
        ensure_private_dir(self.dir, "captured files")
        found = await asyncio.to_thread(call_as, identity, capture.walk, root)
        await host.learn_all({os.path.basename(rel) for rel, _ in found[0]})
        pack = await asyncio.to_thread(Pack, where)
        try:
            return await asyncio.to_thread(capture.take, root, identity, pack, found, self.budget)
        except BaseException:
            pack.remove()
            raise

    async def drop(self, key: Key) -> None:
        if (gone := self._taken.pop(key, None)) is not None and gone.pack is not None:
            await asyncio.to_thread(gone.pack.remove)

    async def reap(self, roots: set[str]) -> None:
        for key in [k for k in self._taken if k[0] in roots]:
            await self.drop(key)
