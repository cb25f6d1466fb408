"""agentctl: the command-line client of agentd. What happens around a command: its words
parsed (tree.py), the daemon reached only for commands that need it, and failures said
in one line with an exit code.

Nothing here imports gRPC, protobuf or an SDK: a command's module is imported when it
runs, so `agentctl --version` answers at once and `agentctl status` loads only what it
uses (tests/e2e/test_agentctl_imports.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from agentd_client.core.exits import INTERRUPTED, OK, CliError

if TYPE_CHECKING:
    import argparse

# The command that serves MCP on stdio (its client reads only the protocol).
MCP_SERVE = "mcp:cmd_mcp"


def _rpc_failure(exc: BaseException, where: str, ca: str | None = None) -> CliError | None:
    """A failed RPC said for a person, or None if `exc` is not one. gRPC is looked at
    only if a command loaded it."""
    grpc = sys.modules.get("grpc")
    if grpc is None or not isinstance(exc, grpc.RpcError):
        return None
    from agentd_client.core.errors import from_rpc_error

    return from_rpc_error(exc, where, ca)


def _with_daemon(args: argparse.Namespace) -> int:
    """Runs a command that talks to the daemon, with a client for where it is."""
    from agentd_client.cli.commands.contexts import endpoint_of
    from agentd_client.cli.grammar import command
    from agentd_client.core import contexts

    endpoint = endpoint_of(args)
    args.default_session = endpoint.session
    args.endpoint = endpoint
    func = command(args.func)
    try:
        with contexts.open_client(endpoint, wait_for_ready=False) as client:
            return func(client, args)
    except Exception as exc:
        ca = endpoint.ca if endpoint.address else None
        if (error := _rpc_failure(exc, endpoint.where, ca)) is None:
            raise
        raise error from None


def _report(error: CliError, as_json: bool) -> int:
    from agentd_client.terminal import sanitize

    if as_json:
        import json

        line = {"error": error.message, "exit_code": error.exit_code}
        if error.grpc_status:
            line["grpc_status"] = error.grpc_status
        print(json.dumps(line), file=sys.stderr)
    else:
        # One line that says what to do next, whatever text of a model, a command or a
        # workspace it quotes (a name, a path, a daemon's message).
        print(f"agentctl: {sanitize.line(error.message)}", file=sys.stderr)
    return error.exit_code


def _refuse_mcp(error: CliError) -> None:
    """`agentctl mcp` could not start serving: its MCP client, which reads only the
    protocol, gets the reason as the handshake's error (mcp_refusal.py)."""
    from agentd_client.integrations.mcp_refusal import refuse

    refuse(f"agentctl mcp: {error.message}", sys.stdin.buffer, sys.stdout.buffer)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words == ["--version"]:  # what scripts ask most often: answered before any parse
        from agentd_client.cli.version import version

        print(f"agentctl {version()}")
        return OK
    # Imported here, after that answer: the parser and the terminal's guards.
    from agentd_client.cli.grammar import command
    from agentd_client.cli.tree import parse_args
    from agentd_client.terminal import hangup
    from agentd_client.terminal import streams as terminal

    as_json = "--json" in words
    # Everything printed from here on is safe text for a person (terminal.py); JSON
    # for machines is left exact.
    terminal.install(stdout=not as_json)
    serving_mcp = False
    args: Any = None
    try:
        try:
            args = parse_args(words)
            serving_mcp = args.func == MCP_SERVE
            if argv is None:  # the command itself, not a caller in this process
                # An MCP server ends when its client closes stdin, and then closes the
                # session it made: its stdout closing too at that moment is no hang-up.
                hangup.install(watch_output=not serving_mcp)
            if args.needs_daemon:
                return _with_daemon(args)
            return command(args.func)(args)
        except CliError:
            raise
        except Exception as exc:
            if (error := _rpc_failure(exc, "?")) is None:
                raise
            raise error from None
    except CliError as exc:
        code = _report(exc, as_json)
        if serving_mcp and not getattr(args, "mcp_serving", False):
            _refuse_mcp(exc)
        return code
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (hangup.py)
        hangup.say(f"agentctl: {hangup.why(exc)}")
        return hangup.exit_code(exc, INTERRUPTED)
    except BrokenPipeError:
        return OK


if __name__ == "__main__":
    sys.exit(main())
