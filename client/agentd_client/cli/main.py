"""agentctl: the command-line client of agentd. The parser, and what happens around a command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import grpc

from agentd_client.cli.commands import agent as _agent_cli
from agentd_client.cli.commands import attach as attach_commands
from agentd_client.cli.commands import calls as call_commands
from agentd_client.cli.commands import contexts as context_commands
from agentd_client.cli.commands import credentials as _credentials_cli
from agentd_client.cli.commands import exec as _exec_cli
from agentd_client.cli.commands import forward as _forward_cli
from agentd_client.cli.commands import mcp as mcp_commands
from agentd_client.cli.commands import network as network_commands
from agentd_client.cli.commands import permissions as perm_commands
from agentd_client.cli.commands import sessions as session_commands
from agentd_client.cli.commands import tasks as task_commands
from agentd_client.cli.commands import trust as _trust_cli
from agentd_client.cli.commands.contexts import endpoint_of
from agentd_client.cli.version import version
from agentd_client.core import contexts
from agentd_client.core.errors import (
    EXIT_CODES_HELP,
    INTERRUPTED,
    OK,
    CliError,
    Usage,
    from_rpc_error,
    need,
)
from agentd_client.terminal import hangup, sanitize
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.display import print_json

# Options that say where the daemon is; accepted before or after the command.
CONNECTION = ("socket", "address", "token_file", "ca", "context")


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 64, so 2 keeps meaning "cannot reach the daemon"."""

    def error(self, message: str) -> Any:
        raise Usage(f"{message} (see `{self.prog} --help`)")


def _connection_options(p: argparse.ArgumentParser, default: Any) -> None:
    g = p.add_argument_group("where the daemon is (also AGENTD_* variables, and contexts)")
    g.add_argument("--socket", default=default, help="the daemon's unix socket")
    g.add_argument("--address", default=default, help="HOST:PORT of its TLS listener")
    g.add_argument("--token-file", default=default, help="a file holding the bearer token")
    g.add_argument("--ca", default=default, help="the CA certificate that signed the daemon's")
    g.add_argument("--context", default=default, help="a context from `agentctl context ls`")


class _Tree:
    """Adds leaf commands so each one has --json and the connection options."""

    def __init__(self, sub: Any) -> None:
        self.sub = sub

    def leaf(
        self,
        name: str,
        help: str,
        func: Callable[..., int],
        *,
        daemon: bool = True,
        connection: bool | None = None,
    ) -> argparse.ArgumentParser:
        p = self.sub.add_parser(name, help=help, description=help)
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for machines"
        )
        if daemon if connection is None else connection:
            _connection_options(p, argparse.SUPPRESS)
        p.set_defaults(func=func, needs_daemon=daemon)
        return p

    def group(self, name: str, help: str, dest: str, required: bool = True) -> _Tree:
        p = self.sub.add_parser(name, help=help, description=help)
        return _Tree(p.add_subparsers(dest=dest, required=required, parser_class=_Parser))


def _session_option(p: argparse.ArgumentParser, default: Any = None) -> None:
    p.add_argument(
        "--session",
        "-s",
        default=default,
        help="session name, id or unique id prefix (default $AGENTD_SESSION)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="agentctl",
        description="Talk to the agentd daemon: on this machine's socket, or another's TLS "
        "listener (--address, --context).",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"agentctl {version()}")
    _connection_options(p, None)
    p.set_defaults(json=False)
    top = _Tree(p.add_subparsers(dest="command", required=True, parser_class=_Parser))

    top.leaf("status", "is the daemon up, and what is it doing", session_commands.cmd_status)

    sess = top.group("session", "create, list, show, close and gc sessions", "session_command")
    n = sess.leaf("new", "create a session on a workspace", session_commands.cmd_session_new)
    n.add_argument("--workspace", action="append", required=True, help="a workspace root")
    n.add_argument("--cwd")
    n.add_argument("--name", help="a name to use instead of the id (unique among open sessions)")
    n.add_argument("--label", action="append", default=[], help="KEY=VALUE")
    n.add_argument("--env", action="append", default=[], help="KEY=VALUE for every command")
    n.add_argument("--mode", help="permission mode")
    n.add_argument(
        "--net", action="store_true", help="let Bash reach the network unfiltered (--network on)"
    )
    n.add_argument(
        "--network",
        choices=("proxied", "off", "on"),
        help="proxied (the default: out only through agentd's proxy, hosts allowed by name), "
        "off, or on",
    )
    ls = sess.leaf("ls", "list sessions", session_commands.cmd_session_ls)
    ls.add_argument("--all", action="store_true", help="closed ones too")
    for name, help, func in (
        ("show", "one session as JSON", session_commands.cmd_session_show),
        (
            "close",
            "close a session and stop its calls and tasks",
            session_commands.cmd_session_close,
        ),
    ):
        leaf = sess.leaf(name, help, func)
        leaf.add_argument("session", nargs="?", help="name, id or id prefix")
    gc = sess.leaf(
        "gc",
        "close idle sessions and delete what closed ones left (journal, output, files)",
        session_commands.cmd_session_gc,
    )
    gc.add_argument(
        "--idle",
        default="",
        help="close open sessions idle this long, e.g. 12h, 7d (default: the daemon's "
        "session_idle_seconds)",
    )
    gc.add_argument(
        "--reap-after",
        default="",
        help="delete closed sessions closed this long ago, e.g. 1d; 0 for all now "
        "(default: the daemon's retention_seconds)",
    )
    gc.add_argument("--dry-run", action="store_true", help="only say what would be done")

    call = top.leaf("call", "run one tool call (Ctrl-C cancels it)", call_commands.cmd_call)
    _session_option(call)
    call.add_argument("--id", help="tool_use_id (default: generated)")
    call.add_argument("tool")
    call.add_argument("input", help="the input as JSON, or - to read it from stdin")

    cancel = top.leaf("cancel", "cancel a running tool call", call_commands.cmd_cancel)
    _session_option(cancel)
    cancel.add_argument("call", help="the call's tool_use_id")

    t = top.leaf("tools", "list the tools", call_commands.cmd_tools)
    t.add_argument("--format", choices=["table", "anthropic"], default="table")

    a = top.leaf("attach", "follow a session's events live", attach_commands.cmd_attach)
    a.add_argument("session", nargs="?", help="name, id or id prefix (default $AGENTD_SESSION)")
    a.add_argument(
        "--from",
        dest="start",
        default="start",
        metavar="start|now|SEQ",
        help="start (replay everything, the default), now (live only), or an event seq",
    )
    a.add_argument("--after-seq", type=int, help=argparse.SUPPRESS)
    a.add_argument(
        "--raw",
        action="store_true",
        help="commands' output as the bytes they wrote (colours, and any escape sequence "
        "in them: only for output you trust); never prompts",
    )

    lg = top.leaf(
        "logs", "a task's or Bash call's output (every byte; -f follows)", task_commands.cmd_logs
    )
    _session_option(lg)
    lg.add_argument("id", metavar="TASK|CALL", help="a task id or a Bash call's tool_use_id")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    lg.add_argument(
        "--from-start", action="store_true", help="all of it (default: the last 10 lines)"
    )
    lg.add_argument(
        "--raw",
        action="store_true",
        help="the bytes as they are, on a terminal too (default there: control characters "
        "and escape sequences shown, not run; to a pipe or file the bytes are always raw)",
    )

    tk = top.group("tasks", "a session's background tasks", "tasks_command", required=False)
    tls = tk.leaf("ls", "list them (the default)", task_commands.cmd_tasks)
    _session_option(tls, argparse.SUPPRESS)
    stop = tk.leaf("stop", "stop one and everything it started", task_commands.cmd_tasks_stop)
    _session_option(stop, argparse.SUPPRESS)
    stop.add_argument("task", help="the task id")
    # `agentctl tasks --session S` lists, as before `tasks ls` existed.
    tasks_parser = top.sub.choices["tasks"]
    _session_option(tasks_parser)
    tasks_parser.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for machines"
    )
    _connection_options(tasks_parser, argparse.SUPPRESS)
    tasks_parser.set_defaults(func=task_commands.cmd_tasks, needs_daemon=True)

    cf = top.leaf(
        "classify", "what the classifier says of a bash command", perm_commands.cmd_classify
    )
    cf.add_argument("command")

    pr = top.leaf("perms", "change a session's permission mode and rules", perm_commands.cmd_perms)
    _session_option(pr)
    pr.add_argument("--mode")
    pr.add_argument("--allow", action="append", default=[])
    pr.add_argument("--deny", action="append", default=[])
    pr.add_argument("--ask", action="append", default=[])

    net = top.leaf(
        "network",
        "a session's network: its mode, the hosts it reached or was refused; allow or deny "
        "hosts live",
        network_commands.cmd_network,
    )
    _session_option(net)
    net.add_argument(
        "--allow", action="append", default=[], help="HOST or *.DOMAIN (a WebFetch(domain:) rule)"
    )
    net.add_argument("--deny", action="append", default=[], help="HOST or *.DOMAIN; deny wins")

    _agent_cli.add_commands(top)

    mcp = top.leaf(
        "mcp",
        "serve a session's tools over MCP on stdio (for Claude Code, Codex, Cursor, ...)",
        mcp_commands.cmd_mcp,
    )
    _session_option(mcp)
    mcp.add_argument(
        "--workspace",
        action="append",
        help="instead of --session: a new session on this workspace root (repeatable), "
        "closed when the MCP client goes away",
    )
    mcp.add_argument("--mode", help="the new session's permission mode")
    mcp.add_argument("--net", action="store_true", help="the new session's Bash may use the net")
    mcp_sub = _Tree(mcp.add_subparsers(dest="mcp_command", required=False, parser_class=_Parser))
    inst = mcp_sub.leaf(
        "install",
        "make an MCP client use agentd's tools instead of its own, in a workspace",
        mcp_commands.cmd_mcp_install,
        daemon=False,
        connection=True,
    )
    inst.add_argument("client", choices=["claude-code", "codex"], help="the MCP client")
    inst.add_argument("--workspace", required=True, help="the workspace the client runs in")
    _session_option(inst)

    ctx = top.group("context", "named daemons to connect to (client.toml)", "context_command")
    add = ctx.leaf(
        "add", "add or replace a context", context_commands.cmd_context_add, daemon=False
    )
    add.add_argument("name")
    add.add_argument("--address", help="HOST:PORT of the daemon's TLS listener")
    add.add_argument("--socket", help="a unix socket (local, or forwarded with ssh -L)")
    add.add_argument("--token-file", help="the file holding the bearer token")
    add.add_argument("--ca", help="the CA certificate (`agentd tls init` writes ca.pem)")
    add.add_argument("--session", help="the default session in this context")
    add.add_argument("--use", action="store_true", help="make it the current context")
    use = ctx.leaf(
        "use", "make a context the current one", context_commands.cmd_context_use, daemon=False
    )
    use.add_argument("name")
    rm = ctx.leaf("rm", "remove a context", context_commands.cmd_context_rm, daemon=False)
    rm.add_argument("name")
    ctx.leaf("ls", "list the contexts", context_commands.cmd_context_ls, daemon=False)
    ctx.leaf(
        "show",
        "where agentctl would connect now, and why",
        context_commands.cmd_context_show,
        daemon=False,
        connection=True,
    )

    comp = top.leaf("completion", "print a shell completion script", cmd_completion, daemon=False)
    comp.add_argument("shell", choices=["bash", "zsh", "tcsh"])

    _trust_cli.add_commands(top)
    _credentials_cli.add_commands(top)
    _exec_cli.add_commands(top)
    _forward_cli.add_commands(top)
    return p


def cmd_completion(args: argparse.Namespace) -> int:
    need("shtab", "cli", "agentctl completion")
    import shtab

    script = shtab.complete(build_parser(), shell=args.shell)
    if args.json:
        print_json({"shell": args.shell, "script": script})
    else:
        print(script)
    return OK


def _report(error: CliError, as_json: bool) -> int:
    if as_json:
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
    as_json = "--json" in (sys.argv[1:] if argv is None else argv)
    # Everything printed from here on is safe text for a person (terminal.py); JSON
    # for machines is left exact.
    terminal.install(stdout=not as_json)
    endpoint: contexts.Endpoint | None = None
    serving_mcp = False
    try:
        try:
            args = build_parser().parse_args(argv)
            serving_mcp = args.func is mcp_commands.cmd_mcp
            if argv is None:  # the command itself, not a caller in this process
                # An MCP server ends when its client closes stdin, and then closes the
                # session it made: its stdout closing too at that moment is no hang-up.
                hangup.install(watch_output=not serving_mcp)
            if not args.needs_daemon:
                return args.func(args)
            endpoint = endpoint_of(args)
            args.default_session = endpoint.session
            args.endpoint = endpoint
            with contexts.open_client(endpoint, wait_for_ready=False) as client:
                return args.func(client, args)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, endpoint.where if endpoint else "?") from None
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
