"""A git push as receive-pack gets it: its ref updates (pkt-line commands before the
pack), whether each is a fast-forward the pack proves, and the answer refusing some.

A fast-forward is proven only when the pack holds the new commit and, following first
and other parents through commits in the pack, reaches the old one. A force push, a
rebased branch or a pack that cannot be read (too big, deltified commits, a thin base)
is "not proven" and asks a person: the safe side of the doubt.
"""

from __future__ import annotations

import fnmatch
import hashlib
import threading
import zlib
from collections import ChainMap, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

ZERO = "0" * 40
_OBJ_COMMIT = 1
_OFS_DELTA = 6
_REF_DELTA = 7
# Objects read from a pack at most, to prove a fast-forward (a push of a huge history
# is "not proven", so it asks).
_MAX_OBJECTS = 100_000
# Commits remembered per route from the packs it relayed, at most (the oldest go first).
KNOWN_COMMITS = 200_000


class PushError(Exception):
    """The request is not a push we can read."""


@dataclass(frozen=True, slots=True)
class RefUpdate:
    old: str
    new: str
    ref: str

    @property
    def deletion(self) -> bool:
        return self.new == ZERO

    @property
    def creation(self) -> bool:
        return self.old == ZERO


@dataclass(frozen=True, slots=True)
class Commands:
    updates: list[RefUpdate]
    capabilities: frozenset[str]
    pack_offset: int  # where the pack starts in the body


def parse_commands(body: bytes) -> Commands:
    """The commands of a receive-pack request body, up to its flush packet."""
    pos = 0
    updates: list[RefUpdate] = []
    caps: frozenset[str] = frozenset()
    while True:
        if len(body) < pos + 4:
            raise PushError("the push ends inside its commands")
        try:
            size = int(body[pos : pos + 4], 16)
        except ValueError:
            raise PushError("not a pkt-line") from None
        if size == 0:
            pos += 4
            break
        if size < 4 or len(body) < pos + size:
            raise PushError("a malformed pkt-line")
        line = body[pos + 4 : pos + size]
        pos += size
        if line.startswith(b"shallow ") and not updates:
            continue
        if line.startswith(b"push-cert"):
            raise PushError("signed pushes are not read by agentd's route")
        text, _, capa = line.rstrip(b"\n").partition(b"\0")
        if not updates and capa:
            caps = frozenset(capa.decode("ascii", "replace").split())
        parts = text.decode("utf-8", "replace").split(" ")
        if len(parts) != 3 or not all(_is_oid(p) for p in parts[:2]):
            raise PushError("a malformed ref update")
        if not parts[2].startswith("refs/") or any(c in parts[2] for c in "\0\n\r"):
            raise PushError(f"not a ref: {parts[2]!r}")
        updates.append(RefUpdate(parts[0], parts[1], parts[2]))
    if not updates:
        raise PushError("a push with no ref updates")
    return Commands(updates, caps, pos)


def _is_oid(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def protected(ref: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(ref, p) for p in patterns)


def _varint_type_size(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    kind = (byte >> 4) & 7
    pos += 1
    while byte & 0x80:
        byte = data[pos]
        pos += 1
    return kind, pos


def _inflate(data: memoryview, pos: int) -> tuple[bytes, int]:
    """One zlib stream from `pos`: its bytes and where the next object starts (fed in
    pieces, so a big pack is not copied once per object)."""
    d = zlib.decompressobj()
    out: list[bytes] = []
    step = 64 * 1024
    while not d.eof:
        piece = data[pos : pos + step]
        if not piece:
            raise PushError("a truncated object")
        out.append(d.decompress(piece))
        pos += len(piece) - len(d.unused_data)
    return b"".join(out), pos


def commit_parents(pack: bytes) -> dict[str, list[str]] | None:
    """Each whole (undeltified) commit of the pack: its id and parents. None when the
    pack cannot be read."""

    if len(pack) < 12 or pack[:4] != b"PACK":
        return None
    count = int.from_bytes(pack[8:12], "big")
    if count > _MAX_OBJECTS:
        return None
    pos = 12
    view = memoryview(pack)
    parents: dict[str, list[str]] = {}
    try:
        for _ in range(count):
            kind, pos = _varint_type_size(pack, pos)
            if kind == _OFS_DELTA:
                while pack[pos] & 0x80:
                    pos += 1
                pos += 1
            elif kind == _REF_DELTA:
                pos += 20
            data, pos = _inflate(view, pos)
            if kind != _OBJ_COMMIT:
                continue
            oid = hashlib.sha1(b"commit %d\0" % len(data) + data).hexdigest()
            head = data.split(b"\n\n", 1)[0]
            parents[oid] = [
                line[7:].decode("ascii", "replace")
                for line in head.split(b"\n")
                if line.startswith(b"parent ")
            ]
    except (IndexError, zlib.error, PushError):
        return None
    return parents


class KnownCommits:
    """Commits (id -> parents) read from the packs a route relayed before: a push whose
    objects went up earlier sends an empty pack, and its fast-forward is proven through
    these. Each id was hashed from its commit's bytes, so a hostile pack cannot make up
    an ancestry: it can only tell the truth about commits it holds."""

    def __init__(self, limit: int = KNOWN_COMMITS) -> None:
        self._limit = limit
        self._parents: OrderedDict[str, list[str]] = OrderedDict()
        self._lock = threading.Lock()

    def learn(self, parents: Mapping[str, list[str]]) -> None:
        with self._lock:
            for oid, ps in parents.items():
                self._parents[oid] = ps
                self._parents.move_to_end(oid)
            while len(self._parents) > self._limit:
                self._parents.popitem(last=False)

    def with_pack(self, parents: Mapping[str, list[str]] | None) -> Mapping[str, list[str]]:
        """The pack's commits over a copy of those known (read while others learn)."""
        with self._lock:
            known = dict(self._parents)
        return ChainMap(dict(parents or {}), known)


def fast_forward(update: RefUpdate, parents: Mapping[str, list[str]] | None) -> bool:
    """Whether the pack proves `old` an ancestor of `new`."""
    if update.creation or update.deletion:
        return False
    if update.new == update.old:
        return True
    if parents is None:
        return False
    seen: set[str] = set()
    todo = [update.new]
    while todo:
        oid = todo.pop()
        if oid == update.old:
            return True
        if oid in seen or oid not in parents:
            continue
        seen.add(oid)
        todo.extend(parents[oid])
    return False


def read(
    encoding: bytes, body: bytes, complete: bool, known: KnownCommits | None = None
) -> tuple[Commands, set[str]] | str:
    """A receive-pack body's commands and the refs its pack (with the commits `known`
    from earlier packs) proves fast-forwards; or why it cannot be read (the push is then
    refused). The pack's commits are learnt into `known`."""
    encoding = encoding.lower()
    plain = body
    if encoding == b"gzip":
        try:
            d = zlib.decompressobj(wbits=31)
            plain = d.decompress(body)
            complete = complete and d.eof
        except zlib.error:
            return "agentd could not read the push (a malformed gzip body)"
    elif encoding not in (b"", b"identity"):
        return "agentd cannot read a push with this Content-Encoding"
    try:
        commands = parse_commands(plain)
    except PushError as exc:
        return f"agentd could not read the push ({exc})"
    parents = commit_parents(plain[commands.pack_offset :]) if complete else None
    if known is None:
        return commands, {u.ref for u in commands.updates if fast_forward(u, parents)}
    if parents:
        known.learn(parents)
    graph = known.with_pack(parents)
    return commands, {u.ref for u in commands.updates if fast_forward(u, graph)}


def _pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def refusal(commands: Commands, why: str) -> bytes:
    """receive-pack's answer refusing every update: git shows `! [remote rejected]
    <ref> (agentd: why)` per ref and `remote: agentd: why` from its side band (the
    prefix once: a reason that starts with agentd's name gets none)."""
    report = _pkt(b"unpack ok\n")
    reason = why.replace("\n", " ")[:200].encode()
    said = reason if reason.startswith(b"agentd") else b"agentd: " + reason
    for update in commands.updates:
        report += _pkt(b"ng " + update.ref.encode() + b" " + said + b"\n")
    report += b"0000"
    caps = commands.capabilities
    if "side-band-64k" in caps or "side-band" in caps:
        out = _pkt(b"\x02" + said + b"\n")
        step = 990 if "side-band" in caps and "side-band-64k" not in caps else 65000
        for i in range(0, len(report), step):
            out += _pkt(b"\x01" + report[i : i + step])
        return out + b"0000"
    if "report-status" in caps or "report-status-v2" in caps:
        return report
    return b""


@dataclass(frozen=True, slots=True)
class Advertised:
    """What receive-pack advertised before a push: each ref's current tip, and the
    symbolic refs it named (`symref=` capabilities)."""

    tips: dict[str, str]
    symrefs: dict[str, str]

    def guarded(self, update: RefUpdate, patterns: tuple[str, ...]) -> str:
        """Why the update is a push to a protected ref ("" when it is not): by its name,
        by the ref a symbolic ref names, or by its old id being a protected ref's tip
        (an alias the server keeps, which the advertisement lists under its own name)."""
        if protected(update.ref, patterns):
            return "protected"
        target = self.symrefs.get(update.ref, "")
        if target and protected(target, patterns):
            return f"protected: a symbolic ref of {target}"
        if not update.creation:
            for ref, tip in sorted(self.tips.items()):
                if tip == update.old and ref != update.ref and protected(ref, patterns):
                    return f"protected: its old id is the tip of {ref}"
        return ""


def advertised(body: bytes) -> Advertised | None:
    """receive-pack's advertisement (smart http: a `# service=` line first); None when
    it cannot be read."""
    pos = 0
    tips: dict[str, str] = {}
    symrefs: dict[str, str] = {}
    lines: list[bytes] = []
    try:
        while pos + 4 <= len(body):
            size = int(body[pos : pos + 4], 16)
            if size == 0:
                pos += 4
                lines.append(b"")
                continue
            if size < 4 or pos + size > len(body):
                return None
            lines.append(body[pos + 4 : pos + size])
            pos += size
    except ValueError:
        return None
    if lines and lines[0].startswith(b"# service="):
        lines = lines[2:] if len(lines) > 1 and lines[1] == b"" else lines[1:]
    for line in lines:
        if not line:
            break
        text, _, capabilities = line.rstrip(b"\n").partition(b"\0")
        oid, _, ref = text.decode("utf-8", "replace").partition(" ")
        if not _is_oid(oid):
            return None
        for capability in capabilities.decode("ascii", "replace").split():
            name, _, value = capability.partition("=")
            if name == "symref" and ":" in value:
                source, _, target = value.partition(":")
                symrefs[source] = target
        if oid != ZERO:
            tips[ref] = oid
    return Advertised(tips, symrefs)
