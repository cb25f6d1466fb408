"""agentctl's command tree: every command, its options and help, and the "module:function"
that runs it (cli/commands/), imported only when it runs. Building it loads no gRPC,
protobuf or SDK, so `agentctl --version` and `--help` answer at once."""

from __future__ import annotations

import argparse
import contextlib

from agentd_client.cli import tree_groups
from agentd_client.cli.grammar import (
    Parser,
    ShowVersion,
    Tree,
    connection_options,
    json_option,
    session_option,
)
from agentd_client.core.exits import EXIT_CODES_HELP, Usage

# The permission modes a session may have (the daemon's agentd/sessions/session.py).
PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")
# What `mcp install` takes for each client, as people spell it.
MCP_CLIENTS = {
    "claude-code": "claude-code",
    "claude": "claude-code",
    "claudecode": "claude-code",
    "claude_code": "claude-code",
    "cc": "claude-code",
    "codex": "codex",
    "openai-codex": "codex",
    "codex-cli": "codex",
}


# The options before a command that take a value (connection_options).
_VALUED = ("--socket", "--address", "--server-name", "--token-file", "--ca", "--context")


def command_word(words: list[str]) -> str | None:
    """The command `words` run, read past the options before it; None when that is not
    plain (help, an abbreviated or unknown option, `--`): the whole tree parses those."""
    it = iter(words)
    for word in it:
        if word in _VALUED:
            next(it, None)
        elif word.partition("=")[0] in _VALUED and "=" in word:
            continue
        elif word.startswith("-"):
            return None
        else:
            return word
    return None


def parse_args(words: list[str]) -> argparse.Namespace:
    """`words` parsed by a tree holding only the command they name, which is most of the
    time a parse takes; the whole tree parses them again when that tree did not run that
    command, so every answer and error is the whole tree's."""
    only = command_word(words)
    if only is not None:
        with contextlib.suppress(Usage):
            args = build_parser(only).parse_args(words)
            if args.command == only:
                return args
    return build_parser().parse_args(words)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole tree, or with `only` the tree of that one command (`Tree`)."""
    p = Parser(
        prog="agentctl",
        description="Talk to the agentd daemon: on this machine's socket, or another's TLS "
        "listener (--address, --context).",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=ShowVersion, help="show agentctl's version and exit")
    connection_options(p, None)
    p.set_defaults(json=False)
    top = Tree(p.add_subparsers(dest="command", required=True, parser_class=Parser), only)

    top.leaf("status", "is the daemon up, and what is it doing", "sessions:cmd_status")

    sess = top.group("session", "create, list, show, close and gc sessions", "session_command")
    n = sess.leaf("new", "create a session on a workspace", "sessions:cmd_session_new")
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
    n.add_argument(
        "--ask-timeout",
        metavar="DURATION",
        help="how long its asks wait for an answer before they deny: 90s, 10m, 1h (1s to "
        "24h; default: the daemon's permission_timeout_seconds)",
    )
    n.add_argument(
        "--review",
        action="store_true",
        help="review mode: what a writing Bash call changes waits for `agentctl review`",
    )
    ls = sess.leaf("ls", "list sessions", "sessions:cmd_session_ls")
    ls.add_argument("--all", action="store_true", help="closed ones too")
    for name, help, func in (
        ("show", "one session as JSON", "sessions:cmd_session_show"),
        (
            "close",
            "close a session and stop its calls and tasks",
            "sessions:cmd_session_close",
        ),
    ):
        leaf = sess.leaf(name, help, func)
        leaf.add_argument("session", nargs="?", help="name, id or id prefix")
        if name == "close":
            leaf.add_argument(
                "-f", "--force", action="store_true", help="close it even if tasks are running"
            )
    gc = sess.leaf(
        "gc",
        "close idle sessions and delete what closed ones left (journal, output, files)",
        "sessions:cmd_session_gc",
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

    call = top.leaf("call", "run one tool call (Ctrl-C cancels it)", "calls:cmd_call")
    session_option(call)
    call.add_argument("--id", help="tool_use_id (default: generated)")
    call.add_argument(
        "--ask-timeout",
        metavar="DURATION",
        help="how long an ask of this call waits for an answer: 90s, 10m (1s to 24h; "
        "default: the session's)",
    )
    call.add_argument("tool")
    call.add_argument("input", help="the input as JSON, or - to read it from stdin")

    cancel = top.leaf("cancel", "cancel a running tool call", "calls:cmd_cancel")
    session_option(cancel)
    cancel.add_argument("call", help="the call's tool_use_id")

    t = top.leaf("tools", "list the tools", "calls:cmd_tools")
    t.add_argument("--format", choices=["table", "anthropic"], default="table")

    a = top.leaf("attach", "follow a session's events live", "attach:cmd_attach")
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
        "logs", "a task's or Bash call's output (every byte; -f follows)", "tasks:cmd_logs"
    )
    session_option(lg)
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
    tls = tk.leaf("ls", "list them (the default)", "tasks:cmd_tasks")
    session_option(tls, argparse.SUPPRESS)
    stop = tk.leaf("stop", "stop one and everything it started", "tasks:cmd_tasks_stop")
    session_option(stop, argparse.SUPPRESS)
    stop.add_argument("task", help="the task id")
    # `agentctl tasks --session S` lists, as before `tasks ls` existed.
    tasks_parser = tk.parser
    session_option(tasks_parser)
    json_option(tasks_parser)
    connection_options(tasks_parser, argparse.SUPPRESS)
    tasks_parser.set_defaults(func="tasks:cmd_tasks", needs_daemon=True)

    cf = top.leaf(
        "classify", "what the classifier says of a bash command", "permissions:cmd_classify"
    )
    cf.add_argument("command")

    pr = top.leaf(
        "perms",
        "show a session's permission mode and rules, or change them",
        "permissions:cmd_perms",
    )
    session_option(pr)
    pr.add_argument(
        "--mode",
        choices=PERMISSION_MODES,
        help="default (ask what the rules and classifier do not allow), acceptEdits (file "
        "edits in the workspace too), plan (read only), bypassPermissions (allow all but "
        "deny rules), dontAsk (deny what would ask)",
    )
    pr.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="RULE",
        help="add an allow rule, as Claude Code writes them: Bash(git commit:*), "
        "Edit(src/**), WebFetch(domain:example.com) (repeatable)",
    )
    pr.add_argument(
        "--deny", action="append", default=[], metavar="RULE", help="add a deny rule (wins)"
    )
    pr.add_argument(
        "--ask",
        action="append",
        default=[],
        metavar="RULE",
        help="add a rule that always asks, even where another allows",
    )
    pr.add_argument(
        "--ask-timeout",
        metavar="DURATION",
        help="how long the session's asks wait for an answer: 90s, 10m, 1h (1s to 24h; "
        "0: the daemon's default)",
    )

    for word, help, func in (
        ("approve", "allow a pending ask once, by the code attach shows", "asks:cmd_approve"),
        ("deny", "deny a pending ask, by its code", "asks:cmd_deny"),
        (
            "always",
            "allow a pending ask and keep its rule in the session, by its code",
            "asks:cmd_always",
        ),
    ):
        ans = top.leaf(word, help, func)
        ans.add_argument("code", metavar="CODE", help="the ask's four-character code")
        session_option(ans, help="the ask's session (default: every open session)")
        if word == "always":
            ans.add_argument(
                "--rule", help="one of the narrower rules the ask offers (default: its first)"
            )
        else:
            ans.set_defaults(rule="")

    net = top.leaf(
        "network",
        "a session's network: its mode, the hosts it reached or was refused; allow or deny "
        "hosts live",
        "network:cmd_network",
    )
    session_option(net)
    net.add_argument(
        "--allow", action="append", default=[], help="HOST or *.DOMAIN (a WebFetch(domain:) rule)"
    )
    net.add_argument("--deny", action="append", default=[], help="HOST or *.DOMAIN; deny wins")
    net.add_argument(
        "--preset",
        action="append",
        default=[],
        metavar="NAME",
        help="allow a named set of hosts (pypi, npm, package-registries, github): a "
        "WebFetch(preset:NAME) rule",
    )

    tree_groups.agent(top)

    mcp = top.leaf(
        "mcp",
        "serve a session's tools over MCP on stdio (for Claude Code, Codex, Cursor, ...)",
        "mcp:cmd_mcp",
    )
    session_option(mcp)
    mcp.add_argument(
        "--workspace",
        action="append",
        help="instead of --session: a new session on this workspace root (repeatable), "
        "closed when the MCP client goes away",
    )
    mcp.add_argument("--mode", help="the new session's permission mode")
    mcp.add_argument("--net", action="store_true", help="the new session's Bash may use the net")
    mcp_sub = Tree(mcp.add_subparsers(dest="mcp_command", required=False, parser_class=Parser))
    inst = mcp_sub.leaf(
        "install",
        "make an MCP client use agentd's tools instead of its own, in a workspace",
        "mcp:cmd_mcp_install",
        daemon=False,
        connection=True,
    )
    inst.add_argument(
        "client",
        type=_mcp_client,
        metavar="{claude-code,codex}",
        help="the MCP client (also: claude, cc; openai-codex)",
    )
    inst.add_argument("--workspace", required=True, help="the workspace the client runs in")
    session_option(inst)

    ctx = top.group("context", "named daemons to connect to (client.toml)", "context_command")
    add = ctx.leaf("add", "add or replace a context", "contexts:cmd_context_add", daemon=False)
    add.add_argument("name")
    add.add_argument("--address", help="HOST:PORT of the daemon's TLS listener")
    add.add_argument(
        "--server-name",
        help="the daemon's TLS name, when --address is an entry point routing by name (SNI)",
    )
    add.add_argument("--socket", help="a unix socket (local, or forwarded with ssh -L)")
    add.add_argument("--token-file", help="the file holding the bearer token")
    add.add_argument("--ca", help="the CA certificate (`agentd tls init` writes ca.pem)")
    add.add_argument("--session", help="the default session in this context")
    add.add_argument("--use", action="store_true", help="make it the current context")
    use = ctx.leaf(
        "use", "make a context the current one", "contexts:cmd_context_use", daemon=False
    )
    use.add_argument("name")
    rm = ctx.leaf("rm", "remove a context", "contexts:cmd_context_rm", daemon=False)
    rm.add_argument("name")
    ctx.leaf("ls", "list the contexts", "contexts:cmd_context_ls", daemon=False)
    ctx.leaf(
        "show",
        "where agentctl would connect now, and why",
        "contexts:cmd_context_show",
        daemon=False,
        connection=True,
    )

    comp = top.leaf(
        "completion", "print a shell completion script", "completion:cmd_completion", daemon=False
    )
    comp.add_argument("shell", choices=["bash", "zsh", "tcsh"])

    tree_groups.trust(top)
    top.leaf(
        "credentials",
        "credential sources and routes, and which sessions used them",
        "credentials:cmd_credentials",
    )
    tree_groups.task_terminal(top)
    tree_groups.forward(top)
    tree_groups.checkpoints(top)
    return p


def _mcp_client(word: str) -> str:
    """An MCP client's name as people spell it, as `mcp install` knows it."""
    found = MCP_CLIENTS.get(word.strip().lower())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"unknown MCP client {word!r}: use claude-code (or claude, cc) or codex"
        )
    return found
