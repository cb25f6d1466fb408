"""`agentd serve`: flags, config, start-up, shutdown."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import logging
import logging.handlers
import os
import queue
import signal
import sys

from agentd.config import Config
from agentd.daemon import Daemon
from agentd.errors import AgentdError, ConfigError


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="agentd", description="The agentd daemon.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the daemon in the foreground")
    serve.add_argument("--config", help="TOML config file")
    serve.add_argument("--socket", dest="socket_path", help="unix socket path")
    serve.add_argument("--state-dir", help="where sessions, journal and outputs live")
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR")
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
    return parser.parse_args(argv)


def _tls_init(args: argparse.Namespace) -> int:
    from agentd import tls

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
    print(tls.instructions(files), end="")
    return 0


async def _serve(config: Config) -> None:
    daemon = Daemon(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(daemon.stop()))
    await daemon.start()
    print(
        f"agentd serving on unix:{config.socket_path} (state in {config.state_dir})",
        file=sys.stderr,
        flush=True,
    )
    await daemon.wait()


def _log_off_the_loop(level: str) -> None:
    """Log records are queued and written to stderr by a thread of their own: a slow
    reader of stderr (journald, a full pipe) must never stall the event loop."""
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    stderr = logging.StreamHandler()
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    listener = logging.handlers.QueueListener(records, stderr)
    listener.start()
    atexit.register(listener.stop)
    root = logging.getLogger()
    root.addHandler(logging.handlers.QueueHandler(records))
    root.setLevel(level.upper())


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.command == "tls":
        return _tls_init(args)
    try:
        config = Config.load(
            args.config,
            socket_path=args.socket_path,
            state_dir=args.state_dir,
            log_level=args.log_level,
        )
    except AgentdError as exc:
        print(f"agentd: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(_serve(config))
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
