"""The terminal socket: a unix socket beside the API socket, with its permissions (0600,
in the same private directory), served on the daemon's event loop; each connection a
TerminalConnection (channel.py), authorised by a one-time token from OpenTerminal, or a
forward stream (forward.py) by one from OpenForward."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat

from agentd.api.terminals.channel import TaskControl, factory
from agentd.api.terminals.forward import Streams
from agentd.api.terminals.tokens import TerminalTokens
from agentd.runs.output.registry import Outputs

log = logging.getLogger(__name__)


def terminal_socket_path(api_socket: str) -> str:
    """Where the terminal socket is: the API socket's directory, its name + ".term"."""
    return f"{api_socket}.term"


class TerminalServer:
    def __init__(
        self,
        api_socket: str,
        tokens: TerminalTokens,
        outputs: Outputs,
        control: TaskControl,
        forwards: Streams | None = None,
    ) -> None:
        self.path = terminal_socket_path(api_socket)
        self._forwards = forwards
        self._tokens = tokens
        self._outputs = outputs
        self._control = control
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> bool:
        """Listen; after the API server started (which checked the directory and that no
        other daemon serves it), so a socket left at the path is a stale one. False (and
        a warning) when it cannot: clients then use the gRPC streams."""
        try:
            with contextlib.suppress(FileNotFoundError):
                if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                    raise OSError(f"{self.path} exists and is not a socket")
                os.unlink(self.path)
            old_umask = os.umask(0o177)
            try:
                self._server = await asyncio.get_running_loop().create_unix_server(
                    factory(self._tokens, self._outputs, self._control, self._forwards), self.path
                )
            finally:
                os.umask(old_umask)
            os.chmod(self.path, 0o600)
        except OSError as exc:
            log.warning(
                "no terminal socket (%s): terminals use the gRPC streams; "
                "a shorter socket path or removing what is at %s gives it back",
                exc,
                self.path,
            )
            return False
        log.info("terminal socket on %s", self.path)
        return True

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
