"""Errors of the sandbox.

SandboxError
 +-- SandboxUnavailable   the sandbox cannot start here (bwrap missing, user
                          namespaces off, no way to drop root); never run unsandboxed
"""


class SandboxError(Exception):
    """Base of every error this package raises."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot start; the message says why and what to do."""
