"""What the proxy does to the bytes of a terminated connection: placeholders replaced
by their real values in what goes out (only those whose entry injects to this host), a
placeholder of any other entry refused, and every real value in what comes back
replaced by its placeholder (and, in any other spelling, by `*`s).

A placeholder has its secret's length (placeholders.py), so every swap keeps a body's
length and its Content-Length true, and a stream is swapped chunk by chunk holding back
no more than one value's length.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from agentd.credentials.http import Masker


@dataclass(frozen=True, slots=True)
class Swap:
    """One masked entry as a session sees it."""

    label: str  # "envVars GITHUB_TOKEN"
    placeholder: bytes
    real: bytes
    hosts: tuple[str, ...]  # its injectHosts as written


class Injection:
    """The swaps of one terminated connection to one host."""

    def __init__(self, host: str, given: list[Swap], others: list[Swap]) -> None:
        self.host = host
        self.given = given  # entries that inject to this host
        self.others = others  # entries that do not: their placeholder is refused here
        self.keep = max((len(s.placeholder) for s in [*given, *others]), default=1) - 1

    def foreign(self, data: bytes) -> Swap | None:
        """The entry whose placeholder `data` carries although it does not go here."""
        return next((s for s in self.others if s.placeholder in data), None)

    def inject(self, data: bytes) -> tuple[bytes, list[Swap]]:
        """`data` with each placeholder going here replaced; and which were."""
        used: list[Swap] = []
        for swap in self.given:
            if swap.placeholder in data:
                data = data.replace(swap.placeholder, swap.real)
                used.append(swap)
        return data, used

    def header(self, key: bytes, value: bytes) -> tuple[bytes, list[Swap], Swap | None]:
        """A request header's value swapped (inside Basic credentials too, which carry
        `user:placeholder` in base64); and the foreign entry it carries, if any."""
        basic = _basic(value) if key.lower() == b"authorization" else None
        for part in (value, basic):
            if part is not None and (refused := self.foreign(part)) is not None:
                return value, [], refused
        if basic is not None:
            pair, used = self.inject(basic)
            if used:
                return value[:6] + base64.b64encode(pair), used, None
        swapped, used = self.inject(value)
        return swapped, used, None

    def masker(self) -> Unmasker:
        return Unmasker([(s.real, s.placeholder) for s in [*self.given, *self.others]])


def _basic(value: bytes) -> bytes | None:
    """The `user:password` of a Basic Authorization value; None if it is not one."""
    if value[:6].lower() != b"basic ":
        return None
    try:
        return base64.b64decode(value[6:].strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


class Unmasker(Masker):
    """A stream's real values put back as their placeholders; any other spelling of
    them (escaped, encoded) as `*`s, as a route masks (http.py)."""

    def __init__(self, pairs: list[tuple[bytes, bytes]]) -> None:
        super().__init__([real for real, _ in pairs])
        self.pairs = pairs

    def mask(self, data: bytes) -> bytes:
        for real, placeholder in self.pairs:
            data = data.replace(real, placeholder)
        return super().mask(data)


class OutStream:
    """A request body swapped as it streams: the last `keep` bytes are held until more
    come (a placeholder may straddle two chunks)."""

    def __init__(self, injection: Injection) -> None:
        self.injection = injection
        self.held = b""
        self.used: list[Swap] = []

    def feed(self, data: bytes) -> tuple[bytes, Swap | None]:
        """What may go now, or the foreign entry found (nothing more may go)."""
        data = self.held + data
        refused = self.injection.foreign(data)
        if refused is not None:
            return b"", refused
        data, used = self.injection.inject(data)
        self.used += used
        keep = self.injection.keep
        if keep <= 0 or len(data) <= keep:
            self.held = data if keep > 0 else b""
            return (b"" if keep > 0 else data), None
        self.held = data[-keep:]
        return data[:-keep], None

    def flush(self) -> bytes:
        data, self.held = self.held, b""
        return data
