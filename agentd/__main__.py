"""`agentd serve`: flags, config, start-up, shutdown.

Each command imports what it needs when it runs: `agentd health` is a container's and
Kubernetes' probe (a 3 s budget on a busy node) and `--version` is asked by scripts,
so neither loads the daemon (bench/health.py measures both against grpcurl).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import warnings
from typing import TYPE_CHECKING

from agentd import __version__

if TYPE_CHECKING:
    import asyncio

    from agentd.daemon import Daemon
    from agentd.foundation.config import Config

log = logging.getLogger("agentd")


def build_parser() -> argparse.ArgumentParser:
    """agentd's command line (scripts/gen_docs.py renders it into the reference)."""
    parser = argparse.ArgumentParser(prog="agentd", description="The agentd daemon.")
    parser.add_argument("--version", action="version", version=f"agentd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the daemon (in the foreground unless --detach)")
    serve.add_argument(
        "--detach",
        action="store_true",
        help="run in the background, logging to STATE_DIR/agentd.log; `agentd stop` stops it",
    )
    serve.add_argument("--config", help="TOML config file")
    serve.add_argument("--socket", dest="socket_path", help="unix socket path")
    serve.add_argument("--state-dir", help="where sessions, journal and outputs live")
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR")
    serve.add_argument("--log-format", help="text (default) or json")
    serve.add_argument(
        "--metrics-listen", metavar="HOST:PORT", help="serve Prometheus metrics here"
    )
    serve.add_argument(
        "--tmp-owners-dir",
        metavar="DIR",
        help="where sessions' /tmp directories are recorded (default: shared by this user)",
    )
    serve.add_argument(
        "--accept-journal-loss",
        action="store_true",
        help="start even when the state database lacks commits agentd acknowledged "
        "(a damaged write-ahead log): go on with what it holds",
    )
    health = sub.add_parser(
        "health", help="exit 0 if the daemon's gRPC health service says SERVING (for probes)"
    )
    health.add_argument("--socket", dest="socket_path", help="unix socket path")
    health.add_argument("--timeout", type=float, default=5.0, help="seconds (5)")
    serve.add_argument(
        "--stop-tasks-on-exit",
        action="store_true",
        default=None,
        help="stopping the daemon stops its background tasks too (default: they run on)",
    )
    stop = sub.add_parser(
        "stop", help="stop the running daemon; background tasks run on unless --tasks"
    )
    stop.add_argument("--config", help="TOML config file")
    stop.add_argument("--socket", dest="socket_path", help="unix socket path")
    stop.add_argument("--state-dir", help="the daemon's state dir")
    stop.add_argument("--tasks", action="store_true", help="stop its background tasks too")
    stop.add_argument("--json", action="store_true", help="print the result as JSON")
    backup = sub.add_parser(
        "backup", help="copy the state database while the daemon runs (restore: see README)"
    )
    backup.add_argument("out", help="the file to write (must not exist)")
    backup.add_argument("--config", help="TOML config file")
    backup.add_argument("--state-dir", help="the daemon's state dir")
    backup.add_argument("--json", action="store_true", help="print the result as JSON")
    tls = sub.add_parser("tls", help="TLS for the TCP listener")
    tls_sub = tls.add_subparsers(dest="tls_command", required=True)
    tls_init = tls_sub.add_parser(
        "init", help="make a CA, a server certificate and a token file, and print the config"
    )
    tls_init.add_argument("--dir", help="where to write them (default ~/.config/agentd/tls)")
    tls_init.add_argument(
        "--name",
        action="append",
        default=[],
        help="a DNS name or IP clients use to reach this host (repeatable); "
        "the host's own names, 127.0.0.1 and ::1 are always included",
    )
    tls_init.add_argument("--listen", help="the tcp_listen address to print (0.0.0.0:7777)")
    tls_init.add_argument("--days", type=int, default=825, help="validity (825)")
    tls_init.add_argument("--force", action="store_true", help="replace existing files")
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _tls_init(args: argparse.Namespace) -> int:
    from agentd.api import tls
    from agentd.foundation.config import config_file_path
    from agentd.foundation.errors import AgentdError

    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    directory = args.dir or os.path.join(base, "agentd", "tls")
    try:
        files = tls.init(
            directory, args.name, args.listen or tls.DEFAULT_LISTEN, args.days, args.force
        )
    except AgentdError as exc:
        print(f"agentd: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"agentd: cannot write into {directory}: {exc.strerror}", file=sys.stderr)
        return 2
    print(tls.instructions(files, config_file_path()), end="")
    return 0


def _health(args: argparse.Namespace) -> int:
    from agentd.cli import health
    from agentd_client.core.paths import default_socket_path

    serving, line = health.check(args.socket_path or default_socket_path(), args.timeout)
    print(line, file=sys.stdout if serving else sys.stderr)
    return 0 if serving else 1


def _stop(args: argparse.Namespace) -> int:
    import json

    from agentd.cli import stop as stopping
    from agentd.foundation.config import Config
    from agentd.foundation.errors import AgentdError

    try:
        config = Config.load(args.config, socket_path=args.socket_path, state_dir=args.state_dir)
        result = stopping.stop(config, args.tasks)
    except (AgentdError, OSError) as exc:
        print(f"agentd: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        tasks = f"; {result['tasks_stopped']} task(s) stopped" if args.tasks else ""
        print(f"agentd: {result['daemon']}{tasks}")
    return 0 if result["daemon"] != "still stopping" else 1


def _backup(args: argparse.Namespace) -> int:
    import json
    import sqlite3

    from agentd.cli import backup as backing_up
    from agentd.foundation.config import Config
    from agentd.foundation.errors import AgentdError

    try:
        config = Config.load(args.config, state_dir=args.state_dir)
        result = backing_up.backup(config, args.out)
    except (AgentdError, OSError, sqlite3.Error) as exc:
        print(f"agentd: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        print(f"agentd: backed up {result['sessions']} session(s) to {result['path']}")
    return 0


def _load(args: argparse.Namespace) -> Config:
    from agentd.foundation import logs, metrics
    from agentd.foundation.config import Config

    config = Config.load(
        args.config,
        socket_path=args.socket_path,
        state_dir=args.state_dir,
        log_level=args.log_level,
        log_format=args.log_format,
        metrics_listen=args.metrics_listen,
        tmp_owners_dir=args.tmp_owners_dir,
        stop_tasks_on_exit=args.stop_tasks_on_exit,
    )
    logs.check_level(config.log_level)
    logs.check_format(config.log_format)
    if config.metrics_listen:
        metrics.parse_listen(config.metrics_listen)
    return config


def _reload(daemon: Daemon, args: argparse.Namespace) -> None:
    """SIGHUP: read the config again and apply what can change live; a bad config is
    logged and the running one kept. The flags still win over the file."""
    from agentd.foundation import metrics
    from agentd.foundation.errors import AgentdError

    try:
        summary = daemon.reload(_load(args))
    except AgentdError as exc:
        metrics.RELOADS.labels("error").inc()
        log.error("reload failed, keeping the running config: %s", exc)
        return
    metrics.RELOADS.labels("ok").inc()
    log.info("%s", summary)


def _stall_for_tests(loop: asyncio.AbstractEventLoop) -> None:
    """Test-only: with AGENTD_TEST_STALL_FIFO set, SIGUSR2 blocks the event loop until a
    line is written to that FIFO. The watchdog test needs a loop that is stuck while the
    process runs on; nothing in a client's reach can do this, and without the variable
    (every real deployment) no handler exists."""
    fifo = os.environ.pop("AGENTD_TEST_STALL_FIFO", "")
    if not fifo:
        return

    def stall() -> None:
        log.warning("test stall: blocking the event loop until %s is written", fifo)
        with open(fifo) as f:  # blocks the loop, on purpose
            f.readline()
        log.warning("test stall: event loop running again")

    loop.add_signal_handler(signal.SIGUSR2, stall)


def _pidfd_child_watcher() -> None:
    """On Python 3.11, wait for children with a pidfd on the loop, as 3.12+ does itself.

    3.11's default (ThreadedChildWatcher) starts a thread per child to block in
    waitpid: one per Bash call, search and hook, ~0.6 ms of the loop's time each.
    """
    import asyncio

    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return  # a kernel without pidfds (< 5.3): keep the threads
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())  # the daemon's one loop
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(watcher)


async def _serve(config: Config, args: argparse.Namespace) -> None:
    import asyncio

    from agentd.daemon import Daemon
    from agentd.foundation import logs

    _pidfd_child_watcher()
    daemon = Daemon(config, accept_journal_loss=args.accept_journal_loss)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(daemon.stop()))
    loop.add_signal_handler(signal.SIGHUP, _reload, daemon, args)
    _stall_for_tests(loop)
    try:
        await daemon.start()
    except BaseException:
        daemon.abandon()
        raise
    logs.announce(
        f"agentd serving on unix:{config.socket_path} (state in {config.state_dir})",
        config.log_format,
    )
    if config.log_format != "json":
        logs.announce(NEXT_STEP, config.log_format)
    await daemon.wait()


# What a person who started the daemon in a terminal does next.
NEXT_STEP = (
    "agentd: next, in another terminal: `agentctl status`, then "
    "`agentctl session new --workspace DIR --name NAME`; Ctrl-C stops the daemon "
    "(`agentd serve --detach` or `make run-background` runs it in the background)"
)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.command == "health":
        return _health(args)
    if args.command == "tls":
        return _tls_init(args)
    if args.command == "stop":
        return _stop(args)
    if args.command == "backup":
        return _backup(args)
    import asyncio

    from agentd.foundation import logs
    from agentd.foundation.errors import AgentdError, ConfigError

    try:
        config = _load(args)
    except AgentdError as exc:
        print(f"agentd: {exc}", file=sys.stderr)
        return 2
    if args.detach:
        from agentd.cli import detach

        return detach.start(config, sys.argv[1:] if argv is None else argv)
    logs.setup(config.log_level, config.log_format)
    try:
        asyncio.run(_serve(config, args))
    except ConfigError as exc:  # a path or setting refused at start-up
        print(f"agentd: {exc}", file=sys.stderr)
        return 2
    except AgentdError as exc:
        # A fault in the settings or the environment found at start-up (a missing
        # cert, a bad key, a busy port, a live socket): one line, exit 2.
        print(f"agentd: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
