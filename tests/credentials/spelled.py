"""A secret in every spelling an upstream reflecting it could send (for the masker's
tests and the echoing upstream): escapes of each kind, in either case, whole or mixed,
and base64/base64url of the secret and of `user:secret` pairs (every offset)."""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
import urllib.parse


def _json_u(text: str, upper: bool) -> str:
    spelled = "".join(f"\\u{ord(c):04x}" for c in text)
    return spelled.upper().replace("\\U", "\\u") if upper else spelled


def _percent(text: str, upper: bool) -> str:
    spelled = "".join(f"%{b:02x}" for b in text.encode())
    return spelled.upper() if upper else spelled


def _every_other(text: str, escape) -> str:  # noqa: ANN001 - a small helper
    return "".join(escape(c) if i % 2 else c for i, c in enumerate(text))


def escaped(secret: str) -> dict[str, str]:
    """The secret under each escape a body can carry it in."""
    return {
        "json-slash": json.dumps(secret)[1:-1].replace("/", "\\/"),
        "json-u-lower": _json_u(secret, False),
        "json-u-upper": _json_u(secret, True),
        "json-u-mixed": _every_other(secret, lambda c: f"\\u{ord(c):04X}"),
        "percent-lower": _percent(secret, False),
        "percent-upper": _percent(secret, True),
        "percent-mixed": _every_other(secret, lambda c: f"%{ord(c):02x}"),
        "html-decimal": "".join(f"&#{ord(c)};" for c in secret),
        "html-hex": "".join(f"&#x{ord(c):x};" for c in secret),
        "html-hex-upper": "".join(f"&#X{ord(c):04X};" for c in secret),
        "html-named": html.escape(secret).replace("/", "&sol;").replace(":", "&colon;"),
    }


def encoded(secret: str, user: str) -> dict[str, str]:
    """base64 and base64url of the secret, of `user:secret` and of secrets at each
    offset inside a longer value, with and without padding."""
    out: dict[str, str] = {}
    for name, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
        out[name] = encode(secret.encode()).decode()
        out[f"{name}-unpadded"] = out[name].rstrip("=")
        out[f"{name}-pair"] = encode(f"{user}:{secret}".encode()).decode()
        for pad in range(3):
            out[f"{name}-in-json-{pad}"] = encode(json.dumps({"k" * pad: secret}).encode()).decode()
    return out


def every(secret: str, user: str) -> dict[str, str]:
    """Every spelling, the encoded ones escaped in turn where they hold `/`, `+`, `=`."""
    out = escaped(secret) | encoded(secret, user)
    for name, value in encoded(secret, user).items():
        out[f"{name}-json-slash"] = value.replace("/", "\\/")
        out[f"{name}-percent"] = value.replace("/", "%2F").replace("+", "%2b").replace("=", "%3D")
    return out


_B64_RUN = re.compile(r"[A-Za-z0-9+/=_-]{8,}")


def _readings(text: str) -> list[str]:
    unjson = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    return [
        text,
        html.unescape(text),
        urllib.parse.unquote(text),
        unjson.replace("\\/", "/"),
        text.replace("\\/", "/"),
        urllib.parse.unquote(text.replace("\\/", "/")),
    ]


def leaks(text: str, secret: str, window: int = 6) -> list[str]:
    """What of `secret` can be read back out of `text` (any `window` bytes of it, as
    written, unescaped, or base64-decoded at any offset); empty when nothing."""
    pieces = {secret[i : i + window].encode() for i in range(len(secret) - window + 1)}
    found: list[str] = []
    for reading in _readings(text):
        data = reading.encode("utf-8", "replace")
        decoded = [data]
        for run in _B64_RUN.findall(reading):
            for shift in range(4):
                part = run[shift:].rstrip("=")
                part = part[: len(part) - len(part) % 4]
                for alt in (b"+/", b"-_"):
                    with contextlib.suppress(ValueError):
                        decoded.append(base64.b64decode(part, altchars=alt))
        for blob in decoded:
            found += [p.decode("latin-1") for p in pieces if p in blob]
    return found
