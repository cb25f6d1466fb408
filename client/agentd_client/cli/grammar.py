"""The pieces agentctl's command tree is built from: a parser whose usage errors exit 64,
leaves that each take --json and the connection options, and commands named as
"module:function" strings imported only when that command runs (as pip names its
commands), so building the tree loads no gRPC, protobuf or SDK."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from agentd_client.core.exits import Usage

# Where a command's "module:function" is looked up.
COMMANDS = "agentd_client.cli.commands"


class Parser(argparse.ArgumentParser):
    """Usage errors exit 64, so 2 keeps meaning "cannot reach the daemon"."""

    def error(self, message: str) -> Any:
        raise Usage(f"{message} (see `{self.prog} --help`)")


class ShowVersion(argparse.Action):
    """--version: the installed distribution's version, read only when asked for (reading
    the installed distributions' metadata costs more than the rest of the parse)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from agentd_client.cli.version import version

        print(f"agentctl {version()}")
        parser.exit()


def command(ref: str) -> Callable[..., int]:
    """The function a leaf names: "sessions:cmd_status" -> cli.commands.sessions.cmd_status."""
    module, _, name = ref.partition(":")
    func: Callable[..., int] = getattr(importlib.import_module(f"{COMMANDS}.{module}"), name)
    return func


def connection_options(p: argparse.ArgumentParser, default: Any) -> None:
    g = p.add_argument_group("where the daemon is (also AGENTD_* variables, and contexts)")
    g.add_argument(
        "--socket", default=default, help="the daemon's unix socket (instead of the context's)"
    )
    g.add_argument(
        "--address",
        default=default,
        help="HOST:PORT of its TLS listener (the context's CA and token file still apply)",
    )
    g.add_argument(
        "--server-name",
        default=default,
        help="the daemon's TLS name, when --address is an entry point that routes by name",
    )
    g.add_argument("--token-file", default=default, help="a file holding the bearer token")
    g.add_argument("--ca", default=default, help="the CA certificate that signed the daemon's")
    g.add_argument("--context", default=default, help="a context from `agentctl context ls`")


def json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for machines"
    )


class Unbuilt:
    """A command left out of a tree built for another one (`Tree(only=...)`): whatever
    the tree adds to it is dropped, since these words are never parsed with it."""

    def __getattr__(self, name: str) -> Unbuilt:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Unbuilt:
        return self


class Tree:
    """Adds leaf commands so each one has --json and the connection options. With
    `only`, the commands of this level other than that one are not built (their
    parsers and options are most of the time a parse takes)."""

    def __init__(self, sub: Any, only: str | None = None, parser: Any = None) -> None:
        self.sub = sub
        self.only = only
        self.parser = parser  # a group's own parser (its words before a subcommand)

    def _left_out(self, name: str) -> bool:
        return self.only is not None and name != self.only

    def leaf(
        self,
        name: str,
        help: str,
        func: str,
        *,
        daemon: bool = True,
        connection: bool | None = None,
    ) -> argparse.ArgumentParser:
        """`func` is "module:function" in cli/commands, imported when the command runs."""
        if self._left_out(name):
            return Unbuilt()  # type: ignore[return-value]
        p = self.sub.add_parser(name, help=help, description=help)
        json_option(p)
        if daemon if connection is None else connection:
            connection_options(p, argparse.SUPPRESS)
        p.set_defaults(func=func, needs_daemon=daemon)
        return p

    def group(self, name: str, help: str, dest: str, required: bool = True) -> Tree:
        if self._left_out(name):
            return Tree(Unbuilt(), parser=Unbuilt())
        p = self.sub.add_parser(name, help=help, description=help)
        sub = p.add_subparsers(dest=dest, required=required, parser_class=Parser)
        return Tree(sub, parser=p)


def session_option(p: argparse.ArgumentParser, default: Any = None, help: str = "") -> None:
    p.add_argument(
        "--session",
        "-s",
        default=default,
        help=help or "session name, id or unique id prefix (default $AGENTD_SESSION)",
    )
