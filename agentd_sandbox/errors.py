"""Errors of the sandbox.

SandboxError
 +-- SandboxUnavailable   the sandbox cannot start here (bwrap missing, user
      |                   namespaces off, no way to drop root); never run unsandboxed
      +-- PathGone        a path the policy names went, or became a link, since it
                          was planned: planning again may succeed
"""


class SandboxError(Exception):
    """Base of every error this package raises."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot start; the message says why and what to do."""


class PathGone(SandboxUnavailable):
    """A path the policy names is not there any more, or has a link on its way now."""
