"""`agentctl agent`: the command around agent.py's loop -- its flags and settings, the
session it runs in, and what it prints."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from agentd_client.cli import names
from agentd_client.core import contexts
from agentd_client.core.calls import ToolResult
from agentd_client.core.client import Client
from agentd_client.core.errors import INTERRUPTED, OK, ModelFailed, Refused, Usage, need
from agentd_client.terminal import sanitize
from agentd_client.terminal.display import as_dict, print_json_line
from agentd_client.v1 import agentd_pb2 as pb

# Settings in the client config's [agent] table (client.toml, see contexts.py), and
# their types; flags win over them.
CONFIG_KEYS = {
    "model": str,
    "system": str,
    "system_file": str,
    "max_turns": int,
    "max_tokens": int,
    "budget": int,
}


def _config() -> dict[str, Any]:
    section = contexts.load().get("agent", {})
    if not isinstance(section, dict):
        raise Usage(f"{contexts.config_path()}: [agent] must be a table")
    out = {}
    for key, value in section.items():
        kind = CONFIG_KEYS.get(key)
        if kind is None:
            raise Usage(
                f"{contexts.config_path()}: [agent] has no setting {key!r}; "
                f"known: {', '.join(CONFIG_KEYS)}"
            )
        if not isinstance(value, kind) or isinstance(value, bool):
            what = "an integer" if kind is int else "a string"
            raise Usage(f"{contexts.config_path()}: [agent] {key} must be {what}")
        out[key] = value
    return out


def settings(args: argparse.Namespace) -> Any:
    """Flags, then the config's [agent] table, then the defaults."""
    from agentd_client.integrations.agent import Settings

    config = _config()
    chosen = {k: getattr(args, k) for k in CONFIG_KEYS if getattr(args, k) is not None}
    if "system" in chosen and "system_file" in chosen:
        raise Usage("give --system or --system-file, not both")
    if "system" in chosen or "system_file" in chosen:
        config.pop("system", None)
        config.pop("system_file", None)
    merged = {**config, **chosen}
    if path := merged.pop("system_file", None):
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                merged["system"] = f.read()
        except OSError as exc:
            raise Usage(f"cannot read the system prompt {path}: {exc.strerror}") from None
    s = Settings(**merged)
    for key in ("max_turns", "max_tokens"):
        if getattr(s, key) < 1:
            raise Usage(f"{key.replace('_', '-')} must be at least 1")
    if s.budget < 0:
        raise Usage("budget must be 0 (none) or more")
    return s


def _first_line(text: str, width: int = 160) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0][:width] if stripped else ""


class HumanPrinter:
    """The text as it streams; a line per tool call and per result; the stop on stderr."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.at_line_start = True

    def text(self, turn: int, text: str) -> None:
        text = sanitize.text(text)  # the model's text: its newlines kept, nothing else acts
        sys.stdout.write(text)
        sys.stdout.flush()
        if text:
            self.at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        if not self.at_line_start:
            print()
        print(text, flush=True)
        self.at_line_start = True

    def message(self, event: pb.AgentEvent) -> None:
        for b in event.message.content:
            if b.type == "tool_use":
                from google.protobuf.json_format import MessageToDict

                shown = json.dumps(MessageToDict(b.input), ensure_ascii=False)
                self._line(sanitize.line(f"▶ {b.name} {shown[:200]}"))
        if not self.at_line_start:
            print(flush=True)
            self.at_line_start = True

    def results(self, results: list[ToolResult]) -> None:
        for r in results:
            mark = "✗" if r.is_error else "✓"
            self._line(sanitize.line(f"{mark} {r.tool_use_id} {_first_line(r.text)}"))

    def stopped(self, event: pb.AgentEvent) -> None:
        from agentd_client.integrations.conversation import total_tokens

        x = event.stopped
        if x.reason == "error":
            return  # the command's one error line says it
        why = f": {sanitize.line(x.message)}" if x.message else ""
        print(
            f"agentctl: agent stopped ({x.reason}{why}) after {x.turns} turns, "
            f"{total_tokens(x.usage)} tokens; continue with "
            f'`agentctl agent --resume {self.session_id} "..."`',
            file=sys.stderr,
            flush=True,
        )


class JsonPrinter:
    """One JSON line per event: text deltas, messages, tool results, the stop."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def text(self, turn: int, text: str) -> None:
        print_json_line({"text_delta": {"turn": turn, "text": text}})

    def message(self, event: pb.AgentEvent) -> None:
        print_json_line(as_dict(event))

    def results(self, results: list[ToolResult]) -> None:
        for r in results:
            print_json_line({"tool_result": r.to_tool_result_block()})

    def stopped(self, event: pb.AgentEvent) -> None:
        print_json_line({"session_id": self.session_id, **as_dict(event)})


def _prompt(args: argparse.Namespace) -> str:
    text = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not text.strip():
        raise Usage("the prompt is empty: say what the agent should do")
    return text


def _warn_if_retiring(model: str, as_json: bool) -> None:
    """One line when the SDK lists the model as deprecated; the SDK's own warning (two
    lines and a link, at every request) is silenced in favour of it."""
    import warnings

    from agentd_client.integrations.agent import retirement

    warnings.filterwarnings("ignore", message=r"The model '.*' is deprecated")
    if (end := retirement(model)) is None:
        return
    line = (
        f"model {model} is deprecated and reaches its end of life on {end} (the anthropic "
        "SDK's table); choose a current one with --model or [agent] model in "
        f"{contexts.config_path()}"
    )
    if as_json:
        print(json.dumps({"warning": line}), file=sys.stderr, flush=True)
    else:
        print(f"agentctl: {line}", file=sys.stderr, flush=True)


def cmd_agent(c: Client, args: argparse.Namespace) -> int:
    from agentd_client.integrations import conversation as conv
    from agentd_client.integrations.agent import AgentLoop, Interrupted

    prompt = _prompt(args)
    chosen = settings(args)
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        raise Usage("agentctl agent needs ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL: another endpoint)")
    if (args.mode or args.net) and not args.workspace:
        raise Usage("--mode and --net are for a new session (--workspace)")
    resume = None
    session_id = ""
    if args.resume:
        session_id = names.resolve(c, args.resume)
        resume = conv.rebuild(conv.session_events(c, session_id))
        if resume is None:
            raise Refused(
                f"session {session_id} has no agent conversation to resume; "
                "start one with `agentctl agent --session`"
            )
        if not resume.ended:
            print(
                f"agentctl: the last run in session {session_id} did not record its end "
                "(it runs still, or was killed); continuing from what it recorded",
                file=sys.stderr,
            )
    elif not args.workspace:
        session_id = names.resolve(c, args.session or args.default_session)
    # The SDK takes a while to import: what can fail without it has been checked.
    need("anthropic", "anthropic", "agentctl agent")
    import anthropic

    _warn_if_retiring(chosen.model, args.json)

    if args.workspace:
        session_id = c.create_session(
            args.workspace, permission_mode=args.mode or "", allow_network=args.net
        ).id
    printer = JsonPrinter(session_id) if args.json else HumanPrinter(session_id)
    if not args.json:
        print(
            f"agentctl: agent in session {session_id} (watch and answer its asks with "
            f"`agentctl attach {session_id}`)",
            file=sys.stderr,
            flush=True,
        )
    loop = AgentLoop(c, anthropic.Anthropic(), session_id, chosen, printer, c.list_tools())
    try:
        loop.run(prompt, resume)
    except Interrupted as exc:
        from agentd_client.terminal import hangup

        return hangup.exit_code(exc.cause, INTERRUPTED)
    except anthropic.APIError as exc:
        raise ModelFailed(f"the model's API failed: {_first_line(str(exc), 300)}") from None
    return OK
