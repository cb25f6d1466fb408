"""`agentd serve`: flags, config, start-up, shutdown."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import logging
import logging.handlers
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
    return parser.parse_args(argv)


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
        print(f"agentd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
