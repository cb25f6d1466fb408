"""What the file tools share: resolving a path, reading a file with its stat, the read
state behind read-before-write, and text decoding that a write can reverse.

The read state (`session.read_state[path]`) is the file as the session last saw it: a
hash of its bytes, its mtime and size. A write needs one (the model must have seen the
file), and a file whose mtime moved AND whose bytes changed since then has been
modified behind the model's back.
"""

from __future__ import annotations

import codecs
import dataclasses
import difflib
import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentd.foundation.errors import InputError, ToolError
from agentd.fs import access as fsaccess
from agentd.fs import identity as fsidentity
from agentd.sessions.session import FileState, Session

if TYPE_CHECKING:
    from agentd.fs.temp_ledger import TempLedger
    from agentd.tools.base import ToolContext

# Larger files are refused by the tools that rewrite a whole file in memory.
MAX_EDIT_BYTES = 64 * 1024 * 1024

NOT_READ = "This file has not been read in this session. Read it before writing to it."
MODIFIED = (
    "This file has changed on disk since it was last read (by the user, a formatter or "
    "another process). Read it again before writing to it."
)


def resolve(
    session: Session, raw: str, roots: list[str], ctx: ToolContext | None = None
) -> fsaccess.Located:
    """The session's meaning of `raw`, inside one of `roots` (else PathOutsideWorkspace).

    With the call's `ctx`, every later access to it is made with the session's sandbox
    identity, except in the session's state dir (the daemon's own).
    """
    path = fsaccess.expand(raw, session.cwd, session.home)
    if ctx is None:
        return fsaccess.locate(path, roots)
    return fsaccess.locate(path, roots, ctx.fs_identity(), (ctx.state_dir,))


def not_found(path: str, session: Session, identity: fsidentity.FsIdentity | None = None) -> str:
    """The text for a missing file: the cwd, and a similarly named neighbour if there is one."""
    message = f"File does not exist: {path}. The current working directory is {session.cwd}."
    with fsidentity.acting_as(identity):
        similar = similar_file(path)
    if similar:
        message += f" Did you mean {similar}?"
    return message


def similar_file(path: str) -> str | None:
    directory, name = os.path.split(path)
    try:
        names = [n for n in os.listdir(directory) if n != name]
    except OSError:
        return None
    stem = os.path.splitext(name)[0]
    same_stem = [n for n in names if os.path.splitext(n)[0] == stem]
    close = same_stem or difflib.get_close_matches(name, names, n=1, cutoff=0.8)
    return os.path.join(directory, close[0]) if close else None


@dataclass(frozen=True, slots=True)
class Current:
    """A file's bytes and the stat of the very descriptor they were read from."""

    data: bytes
    st: os.stat_result


_NULL_DEVICE = os.makedev(1, 3)


def read_current(
    loc: fsaccess.Located, limit: int | None = None, null_device: bool = False
) -> Current | None:
    """The file at `loc`, or None when it does not exist.

    Raises IsADirectoryError for a directory and ToolError for anything that is not a
    regular file (a FIFO or device is never read: opened non-blocking, refused on fstat).
    With `null_device`, /dev/null's device is read as an empty file (it never blocks).
    With `limit`, a larger file raises ToolError before any byte is read.
    """
    try:
        fd = fsaccess.open_beneath(loc, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(f"Cannot open {loc.path}: too many levels of symbolic links.") from None
        if exc.errno == errno.EACCES:
            raise ToolError(f"Permission denied: {loc.path}.") from None
        raise ToolError(f"Cannot open {loc.path}: {exc.strerror}.") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", loc.path)
        if null_device and stat.S_ISCHR(st.st_mode) and st.st_rdev == _NULL_DEVICE:
            return Current(b"", st)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(
                f"{loc.path} is not a regular file (a device, FIFO or socket) and is never "
                "read: its content may be endless or block. Only regular files can be used."
            )
        if limit is not None and st.st_size > limit:
            raise ToolError(
                f"{loc.path} is too large ({format_size(st.st_size)}; the limit is "
                f"{format_size(limit)}). Work on it with shell tools (sed, head, tail, grep)."
            )
        # A file the sandbox keeps appending to must not keep us reading: take what
        # fstat saw, and a little more for files that report size 0 (/proc, /sys).
        remaining = st.st_size + (1 << 20)
        if limit is not None:
            remaining = min(remaining, limit)
        chunks: list[bytes] = []
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return Current(b"".join(chunks), st)
    finally:
        os.close(fd)


def format_size(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f}KB".replace(".0KB", "KB")
    return f"{n / (1024 * 1024):.1f}MB".replace(".0MB", "MB")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def remember(session: Session, path: str, data: bytes, st: os.stat_result, partial: bool) -> None:
    """Record the file as the session now knows it."""
    session.read_state[path] = FileState(digest(data), st.st_mtime_ns, len(data), partial)


def write(loc: fsaccess.Located, data: bytes, ledger: TempLedger | None) -> None:
    """Replace the file atomically (the only way the file tools write), its temp file
    recorded in `ledger` first (Services.temp_ledger); OSError -> ToolError."""
    try:
        fsaccess.write_atomic(loc, data, ledger)
    except IsADirectoryError:
        raise InputError(f"{loc.path} is a directory; give the path of a file.") from None
    except NotADirectoryError:
        raise ToolError(f"Cannot write {loc.path}: part of its parent path is a file.") from None
    except FileNotFoundError:
        raise ToolError(
            f"Cannot write {loc.path}: it is a symbolic link to a file that does not exist."
        ) from None
    except OSError as exc:
        raise ToolError(f"Cannot write {loc.path}: {exc.strerror}.") from None


def remember_written(session: Session, loc: fsaccess.Located, data: bytes) -> None:
    """After a tool wrote `data`: the session knows the file as written."""
    try:
        st = fsaccess.stat_beneath(loc)
    except OSError:
        session.read_state.pop(loc.path, None)
        return
    remember(session, loc.path, data, st, partial=False)


def is_modified(session: Session, path: str, current: Current) -> bool:
    """Whether the file changed since the session's last Read or write of it.

    A new mtime alone is not a change: `touch`, or a save of the same bytes, leaves
    the content the model saw. Then the recorded mtime is brought up to date.
    """
    state = session.read_state[path]
    if current.st.st_mtime_ns == state.mtime_ns and len(current.data) == state.size:
        return False
    if digest(current.data) == state.content_hash:
        session.read_state[path] = dataclasses.replace(state, mtime_ns=current.st.st_mtime_ns)
        return False
    return True


def require_read(session: Session, path: str) -> None:
    if path not in session.read_state:
        raise InputError(NOT_READ)


@dataclass(frozen=True, slots=True)
class TextCodec:
    """How a file's bytes became text, so the text can go back the same way."""

    encoding: str  # a Python codec name, without BOM handling
    bom: bytes
    crlf: bool

    def encode(self, text: str) -> bytes:
        """`text` (LF line ends) in the file's encoding, BOM and line endings."""
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        try:
            return self.bom + text.encode(self.encoding)
        except UnicodeEncodeError:
            # New text the old encoding cannot hold (latin-1 and a non-latin character).
            return text.encode("utf-8")


UTF8 = TextCodec("utf-8", b"", False)

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode(data: bytes) -> tuple[str, TextCodec]:
    """The text of `data` with CRLF line endings turned to LF, and how to reverse that.

    A BOM names the encoding; else UTF-8 when it decodes, else latin-1 (which always does).
    A file counts as CRLF when most of its line ends are CRLF; only then are they converted.
    """
    encoding, bom = "", b""
    for mark, name in _BOMS:
        if data.startswith(mark):
            encoding, bom = name, mark
            break
    if encoding:
        text = data[len(bom) :].decode(encoding, errors="replace")
    else:
        try:
            text, encoding = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = data.decode("latin-1"), "latin-1"
    crlf_count = text.count("\r\n")
    crlf = crlf_count > 0 and crlf_count >= text.count("\n") - crlf_count
    if crlf:
        text = text.replace("\r\n", "\n")
    return text, TextCodec(encoding, bom, crlf)


def has_nul(data: bytes) -> bool:
    """NUL bytes near the start of a file without a BOM: binary, or text we cannot round-trip."""
    return not data.startswith(tuple(m for m, _ in _BOMS)) and b"\x00" in data[:8192]


def refuse_nul(path: str) -> None:
    raise InputError(
        f"{path} has NUL bytes: it is binary, or text in an encoding without a byte-order "
        "mark (such as UTF-16). It cannot be edited safely here; change it with a shell "
        "command that keeps its encoding."
    )
