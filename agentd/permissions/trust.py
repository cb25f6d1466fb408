"""Workspace trust, pinned to content: which settings files may widen permissions.

A workspace's `.claude/settings*.json` is written by whoever controls the workspace,
the sandboxed commands of a session included. What it restricts always applies; what
it widens applies only while the file's exact bytes (their sha256) are trusted for
that file's path: listed in the daemon's config (`trusted_settings`), or approved by a
person (`agentctl trust approve`, or the "trust these settings?" prompt), which the
state DB keeps. A trust is (path, sha256): change one byte and the file is untrusted.

`read_settings` is how the daemon reads such a file: opened beneath the workspace root
(openat2 RESOLVE_BENEATH) with O_NOFOLLOW|O_NONBLOCK, refused unless a regular file,
read up to a size cap from that one descriptor, and hashed from exactly the bytes that
are then parsed. It runs in a worker thread, bounded in time, never on the event loop.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import re
import stat
import time
from dataclasses import dataclass
from typing import Any

from agentd.foundation.config import Config
from agentd.foundation.errors import InvalidRequest
from agentd.fs.access import _openat2
from agentd.sessions.store import Store

log = logging.getLogger(__name__)

SETTINGS_FILES = (".claude/settings.json", ".claude/settings.local.json")
# A settings file is a few KiB; anything past this is refused, not truncated.
MAX_SETTINGS_BYTES = 256 * 1024
# A read that takes longer (a hung network filesystem) counts as unreadable.
READ_TIMEOUT_SECONDS = 5.0
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class SettingsBytes:
    """One settings file as read: its bytes and their hash, or why it could not be read."""

    path: str
    root: str
    data: bytes = b""
    sha256: str = ""
    error: str = ""  # "" when read
    # Set when the file had not changed for a while before it was read (see `stamp`):
    # the bytes may then be reused while the file's stamp stays the same.
    stamp: tuple[int, ...] = ()


def stamp(root: str, name: str, file: os.stat_result) -> tuple[int, ...]:
    """Identity and change marks of a settings file and of the directory it sits in.

    Equal stamps mean the same inode, unchanged since (ctime moves on every write and no
    one can set it). A write within the timestamp granularity of the read would not move
    it, so only reads of a file unchanged for SETTLED_NS are reused ("racy git").
    """
    parent = os.lstat(os.path.join(root, os.path.dirname(name)))
    return (
        parent.st_dev,
        parent.st_ino,
        parent.st_mode,
        file.st_dev,
        file.st_ino,
        file.st_mode,
        file.st_size,
        file.st_mtime_ns,
        file.st_ctime_ns,
    )


SETTLED_NS = 2_000_000_000


def _read_sync(root: str, name: str) -> SettingsBytes:
    path = os.path.join(root, name)
    try:
        root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return SettingsBytes(path, root, error=f"cannot open the workspace root: {exc.strerror}")
    try:
        fd = _openat2(root_fd, name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return SettingsBytes(path, root)  # no file: nothing to apply, nothing to report
    except OSError as exc:
        why = {
            errno.ELOOP: "it is a symlink",
            errno.EXDEV: "it resolves outside the workspace",
            errno.ENOTDIR: "a component is not a directory",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        return SettingsBytes(path, root, error=f"not read: {why}")
    finally:
        os.close(root_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return SettingsBytes(path, root, error="not read: not a regular file")
        if st.st_size > MAX_SETTINGS_BYTES:
            return SettingsBytes(
                path, root, error=f"not read: larger than {MAX_SETTINGS_BYTES} bytes"
            )
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 65536):
            total += len(chunk)
            if total > MAX_SETTINGS_BYTES:  # it grew after the fstat
                return SettingsBytes(
                    path, root, error=f"not read: larger than {MAX_SETTINGS_BYTES} bytes"
                )
            chunks.append(chunk)
        after = os.fstat(fd)
        settled = (after.st_size, after.st_mtime_ns, after.st_ctime_ns) == (
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        ) and time.time_ns() - after.st_ctime_ns > SETTLED_NS
        marks = stamp(root, name, after) if settled else ()
    except OSError as exc:
        return SettingsBytes(path, root, error=f"not read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return SettingsBytes(path, root, data, hashlib.sha256(data).hexdigest(), stamp=marks)


async def read_settings_files(files: list[tuple[str, str]]) -> list[SettingsBytes]:
    """Read (root, name) settings files off the event loop, in one worker thread (one hop
    per call, not one per file); a read that hangs counts as unreadable."""

    def read_all() -> list[SettingsBytes]:
        return [_read_sync(root, name) for root, name in files]

    try:
        return await asyncio.wait_for(asyncio.to_thread(read_all), READ_TIMEOUT_SECONDS)
    except TimeoutError:
        return [
            SettingsBytes(
                os.path.join(root, name), root, error=f"not read within {READ_TIMEOUT_SECONDS:g}s"
            )
            for root, name in files
        ]


async def read_settings(root: str, name: str) -> SettingsBytes:
    """Read one settings file of workspace `root` off the event loop (see the module doc)."""
    return (await read_settings_files([(root, name)]))[0]


def split_settings_path(path: str) -> tuple[str, str]:
    """(workspace root, name) of an absolute settings file path; InvalidRequest otherwise."""
    if not isinstance(path, str) or "\0" in path or not os.path.isabs(path):
        raise InvalidRequest(f"settings path {path!r} must be an absolute path")
    path = os.path.normpath(path)
    for name in SETTINGS_FILES:
        if path.endswith("/" + name):
            # Sessions hold their roots resolved; so must a trust, to meet them.
            return os.path.realpath(path[: -len(name) - 1] or "/"), name
    raise InvalidRequest(
        f"{path} is not a workspace settings file: it must end in {' or '.join(SETTINGS_FILES)}"
    )


def check_sha256(value: str, what: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise InvalidRequest(f"{what} must be a sha256 in hex (64 characters), got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Trust:
    """One trusted content of one settings file."""

    path: str
    sha256: str
    source: str  # "config" or "approved"
    approved_by: str = ""
    approved_ms: int = 0


def _config_trusts(config: Config) -> dict[tuple[str, str], Trust]:
    """`trusted_settings = [{path = "/ws/.claude/settings.json", sha256 = "…"}]`, checked."""
    entries = config.trusted_settings
    if not isinstance(entries, list):
        raise InvalidRequest(
            "config trusted_settings must be a list of {path, sha256} tables, "
            f"got {type(entries).__name__}"
        )
    out: dict[tuple[str, str], Trust] = {}
    for i, entry in enumerate(entries):
        what = f"config trusted_settings[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"path", "sha256"}:
            raise InvalidRequest(f"{what} must be a table with exactly the keys path and sha256")
        root, name = split_settings_path(entry["path"])
        path = os.path.join(root, name)
        sha = check_sha256(entry["sha256"], f"{what}.sha256")
        out[(path, sha)] = Trust(path, sha, "config")
    return out


class TrustStore:
    """Trusted (path, sha256) pairs: the config's, and people's approvals kept in the DB."""

    def __init__(self, config: Config, store: Store | None = None) -> None:
        self._config = _config_trusts(config)
        self._store = store
        self._approved: dict[tuple[str, str], Trust] = {}
        if store is not None:
            for row in store.load_trust():
                t = Trust(row["path"], row["sha256"], "approved", row["by"], row["ms"])
                self._approved[(t.path, t.sha256)] = t

    def trusted(self, path: str, sha256: str) -> Trust | None:
        key = (path, sha256)
        return self._config.get(key) or self._approved.get(key)

    def approve(self, path: str, sha256: str, by: str) -> Trust:
        root, name = split_settings_path(path)
        path = os.path.join(root, name)
        check_sha256(sha256, "sha256")
        if existing := self.trusted(path, sha256):
            return existing
        t = Trust(path, sha256, "approved", by, int(time.time() * 1000))
        self._approved[(path, sha256)] = t
        if self._store is not None:
            self._store.save_trust(path, sha256, by, t.approved_ms)
        log.info("trusted %s (sha256 %s), approved by %s", path, sha256, by)
        return t

    def revoke(self, path: str, sha256: str = "") -> list[Trust]:
        """Drop approvals of `path` (of one content, or all); config trusts stay (say so)."""
        root, name = split_settings_path(path)
        path = os.path.join(root, name)
        if sha256:
            check_sha256(sha256, "sha256")
        gone = [t for t in self._approved.values() if t.path == path and sha256 in ("", t.sha256)]
        for t in gone:
            del self._approved[(t.path, t.sha256)]
        if gone and self._store is not None:
            self._store.delete_trust(path, sha256)
        for t in gone:
            log.info("trust revoked: %s (sha256 %s)", t.path, t.sha256)
        return gone

    def in_config(self, path: str, sha256: str = "") -> bool:
        return any(p == path and sha256 in ("", s) for p, s in self._config)

    def all(self) -> list[Trust]:
        return sorted(
            [*self._config.values(), *self._approved.values()],
            key=lambda t: (t.path, t.source, t.approved_ms),
        )


def describe_widening(widens: dict[str, Any]) -> list[str]:
    """One line per widening part, as the prompt and `agentctl trust` show them."""
    lines: list[str] = []
    found = widens.get("permissions")
    perms: dict[str, Any] = found if isinstance(found, dict) else {}
    for key, value in perms.items():
        lines.append(f"permissions.{key}: {_short(value)}")
    for key, value in widens.items():
        if key != "permissions":
            lines.append(f"{key}: {_short(value)}")
    return lines


def _short(value: Any, limit: int = 300) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
