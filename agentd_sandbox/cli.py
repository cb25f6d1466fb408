"""`agentd-sandbox run [...] -- CMD...` and `agentd-sandbox check`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import SandboxUnavailable
from .policy import Limits, SandboxPolicy
from .probe import check
from .runner import run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentd-sandbox", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a command in the sandbox; its exit code passes through")
    r.add_argument("--write", action="append", default=[], metavar="DIR", help="writable dir")
    r.add_argument("--hide", action="append", default=[], metavar="PATH", help="hide a path")
    r.add_argument("--net", action="store_true", help="allow network access")
    r.add_argument("--uid", type=int, help="uid to run as (root only; default 65534)")
    r.add_argument("--gid", type=int, help="gid to run as (root only)")
    r.add_argument("--cwd", help="working directory inside (default: the current one)")
    r.add_argument("--env", action="append", default=[], metavar="K=V", help="set a variable")
    r.add_argument("--timeout", type=float, metavar="S", help="wall-clock limit in seconds")
    r.add_argument("--memory", type=int, metavar="BYTES", help="memory per process")
    r.add_argument("--processes", type=int, metavar="N", help="processes of the sandbox uid")
    r.add_argument("--file-size", type=int, metavar="BYTES", help="largest file written")
    r.add_argument("--cpu", type=int, metavar="S", help="CPU seconds per process")
    r.add_argument("argv", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    c = sub.add_parser("check", help="report which protections this machine supports")
    c.add_argument("--human", action="store_true", help="a readable table instead of JSON")
    return parser


def _run(args: argparse.Namespace) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        print(
            "agentd-sandbox run: no command given (use: run [OPTIONS] -- CMD...)", file=sys.stderr
        )
        return 2
    env = dict(item.split("=", 1) for item in args.env if "=" in item)
    policy = SandboxPolicy(
        writable=args.write,
        hidden=args.hide,
        network=args.net,
        env=env,
        cwd=args.cwd or os.getcwd(),
        uid=args.uid,
        gid=args.gid,
        limits=Limits(
            wall_seconds=args.timeout,
            memory_bytes=args.memory,
            processes=args.processes,
            file_size_bytes=args.file_size,
            cpu_seconds=args.cpu,
        ),
    )
    try:
        return run(policy, argv)
    except (SandboxUnavailable, ValueError) as exc:
        print(f"agentd-sandbox: {exc}", file=sys.stderr)
        return 125


def _print_table(report: dict, indent: str = "") -> None:
    for key, value in report.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_table(value, indent + "  ")
        else:
            print(f"{indent}{key:<40} {value}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agentd-sandbox` command."""
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    report = check()
    if args.human:
        _print_table(report)
    else:
        print(json.dumps(report, indent=2))
    return 0 if report.get("sandbox_starts") else 1


if __name__ == "__main__":
    sys.exit(main())
