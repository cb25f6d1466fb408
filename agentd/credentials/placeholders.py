"""A placeholder of the same shape as a secret: what a sandbox is shown in its place.

Same length (so a body's Content-Length stays true when the proxy puts the real value
back), the same known prefix (`ghp_`, `sk-ant-api03-`, `github_pat_`: a tool that
checks a token's form before sending it still sends it), and every other character
drawn at random from the same class as the one it stands for (a digit for a digit, a
lower-case letter for a lower-case letter; punctuation kept). Fresh for each session
and never equal to the secret, so it is worth nothing anywhere but through the proxy of
the session that was shown it.
"""

from __future__ import annotations

import secrets
import string

# Known prefixes, longest first: kept as they are.
PREFIXES = (
    "sk-ant-api03-",
    "sk-ant-admin01-",
    "sk-ant-oat01-",
    "sk-ant-",
    "sk-proj-",
    "sk-svcacct-",
    "sk-",
    "github_pat_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "glpat-",
    "npm_",
    "pypi-",
    "xoxb-",
    "xoxp-",
    "hf_",
    "AKIA",
    "ASIA",
)
# Characters past the prefix a placeholder must redraw at least, or it would be guessable.
MIN_DRAWN = 8


def prefix_of(secret: str) -> str:
    return next((p for p in PREFIXES if secret.startswith(p)), "")


def _draw(c: str) -> str:
    for alphabet in (string.digits, string.ascii_lowercase, string.ascii_uppercase):
        if c in alphabet:
            return secrets.choice(alphabet)
    return c


def placeholder(secret: str) -> str:
    """A value shaped as `secret`, drawn afresh; never `secret` itself."""
    prefix = prefix_of(secret)
    rest = secret[len(prefix) :]
    drawable = sum(c.isascii() and c.isalnum() for c in rest)
    if drawable < MIN_DRAWN:
        # Too little to redraw past a prefix: every character is drawn.
        alphabet = string.ascii_letters + string.digits
        while (drawn := "".join(secrets.choice(alphabet) for _ in secret)) == secret:
            pass
        return drawn
    while True:
        drawn = prefix + "".join(_draw(c) for c in rest)
        if drawn != secret:
            return drawn
