"""agentctl's exit codes and its one-line errors: what a command ends with.

Apart from errors.py (the typed errors of failed RPCs, which need gRPC) so the parser and
the commands that never reach a daemon (`--version`, `context`, `completion`) load
nothing of gRPC.
"""

from __future__ import annotations

OK = 0
TOOL_FAILED = 1
UNREACHABLE = 2
REFUSED = 3
MODEL_FAILED = 4
USAGE = 64
MISSING = 69
INTERRUPTED = 130


EXIT_CODES_HELP = """\
exit status:
  0    ok
  1    the tool call failed (its result is an error)
  2    cannot reach the daemon (not running; wrong address, CA, token file or context)
  3    the daemon refused the request (wrong token, unknown session, invalid input)
  4    the model's API failed (agentctl agent)
  64   the command line is wrong
  69   the command needs a part of agentctl that is not installed (an extra)
  130  interrupted (Ctrl-C; a running call is cancelled first)
  128+N  ended by signal N (143 SIGTERM, 129 SIGHUP; a running call is cancelled first)"""


class CliError(Exception):
    exit_code = REFUSED

    def __init__(self, message: str, grpc_status: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.grpc_status = grpc_status


class Unreachable(CliError):
    exit_code = UNREACHABLE


class Refused(CliError):
    exit_code = REFUSED


class ModelFailed(CliError):
    exit_code = MODEL_FAILED


class Usage(CliError):
    exit_code = USAGE


class Missing(CliError):
    exit_code = MISSING


def need(module: str, extra: str, what: str) -> None:
    """Raises Missing, in one line saying what to install, unless `module` imports: the
    command adds the extra from where this agentd-client came from (agentd_client.core.origin)."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        from agentd_client.core.origin import install_command

        raise Missing(f"{what} needs the {module} package: {install_command(extra)}") from None
