"""The checkpoint store's contents: one file per distinct content, named by its SHA-256,
zlib-compressed where that makes it smaller (a first byte says which), per workspace
under the daemon's private state dir.

A content already there is not written again, so a file changed back and forth costs
its distinct versions only. Writes are atomic (temp file, rename): a crash leaves a
stray temp file at most, never a blob under its name with other bytes; a read checks
the hash, so a damaged blob reads as missing, never as wrong content.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib

from agentd.foundation.privdir import ensure_private_dir

_RAW, _PACKED = b"r", b"z"


def root_key(root: str) -> str:
    """The directory name of a workspace's store."""
    return hashlib.sha256(root.encode()).hexdigest()[:16]


class Blobs:
    def __init__(self, base: str) -> None:
        self._base = base  # <state>/checkpoints

    def _dir(self, root: str) -> str:
        return os.path.join(self._base, root_key(root))

    def _path(self, root: str, sha: str) -> str:
        return os.path.join(self._dir(root), sha[:2], sha[2:])

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def put(self, root: str, data: bytes) -> tuple[str, int]:
        """Store `data`; its hash and the bytes this added to the store (0: known)."""
        sha = hashlib.sha256(data).hexdigest()
        path = self._path(root, sha)
        if os.path.exists(path):
            return sha, 0
        ensure_private_dir(self._base, "checkpoints")
        ensure_private_dir(self._dir(root), "a workspace's checkpoints")
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        packed = _PACKED + zlib.compress(data, 1)
        if len(packed) > len(data):
            packed = _RAW + data
        tmp = f"{path}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(packed)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        try:
            os.rename(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return sha, len(packed)

    def get(self, root: str, sha: str) -> bytes | None:
        """The content, or None when it is missing or damaged."""
        try:
            with open(self._path(root, sha), "rb") as f:
                stored = f.read()
            data = zlib.decompress(stored[1:]) if stored[:1] == _PACKED else stored[1:]
        except (OSError, zlib.error):
            return None
        return data if hashlib.sha256(data).hexdigest() == sha else None

    def has(self, root: str, sha: str) -> bool:
        return os.path.exists(self._path(root, sha))

    def keep_only(self, root: str, named: set[str]) -> int:
        """Remove the contents of `root`'s store no row names (and stray temp files);
        how many went. Nothing a sandbox writes is here: the store is the daemon's own."""
        removed = 0
        top = self._dir(root)
        try:
            subdirs = os.listdir(top)
        except FileNotFoundError:
            return 0
        for sub in subdirs:
            path = os.path.join(top, sub)
            for name in os.listdir(path):
                if sub + name in named:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(path, name))
                    removed += 1
        return removed
