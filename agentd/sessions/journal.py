"""A session's events as the journal keeps them: one encoder, one reader, a version.

A row is (kind, payload JSON, version). The payload holds the event's fields by
name, as JSON; nested parts keep their JSON shapes (sessions/event_types.py).
An agent's event is the AgentEvent message as JSON, at the top of the payload.

Versions:
  1  rows written before the journal had versions (the column's default). Every
     field may be missing (read as its default); a journal older still holds some
     parts as JSON text under `<key>_json` (input, data, widens, todos) and an
     image's or document's bytes as hex under `data`.
  2  every field of the event's dataclass, by name.
A row of a later version (a newer daemon's, then downgraded) is read as version 2:
fields it does not know are left out.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from typing import Any

from agentd.sessions import event_types as ev

log = logging.getLogger(__name__)

VERSION = 2
# What rows written before versions are (the column's default).
UNVERSIONED = 1

# Parts an old journal held as JSON text under `<key>_json`, by kind.
_LEGACY_JSON = {
    "call_started": "input",
    "permission_requested": "input",
    "settings_ignored": "widens",
    "todos_changed": "todos",
}


# Each kind's fields, in order.
_NAMES = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in ev.BY_KIND.values()}


def encode(body: ev.EventBody) -> tuple[str, dict[str, Any]]:
    """(kind, payload) of a journal row of VERSION. A shallow copy: parts whose text
    was made beforehand (an EncodedDict) are kept as they are for json_text."""
    if isinstance(body, ev.Agent):
        return ev.journal_kind(body), dict(body.event)
    return body.KIND, {name: getattr(body, name) for name in _NAMES[type(body)]}


def decode(kind: str, payload: dict[str, Any], version: int = VERSION) -> ev.EventBody | None:
    """The event of a journal row; None (logged) for a kind or shape it cannot be."""
    if kind in (ev.Agent.KIND, ev.Agent.LIVE_KIND):
        return ev.Agent(payload, live=kind == ev.Agent.LIVE_KIND)
    cls = ev.BY_KIND.get(kind)
    if cls is None:
        log.warning("journal: an event of kind %r is not known; left out", kind)
        return None
    if version <= UNVERSIONED:
        payload = _upgrade(kind, payload)
    fields = {name: payload[name] for name in _NAMES[cls] if name in payload}
    if cls is ev.TaskControlled and fields.get("size") is not None:
        rows, cols = fields["size"]
        fields["size"] = (rows, cols)
    try:
        return cls(**fields)
    except TypeError as exc:
        log.warning("journal: a %s event cannot be read (%s); left out", kind, exc)
        return None


def _upgrade(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A row of version 1 as version 2 holds it: old parts made new, missing ones filled."""
    out = dict(payload)
    if (key := _LEGACY_JSON.get(kind)) is not None and key not in out:
        text = out.pop(f"{key}_json", "")
        out[key] = json.loads(text) if text else _EMPTY.get(key)
    match kind:
        case "call_started":
            out.setdefault("tool_use_id", "")
            out.setdefault("name", "")
            out.setdefault("input", {})
        case "permission_requested":
            for name, default in (
                ("request_id", ""),
                ("tool_use_id", ""),
                ("tool_name", ""),
                ("input", {}),
                ("reasons", []),
                ("suggested_rule", ""),
                ("expires_ms", 0),
                ("rule_choices", []),
            ):
                out.setdefault(name, default)
        case "call_finished":
            out["result"] = _upgrade_result(out.get("result") or {})
            out.setdefault("name", "")
            out.setdefault("duration_ms", 0)
        case "settings_ignored":
            for name in ("path", "sha256", "reason"):
                out.setdefault(name, "")
            out.setdefault("widens", None)
        case "permission_resolved":
            for name in ("request_id", "decision", "scope", "decided_by"):
                out.setdefault(name, "")
        case "permission_decided":
            for name in ("tool_use_id", "tool_name", "behavior", "decided_by", "reason"):
                out.setdefault(name, "")
        case "cwd_changed":
            out.setdefault("cwd", "")
            out.setdefault("previous", "")
        case "git_push":
            for name in ("tool_use_id", "route", "repository", "decided_by"):
                out.setdefault(name, "")
            out.setdefault("updates", [])
            out.setdefault("allowed", False)
        case "task_controlled":
            for name in ("task_id", "action", "by"):
                out.setdefault(name, "")
        case "port_forward":
            out.setdefault("action", "")
            out.setdefault("forward_id", "")
        case "todos_changed":
            out.setdefault("todos", [])
    return out


_EMPTY: dict[str, Any] = {"input": {}, "todos": [], "widens": None}


def _upgrade_result(result: dict[str, Any]) -> dict[str, Any]:
    """A result of version 1: data as `data_json` text, bytes as hex (before base64)."""
    out = dict(result)
    if "data" not in out:
        text = out.pop("data_json", "")
        out["data"] = json.loads(text) if text else None
    content = []
    for block in out.get("content", []):
        if block.get("type") != "text" and "base64" not in block and "data" in block:
            data = base64.b64encode(bytes.fromhex(block["data"])).decode("ascii")
            block = {"type": block["type"], "media_type": block["media_type"], "base64": data}
        content.append(block)
    out["content"] = content
    out.setdefault("tool_use_id", "")
    out.setdefault("is_error", False)
    return out
