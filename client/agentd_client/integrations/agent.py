"""`agentctl agent`: a whole agent loop on the anthropic SDK, its conversation kept in the
session.

Each turn streams one assistant message (its text shown as it comes, here and on
every attached terminal), then runs its tool_use blocks as one daemon batch (reads
together, others alone, in order; asks go to attached terminals). Tools and the
system prompt carry cache_control, as does the newest user message, so a turn
re-reads the conversation from the cache. The loop stops on the model's own stop
(end_turn, ...), after `max_turns` model turns, or once the tokens it used reach
`budget`; the tools of the last turn run first, so a resume finds every call
answered. Ctrl-C cancels the running calls and stops cleanly.
"""

from __future__ import annotations

import contextlib
import copy
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from agentd_client.core.calls import ToolResult
from agentd_client.core.client import Client
from agentd_client.core.errors import AgentdError
from agentd_client.integrations import conversation as conv
from agentd_client.integrations.defaults import DEFAULT_MODEL
from agentd_client.v1 import agentd_pb2 as pb

DEFAULT_MAX_TOKENS = 8192
DEFAULT_MAX_TURNS = 50
CACHE = {"type": "ephemeral"}
# The longest the main thread waits at once. Python runs a signal's handler only in the
# main thread, and a signal delivered to another thread does not wake a wait with no
# timeout: every wait of the main thread is timed, so Ctrl-C is seen within this.
WAKE = 0.2
# How long Ctrl-C waits for the cancelled calls' results before giving up on them.
CANCEL_WAIT = 15.0

SYSTEM_PROMPT = """\
You are a coding agent working on a project in {workspace} (the current directory is \
{cwd}). Use the tools to look at files, change them and run commands; commands run in \
a sandbox on the machine where the code lives. Some calls need a person's approval: \
when one is denied, do not retry it as it was; say what you need or do it another \
way. Be brief in what you write; end when the task is done."""


def retirement(model: str) -> str | None:
    """The end of life the installed anthropic SDK lists for `model`, or None.

    The SDK's own table (anthropic/_data/deprecated_models.py, the one its messages.create
    warns from), so a newer SDK brings newer dates; an SDK without it says nothing."""
    try:
        from anthropic._data import DEPRECATED_MODELS
    except ImportError:
        return None
    return DEPRECATED_MODELS.get(model)


@dataclass
class Settings:
    model: str = DEFAULT_MODEL
    system: str = ""  # empty: SYSTEM_PROMPT for the session
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = DEFAULT_MAX_TOKENS  # of one response
    budget: int = 0  # tokens of the whole run (input, cache and output); 0: none


@dataclass
class Outcome:
    conversation_id: str
    reason: str
    turns: int
    usage: pb.AgentUsage
    text: str  # the last assistant message's text


@dataclass
class _Progress:
    """How far a run got, kept by its turns so a stop can report it."""

    turns: int = 0
    text: str = ""  # the last assistant message's text


class Interrupted(Exception):
    """Ctrl-C, or the caller went away (agentd_client.terminal.hangup): the running calls were
    cancelled and the stop recorded. `cause` is the KeyboardInterrupt that said so."""

    def __init__(self, outcome: Outcome, cause: KeyboardInterrupt | None = None) -> None:
        super().__init__("interrupted")
        self.outcome = outcome
        self.cause = cause or KeyboardInterrupt()


class LiveText:
    """Sends streamed text to the session from a thread of its own, what piled up while
    one send was on its way going as one event: the model's stream never waits on the
    daemon, however far away it is."""

    def __init__(self, send: Callable[[pb.AgentEvent], Any], conversation_id: str) -> None:
        self._send = send
        self._conversation_id = conversation_id
        self._q: queue.Queue[tuple[int, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def put(self, turn: int, text: str) -> None:
        self._q.put((turn, text))

    def flush(self) -> None:
        """Returns once everything put so far was sent (or failed)."""
        with self._q.all_tasks_done:
            while self._q.unfinished_tasks:
                self._q.all_tasks_done.wait(WAKE)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(5)

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                self._q.task_done()
                return
            items = [item]
            while True:
                try:
                    more = self._q.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._q.put(None)  # seen after this batch
                    self._q.task_done()
                    break
                items.append(more)
            for turn in dict.fromkeys(t for t, _ in items):
                text = "".join(x for t, x in items if t == turn)
                # Live text only: the whole message is recorded after it.
                with contextlib.suppress(AgentdError):
                    self._send(conv.delta_event(self._conversation_id, turn, text))
            for _ in items:
                self._q.task_done()


class Printer(Protocol):
    """What the loop shows its own terminal; the command picks a human or a JSON one."""

    def text(self, turn: int, text: str) -> None: ...
    def message(self, event: pb.AgentEvent) -> None: ...
    def results(self, results: list[ToolResult]) -> None: ...
    def stopped(self, event: pb.AgentEvent) -> None: ...


def _with_cache(
    tools: list[dict[str, Any]], system: str, messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The request's tools, system and messages with cache breakpoints: after the tools,
    after the system prompt, and at the end of the newest user message."""
    tools = [dict(t) for t in tools]
    if tools:
        tools[-1]["cache_control"] = CACHE
    blocks = [{"type": "text", "text": system, "cache_control": CACHE}]
    sent = list(messages)
    if sent and sent[-1]["role"] == "user" and sent[-1]["content"]:
        last = copy.deepcopy(sent[-1])
        last["content"][-1]["cache_control"] = CACHE
        sent[-1] = last
    return tools, blocks, sent


class AgentLoop:
    def __init__(
        self,
        agentd: Client,
        claude: Any,
        session_id: str,
        settings: Settings,
        printer: Printer,
        tools: list[dict[str, Any]],
    ) -> None:
        self.agentd = agentd
        self.claude = claude
        self.session_id = session_id
        self.settings = settings
        self.printer = printer
        self.tools = tools

    def system_prompt(self) -> str:
        if self.settings.system:
            return self.settings.system
        s = self.agentd.get_session(self.session_id)
        return SYSTEM_PROMPT.format(workspace=", ".join(s.workspace_roots), cwd=s.cwd)

    def _record(self, event: pb.AgentEvent) -> None:
        self.agentd.append_agent_event(self.session_id, event)

    def run(self, prompt: str, resume: conv.Rebuilt | None = None) -> Outcome:
        """One run: the prompt added to the conversation (a new one, or `resume`'s),
        then turns until a stop. Raises Interrupted on Ctrl-C, after recording it."""
        cid = resume.conversation_id if resume else conv.new_conversation_id()
        messages = copy.deepcopy(resume.messages) if resume else []
        done = resume.turns if resume else 0
        conv.add_user_text(messages, prompt)
        usage = pb.AgentUsage()
        state = _Progress()
        live = LiveText(self._record, cid)
        try:
            self._record(conv.prompt_event(cid, prompt, self.settings.model))
            system = self.system_prompt()
            reason = self._turns(cid, messages, system, done, usage, state, live)
        except KeyboardInterrupt as exc:
            live.close()
            outcome = Outcome(cid, "interrupted", state.turns, usage, state.text)
            why = (
                "stopped by the person (Ctrl-C)"
                if type(exc) is KeyboardInterrupt
                else (f"stopped: its caller went away ({exc})")
            )
            self._stop(outcome, why)
            raise Interrupted(outcome, exc) from None
        except BaseException as exc:
            live.close()
            outcome = Outcome(cid, "error", state.turns, usage, state.text)
            self._stop(outcome, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            raise
        live.close()
        outcome = Outcome(cid, reason, state.turns, usage, state.text)
        self._stop(outcome)
        return outcome

    def _stop(self, outcome: Outcome, message: str = "") -> None:
        event = conv.stopped_event(
            outcome.conversation_id, outcome.reason, outcome.turns, outcome.usage, message
        )
        try:
            self._record(event)
        except AgentdError:
            if outcome.reason not in ("interrupted", "error"):
                raise
        with contextlib.suppress(OSError):  # a hung-up terminal takes no more lines
            self.printer.stopped(event)

    def _turns(
        self,
        cid: str,
        messages: list[dict[str, Any]],
        system: str,
        done: int,
        usage: pb.AgentUsage,
        state: _Progress,
        live: LiveText,
    ) -> str:
        s = self.settings
        while True:
            if state.turns >= s.max_turns:
                return "max_turns"
            if s.budget and conv.total_tokens(usage) >= s.budget:
                return "budget"
            turn = done + state.turns + 1
            tools, blocks, sent = _with_cache(self.tools, system, messages)
            request = {
                "model": s.model,
                "max_tokens": s.max_tokens,
                "system": blocks,
                "tools": tools,
                "messages": sent,
            }
            for kind, value in self._stream(request):
                if kind == "text":
                    live.put(turn, value)
                    self.printer.text(turn, value)
                else:
                    reply = value
            state.turns += 1
            live.flush()  # the deltas before the message
            content = conv.content_dicts(reply.content)
            state.text = "".join(b["text"] for b in content if b["type"] == "text")
            turn_usage = conv.usage_pb(reply.usage)
            conv.add_usage(usage, turn_usage)
            event = conv.message_event(
                cid, turn, content, reply.stop_reason or "", reply.model or s.model, turn_usage
            )
            self._record(event)
            self.printer.message(event)
            if content:
                messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b["type"] == "tool_use"]
            if reply.stop_reason == "pause_turn":
                continue
            if reply.stop_reason != "tool_use" or not uses:
                return reply.stop_reason or "end_turn"
            results = self._run_tools(uses)
            self.printer.results(results)
            messages.append(
                {"role": "user", "content": [r.to_tool_result_block() for r in results]}
            )

    def _stream(self, request: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        """The model's reply as ("text", delta)... then ("reply", message), streamed from
        a daemon thread: the main thread only ever waits with a timeout, so it sees a
        Ctrl-C whichever thread the signal was delivered to."""
        q: queue.Queue[tuple[str, Any]] = queue.Queue()
        stop = threading.Event()

        def work() -> None:
            try:
                with self.claude.messages.stream(**request) as stream:
                    for event in stream:
                        if stop.is_set():
                            return  # leaving the block closes the response
                        if event.type == "text" and event.text:
                            q.put(("text", event.text))
                    q.put(("reply", stream.get_final_message()))
            except BaseException as exc:
                q.put(("error", exc))

        threading.Thread(target=work, name="model", daemon=True).start()
        try:
            while True:
                try:
                    kind, value = q.get(timeout=WAKE)
                except queue.Empty:
                    continue
                if kind == "error":
                    raise value
                yield kind, value
                if kind == "reply":
                    return
        finally:
            stop.set()

    def _run_tools(self, uses: list[dict[str, Any]]) -> list[ToolResult]:
        """One daemon batch, from a daemon thread: Ctrl-C reaches this one, which then
        cancels the calls and lets the batch end with their (cancelled) results."""
        out: dict[str, Any] = {}
        finished = threading.Event()

        def work() -> None:
            try:
                out["results"] = self.agentd.run_tools(self.session_id, uses)
            except BaseException as exc:
                out["error"] = exc
            finally:
                finished.set()

        try:
            threading.Thread(target=work, name="tools", daemon=True).start()
            while not finished.wait(WAKE):
                pass  # a timed wait: a Ctrl-C handled by another thread still reaches here
        except KeyboardInterrupt:
            self._cancel([use["id"] for use in uses], finished)
            raise
        if "error" in out:
            raise out["error"]
        return out["results"]

    def _cancel(self, ids: list[str], finished: threading.Event) -> None:
        """Cancels the batch's calls until it ends: Ctrl-C may come before the daemon
        has a call, so one not found yet is asked again."""
        deadline = time.monotonic() + CANCEL_WAIT
        left = list(ids)
        while left and not finished.is_set() and time.monotonic() < deadline:
            for tool_use_id in list(left):
                with contextlib.suppress(AgentdError):
                    if self.agentd.cancel(self.session_id, tool_use_id, timeout=5):
                        left.remove(tool_use_id)
            finished.wait(0.1)
        finished.wait(max(0.0, deadline - time.monotonic()))
