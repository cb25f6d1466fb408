"""agentd/sessions/event_types.py: every kind of the proto's Event oneof has its dataclass,
each round-trips through the journal (and reads back to the same wire event), and no
emit names its kind as a string."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from agentd.api.wire import event_to_pb
from agentd.sessions import event_types as ev
from agentd.sessions import journal
from agentd.sessions.events import Event, json_text
from agentd_client.v1 import agentd_pb2 as pb

ROOT = Path(__file__).parents[2]

RESULT: ev.ResultPayload = {
    "tool_use_id": "toolu_1",
    "content": [
        {"type": "text", "text": "done"},
        {"type": "document", "media_type": "application/pdf", "base64": "JVBERi0="},
    ],
    "is_error": False,
    "data": {"exitCode": 0, "lines": ["a", "b"], "nested": {"x": None}},
}
TASK: ev.TaskPayload = {
    "id": "bash_1",
    "session_id": "s1",
    "command": "make",
    "description": "build",
    "status": "completed",
    "exit_code": 2,
    "output_path": "/o/bash_1",
    "started_ms": 1,
    "ended_ms": 2,
    "tool_use_id": "toolu_1",
}
REF: ev.PushedRef = {"ref": "r", "old": "0", "new": "1", "kind": "create", "protected": True}

# One of each kind, its fields set (defaults left are covered by the journal's tests).
SAMPLES: list[ev.EventBody] = [
    ev.CallStarted("toolu_1", "Bash", {"command": "ls", "n": [1, 2.5]}),
    ev.Progress("toolu_1", 5, "out", "running", "bash_1", 10, "last", "perm_1", 2),
    ev.CallFinished("Bash", 7, RESULT),
    ev.CallFinished("Read", 1, RESULT, interrupted=True),
    ev.TodosChanged([{"content": "c", "status": "pending", "activeForm": "a"}]),
    ev.FilesChanged("toolu_1", "Bash", 3, 1, 2, 0, ["+a", "~b", "~c"], 1),
    ev.FilesChanged("rewind-1", "RewindToCall", 4, 0, 1, 0, ["~b"], 0, "rewind", "ann@box"),
    ev.TaskStarted({**TASK, "exit_code": None, "status": "running"}),
    ev.TaskFinished(TASK),
    ev.PermissionRequested("perm_1", "toolu_1", "Bash", {"command": "rm x"}, ["r"], "R", 9, ["R"]),
    ev.PermissionResolved("perm_1", "allow", "always", "ann", "Bash(rm:*)"),
    ev.PermissionDecided("toolu_1", "Bash", "deny", "rule", "Bash(rm:*)"),
    ev.CwdChanged("/w/a", "/w"),
    ev.SessionClosed(),
    ev.Gap(3, 9),
    ev.SettingsIgnored("/w/.claude/settings.json", "ab", {"allow": ["Bash(make:*)"]}, "why"),
    ev.SettingsIgnored("/w/.claude/settings.json", "", None, "unreadable"),
    ev.Agent({"conversation_id": "c1", "prompt": {"text": "hi", "model": "m"}}),
    ev.Agent({"conversation_id": "c1", "text_delta": {"turn": 1, "text": "h"}}, live=True),
    ev.GitPush(
        "toolu_1",
        "gh",
        "https://h/r",
        [{"ref": "r", "old": "0", "new": "1", "kind": "create", "protected": True}],
        True,
        "rule",
    ),  # fmt: skip
    ev.TaskControlled("bash_1", "opened", "ann", 0, "", "", (24, 80), True),
    ev.TaskControlled("bash_1", "input", "ann", 12, "closed"),
    ev.PortForward("closed", "fwd_1", "c_1", 8000, "127.0.0.1:8000", "l", "ann", 1, 2, "how"),
]


def test_every_kind_of_the_proto_oneof_has_its_dataclass() -> None:
    oneof = {f.name for f in pb.Event.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert set(ev.BY_KIND) == oneof
    assert {type(s).KIND for s in SAMPLES} == oneof


def test_each_kind_round_trips_through_the_journal_to_the_same_wire_event() -> None:
    for body in SAMPLES:
        kind, payload = journal.encode(body)
        assert kind == ev.journal_kind(body)
        text = json_text(payload)
        back = journal.decode(kind, json.loads(text), journal.VERSION)
        assert back == body, kind
        live = event_to_pb(Event(4, "s1", 5, body))
        replayed = event_to_pb(Event(4, "s1", 5, back))
        assert live.WhichOneof("kind") == body.KIND
        assert replayed.SerializeToString(deterministic=True) == live.SerializeToString(
            deterministic=True
        ), kind


def _emits_with_a_string_kind(path: Path) -> list[str]:
    """Calls named emit or _emit with a string constant among their arguments, or with
    keyword arguments: an event's kind and fields given loose instead of as its type."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in ("emit", "_emit"):
            continue
        strings = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if strings or node.keywords:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_emit_names_its_kind_as_a_string() -> None:
    files = [p for d in ("agentd", "tests", "bench") for p in (ROOT / d).rglob("*.py")]
    assert len(files) > 100
    found = [where for path in files for where in _emits_with_a_string_kind(path)]
    assert found == []
