"""TodoWrite: the reference case, replacement, clearing, validation and the change hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.sessions.session import Session
from agentd.sessions.store import Store
from agentd.tools.base import ToolContext
from agentd.tools.todo_write import TodoWrite
from tests.support.data import TOOL_SCHEMAS
from tests.support.services import config_under, make_services

REFERENCE_SCHEMAS = TOOL_SCHEMAS

TODOS = [
    {"content": "Write code", "status": "in_progress", "activeForm": "Writing code"},
    {"content": "Run tests", "status": "pending", "activeForm": "Running tests"},
]


async def test_reference_todowrite(call, session: Session) -> None:
    r = await call("TodoWrite", {"todos": TODOS})
    assert not r.is_error
    assert "todo list" in r.text
    assert r.data == {"oldTodos": [], "newTodos": TODOS}
    assert session.todos == TODOS


async def test_replaces_and_clears_when_all_completed(call, session: Session) -> None:
    await call("TodoWrite", {"todos": TODOS})
    done = [{**t, "status": "completed"} for t in TODOS]
    r = await call("TodoWrite", {"todos": done})
    assert r.data == {"oldTodos": TODOS, "newTodos": done}
    # A finished list is cleared, as the reference does.
    assert session.todos == []
    r = await call("TodoWrite", {"todos": []})
    assert r.data == {"oldTodos": [], "newTodos": []}


@pytest.mark.parametrize(
    ("todo", "expect"),
    [
        ({"content": "", "status": "pending", "activeForm": "x"}, "todos[0].content"),
        ({"content": "  ", "status": "pending", "activeForm": "x"}, "todos[0].content"),
        ({"content": "a", "status": "bogus", "activeForm": "x"}, "todos[0].status"),
        ({"content": "a", "status": "pending"}, "todos[0].activeForm"),
        ("just text", "todos[0]"),
    ],
)
async def test_validation(call, session: Session, todo: Any, expect: str) -> None:
    session.todos = list(TODOS)
    r = await call("TodoWrite", {"todos": [todo]})
    assert r.is_error and r.text.startswith("<tool_use_error>") and expect in r.text
    assert session.todos == TODOS  # unchanged


async def test_older_fields_are_ignored(call, session: Session) -> None:
    """`id` and `priority` (the older schema's) and any other unknown item field are
    dropped, as the reference drops them (recorded: todo_old_fields); a missing
    activeForm is still an error."""
    sent = [
        {**TODOS[0], "id": "1", "priority": "high"},
        {**TODOS[1], "id": 7, "priority": "urgent", "colour": "red"},
    ]
    r = await call("TodoWrite", {"todos": sent})
    assert not r.is_error, r.text
    assert r.data == {"oldTodos": [], "newTodos": TODOS}
    assert session.todos == TODOS
    r = await call("TodoWrite", {"todos": [{"content": "a", "status": "pending", "id": "3"}]})
    assert r.is_error and "todos[0].activeForm" in r.text
    assert session.todos == TODOS


async def test_not_a_list(call) -> None:
    r = await call("TodoWrite", {"todos": "x"})
    assert r.is_error and "list" in r.text


async def test_hook_is_called_with_session_and_list(session: Session, tmp_path: Path) -> None:
    seen: list[tuple[Session, list[dict[str, Any]]]] = []

    async def on_todos_changed(s: Session, todos: list[dict[str, Any]]) -> None:
        seen.append((s, todos))

    async def progress(**_: Any) -> None:
        pass

    store = Store(str(tmp_path / "agentd.db"))
    services = make_services(config_under(tmp_path), store, on_todos_changed=on_todos_changed)
    ctx = ToolContext(
        session=session,
        tool_use_id="toolu_1",
        state_dir=str(tmp_path),
        progress=progress,
        services=services,
    )
    tool = TodoWrite()
    try:
        await tool.call({"todos": TODOS}, ctx)
        assert seen == [(session, TODOS)]
        await tool.call({"todos": [{**t, "status": "completed"} for t in TODOS]}, ctx)
        assert seen[-1] == (session, [])
    finally:
        store.close()


def test_flags() -> None:
    assert not TodoWrite().is_read_only({}) and not TodoWrite().is_concurrency_safe({})


@pytest.mark.skipif(not REFERENCE_SCHEMAS.exists(), reason="reference schemas not present")
def test_schema_matches_reference() -> None:
    tools = {t["name"]: t for t in json.loads(REFERENCE_SCHEMAS.read_text())["tools"]}
    assert TodoWrite.input_schema == tools["TodoWrite"]["input_schema"]
