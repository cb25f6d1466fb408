"""What a call changed, or a run of calls, as a person reads it: names, a stat, or a
unified diff, each path either restorable or saying why not."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from agentd.changes import images
from agentd.changes.blobs import Blobs
from agentd.changes.images import Image
from agentd.fs.identity import FsIdentity
from agentd.sessions.checkpoint_rows import Row

FORMATS = ("stat", "names", "unified")
# Lines of a unified diff per file before it is cut.
_MAX_LINES = 5000


@dataclass
class FileDiff:
    root: str
    rel: str
    change: str  # added, changed, deleted
    before: Image
    after: Image

    @property
    def why_not(self) -> str:
        """Why this path cannot be put back as it was before ("" when it can)."""
        if images.restorable(self.before):
            return ""
        return str(self.before.get("why") or images.NOT_CAPTURED)


def quoted(rel: str) -> str:
    """A path as a diff names it: quoted with escapes, as git quotes a path, when it
    holds a control character, a quote, a backslash or bytes that are not UTF-8 (a
    name with a line break in it must not read as another line of the diff)."""

    def plain(ch: str) -> bool:
        return 0x20 <= ord(ch) != 0x7F and ch not in '"\\' and not 0xD800 <= ord(ch) <= 0xDFFF

    if all(plain(ch) for ch in rel):
        return rel
    out = []
    for ch in rel:
        if plain(ch):
            out.append(ch)
        elif 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that is not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch in '"\\':
            out.append("\\" + ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return '"' + "".join(out) + '"'


def collect(rows: list[Row], first: Row, *, since: bool, last: Row | None) -> list[FileDiff]:
    """Each path's first pre-image and last post-image over the calls from `first`
    (only `first` unless `since`; up to `last` when given)."""
    out: dict[tuple[str, str], FileDiff] = {}
    for row in rows:
        if row.seq < first.seq or (not since and row.seq != first.seq):
            continue
        if last is not None and row.seq > last.seq:
            continue
        for e in row.body.get("files", []):
            key = (e["root"], e["path"])
            if key in out:
                out[key].after = e["after"]
            else:
                out[key] = FileDiff(e["root"], e["path"], e["kind"], e["before"], e["after"])
    for d in out.values():
        d.change = _change(d.before, d.after, d.change)
    return [out[k] for k in sorted(out)]


def _change(before: Image, after: Image, default: str) -> str:
    if before["kind"] == images.NONE:
        return "added" if after["kind"] != images.NONE else "none"
    if after["kind"] == images.NONE:
        return "deleted"
    return default if default != "added" else "changed"


def against_now(diffs: list[FileDiff], identity: FsIdentity | None, cap: int) -> dict[str, bytes]:
    """Each path's image now in place of its last post-image; the contents read (by
    hash), for the diff (a worker thread's job)."""
    contents: dict[str, bytes] = {}
    for d in diffs:
        now, data = images.look(d.root, d.rel, identity, cap)
        if data is not None:
            now["blob"] = Blobs.digest(data)
            contents[now["blob"]] = data
        d.after = now
        d.change = _change(d.before, now, "changed")
    return contents


def render(
    diffs: list[FileDiff], fmt: str, blobs: Blobs, contents: dict[str, bytes] | None = None
) -> str:
    have = contents or {}
    diffs = [d for d in diffs if d.change != "none"]
    if fmt == "names":
        lines = []
        for d in diffs:
            note = f"  ({d.why_not})" if d.why_not else ""
            lines.append(f"{d.change[0].upper()} {quoted(d.rel)}{note}")
        return "\n".join(lines) + ("\n" if lines else "")
    if fmt == "unified":
        return "".join(_unified(d, blobs, have) for d in diffs)
    return _stat(diffs, blobs, have)


def _text(image: Image, root: str, blobs: Blobs, have: dict[str, bytes]) -> list[str] | None:
    """The image's lines; None when it is not text (or its content is not kept)."""
    kind = image["kind"]
    if kind == images.NONE or kind == images.DIR:
        return []
    if kind == images.LINK:
        return [f"-> {image.get('target', '')}\n"]
    if kind != images.FILE or not image.get("blob"):
        return None
    data = have.get(image["blob"]) or blobs.get(root, image["blob"])
    if data is None or b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def _unified(d: FileDiff, blobs: Blobs, have: dict[str, bytes]) -> str:
    a, b = _text(d.before, d.root, blobs, have), _text(d.after, d.root, blobs, have)
    name = quoted(d.rel)
    head = f"diff {name} ({d.change})\n"
    if d.why_not:
        head += f"# {d.why_not}\n"
    if d.before.get("mode") != d.after.get("mode") and d.before.get("mode") and d.after.get("mode"):
        head += f"old mode {d.before['mode']:o}\nnew mode {d.after['mode']:o}\n"
    if a is None or b is None:
        return head + f"{images.describe(d.before)} -> {images.describe(d.after)}\n"
    src = "/dev/null" if d.before["kind"] == images.NONE else quoted(f"a/{d.rel}")
    dst = "/dev/null" if d.after["kind"] == images.NONE else quoted(f"b/{d.rel}")
    lines = list(difflib.unified_diff(a, b, src, dst))
    if len(lines) > _MAX_LINES:
        lines = lines[:_MAX_LINES] + [f"... {len(lines) - _MAX_LINES} more lines\n"]
    return head + "".join(
        x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in lines
    )


def _stat(diffs: list[FileDiff], blobs: Blobs, have: dict[str, bytes]) -> str:
    lines = []
    plus = minus = 0
    for d in diffs:
        a, b = _text(d.before, d.root, blobs, have), _text(d.after, d.root, blobs, have)
        if a is None or b is None:
            counts = f"{images.describe(d.before)} -> {images.describe(d.after)}"
        else:
            added = removed = 0
            for line in difflib.unified_diff(a, b, n=0):
                if line.startswith("+") and not line.startswith("+++"):
                    added += 1
                elif line.startswith("-") and not line.startswith("---"):
                    removed += 1
            plus, minus = plus + added, minus + removed
            counts = f"+{added} -{removed}"
        note = f"  ({d.why_not})" if d.why_not else ""
        lines.append(f" {d.change[0].upper()} {quoted(d.rel)} | {counts}{note}")
    lines.append(f" {len(diffs)} file(s) changed, {plus} insertion(s)(+), {minus} deletion(s)(-)")
    return "\n".join(lines) + "\n"
