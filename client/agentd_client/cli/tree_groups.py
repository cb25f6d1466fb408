"""The command groups of agentctl's tree that stand apart from the session commands:
`agent`, `trust`, a task's terminal (`exec`, `attach-task`, `task-input`, `task-signal`),
`forward` and `ports`. Each command named as "module:function" (cli/commands/)."""

from __future__ import annotations

import argparse

from agentd_client.cli.grammar import Tree
from agentd_client.integrations.defaults import DEFAULT_MODEL
from agentd_client.terminal.rawterm import DEFAULT_DETACH

# Bytes of a task's past output `attach-task` shows first.
REPLAY_BYTES = 16384


def agent(top: Tree) -> None:
    a = top.leaf(
        "agent",
        "run an agent loop (the anthropic API) on a session's tools; every attached "
        "terminal watches it, and --resume continues it from anywhere (Ctrl-C stops it)",
        "agent:cmd_agent",
    )
    which = a.add_mutually_exclusive_group()
    which.add_argument(
        "--session",
        "-s",
        help="the session to work in (default $AGENTD_SESSION), a new conversation",
    )
    which.add_argument("--workspace", action="append", help="a new session on this root")
    which.add_argument(
        "--resume", metavar="SESSION", help="continue the session's latest conversation"
    )
    a.add_argument("prompt", help="what to do; - reads it from stdin")
    a.add_argument("--mode", help="the new session's permission mode (with --workspace)")
    a.add_argument("--net", action="store_true", help="the new session's Bash may use the net")
    a.add_argument("--model", help=f"default: [agent] model in client.toml, else {DEFAULT_MODEL}")
    a.add_argument("--system", help="the system prompt (default: agentd's own)")
    a.add_argument("--system-file", help="read the system prompt from this file")
    a.add_argument("--max-turns", type=int, help="model turns in this run (default 50)")
    a.add_argument("--max-tokens", type=int, help="tokens of one model response (default 8192)")
    a.add_argument(
        "--budget", type=int, help="stop once this run used this many tokens (default: none)"
    )


def trust(top: Tree) -> None:
    tr = top.group(
        "trust", "trusted workspace settings content: ls, approve, revoke", "trust_command"
    )
    ls = tr.leaf("ls", "trusted contents, and open sessions' settings files", "trust:cmd_trust_ls")
    ls.add_argument("--path", help="only this settings file (or a workspace's settings.json)")
    ap = tr.leaf("approve", "trust a settings file's current content", "trust:cmd_trust_approve")
    ap.add_argument("path", help="WS/.claude/settings.json, settings.local.json, or WS")
    ap.add_argument("--sha256", help="the content to trust (default: show it and ask)")
    ap.add_argument("--yes", action="store_true", help="do not ask; trust the content shown")
    rv = tr.leaf("revoke", "drop approvals of a settings file", "trust:cmd_trust_revoke")
    rv.add_argument("path")
    rv.add_argument("--sha256", help="only this content (default: every approved one)")


def _task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="the task id (agentctl tasks)")
    p.add_argument("--session", "-s", help="its session (default: the open session that has it)")


def task_terminal(top: Tree) -> None:
    ex = top.leaf(
        "exec",
        "run a command in a session's sandbox as a task you drive (-it: a terminal)",
        "exec:cmd_exec",
    )
    ex.add_argument("-i", "--interactive", action="store_true", help="send this stdin to it")
    ex.add_argument("-t", "--tty", action="store_true", help="on a terminal of this one's size")
    ex.add_argument("--detach-keys", default=DEFAULT_DETACH, help="default ctrl-p,ctrl-q")
    ex.add_argument("session_ref", metavar="SESSION", help="session name, id or id prefix")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command")
    at = top.leaf(
        "attach-task",
        "connect this terminal to a running task: its output, your keys",
        "exec:cmd_attach_task",
    )
    _task_args(at)
    at.add_argument(
        "--replay", type=int, default=REPLAY_BYTES, help="bytes of past output shown first"
    )
    at.add_argument("--no-stdin", action="store_true", help="watch only; send no keys")
    at.add_argument("--detach-keys", default=DEFAULT_DETACH, help="default ctrl-p,ctrl-q")
    ti = top.leaf(
        "task-input",
        "send stdin (or --data) to a task's stdin; --close ends it",
        "exec:cmd_task_input",
    )
    _task_args(ti)
    ti.add_argument("--data", help="send this text instead of reading stdin")
    ti.add_argument("--close", action="store_true", help="then close its stdin (EOF)")
    ts = top.leaf(
        "task-signal", "send INT, TERM, HUP or KILL to a task's processes", "exec:cmd_task_signal"
    )
    _task_args(ts)
    ts.add_argument("signal", help="INT, TERM, HUP or KILL")


def forward(top: Tree) -> None:
    fw = top.leaf(
        "forward",
        "reach a port of a session's sandbox from this machine, over agentctl's connection",
        "forward:cmd_forward",
    )
    fw.add_argument("session_name", metavar="SESSION", help="session name, id or id prefix")
    fw.add_argument(
        "spec", metavar="[LOCAL:]PORT", help="the sandbox's port (and the local one; 0: any)"
    )
    fw.add_argument(
        "--bind",
        default="127.0.0.1",
        help="the local address to listen on (default 127.0.0.1; 0.0.0.0 lets your whole "
        "network reach the sandbox's server)",
    )
    ps = top.leaf("ports", "what listens in a session's sandbox", "forward:cmd_ports")
    ps.add_argument(
        "session_name",
        metavar="SESSION",
        nargs="?",
        help="session name, id or id prefix (default $AGENTD_SESSION)",
    )


def checkpoints(top: Tree) -> None:
    """What each writing call changed, and putting it back."""
    ls = top.leaf(
        "checkpoints",
        "a session's writing calls and what each changed (newest last)",
        "checkpoints:cmd_checkpoints",
    )
    ls.add_argument("session", metavar="SESSION", help="session name, id or unique id prefix")
    df = top.leaf(
        "diff", "what a call changed (--since: it and everything after)", "checkpoints:cmd_diff"
    )
    df.add_argument("session", metavar="SESSION")
    df.add_argument("call", metavar="CALL", help="the call's tool_use_id (agentctl checkpoints)")
    df.add_argument("--since", action="store_true", help="from CALL to now (or to --to)")
    df.add_argument("--to", default="", metavar="CALL", help="with --since: up to this call")
    fmt = df.add_mutually_exclusive_group()
    fmt.add_argument("--stat", dest="format", action="store_const", const="stat")
    fmt.add_argument("--names", dest="format", action="store_const", const="names")
    df.set_defaults(format="unified")
    df.add_argument("paths", nargs="*", metavar="PATH", help="only these paths")
    rs = top.leaf(
        "restore", "put back what a call changed, as before it", "checkpoints:cmd_restore"
    )
    rs.add_argument("session", metavar="SESSION")
    rs.add_argument("call", metavar="CALL")
    rs.add_argument("paths", nargs="*", metavar="PATH", help="only these paths")
    rw = top.leaf("rewind", "undo a call and every call after it", "checkpoints:cmd_rewind")
    rw.add_argument("session", metavar="SESSION")
    rw.add_argument("call", metavar="CALL")
    rw.add_argument("--yes", action="store_true", help="do not ask; rewind what is shown")
    for p in (rs, rw):
        p.add_argument(
            "--dry-run", action="store_true", help="show what would change; change nothing"
        )
        how = p.add_mutually_exclusive_group()
        how.add_argument(
            "--force",
            dest="on_conflict",
            action="store_const",
            const="overwrite",
            help="overwrite paths changed since (outside the agent, or by a running task)",
        )
        how.add_argument(
            "--skip",
            dest="on_conflict",
            action="store_const",
            const="skip",
            help="leave paths with a conflict as they are; restore the rest",
        )
        p.set_defaults(on_conflict="")
    rv = top.leaf(
        "review",
        "review mode: the changes waiting in a session; --apply or --discard them",
        "review:cmd_review",
    )
    rv.add_argument("session", metavar="SESSION")
    what = rv.add_mutually_exclusive_group()
    what.add_argument("--apply", dest="action", action="store_const", const="apply")
    what.add_argument("--discard", dest="action", action="store_const", const="discard")
    rv.add_argument(
        "--id", type=int, default=0, help="the change set shown (default: the one waiting)"
    )
    rv.add_argument(
        "--force", action="store_true", help="with --apply: over paths changed since the command"
    )
    rv.add_argument("--stat", dest="format", action="store_const", const="stat")
    rv.set_defaults(format="unified", action="")
