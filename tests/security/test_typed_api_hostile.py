"""What a workspace writes travels as Struct too (a settings file's `widens`): deep nesting
or numbers JSON cannot hold in it must not make the session's events, `session show`
or an approver's stream unreadable -- a hostile workspace would then silence every
terminal that answers the session's asks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentd_client import Client
from agentd_client.core import structs
from tests.support.daemon import DaemonProcess
from tests.support.waiting import wait_for_event

AGENTCTL = str(Path(sys.executable).parent / "agentctl")


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"k": [value]}
    return value


def test_a_hostile_settings_file_leaves_the_session_readable(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    settings = workspace / ".claude" / "settings.json"
    settings.parent.mkdir()
    deep = json.dumps(_deep(200))  # 400 levels: far past protobuf's 100
    settings.write_text(
        '{"permissions": {"allow": ["Bash(touch:*)"]}, "n": NaN, "inf": -Infinity, '
        f'"deep": {deep}}}'
    )
    sid = client.create_session(str(workspace), permission_mode="default").id
    marker = client.run_tool(sid, "Glob", {"pattern": "*"})  # settles the settings
    assert not marker.is_error, marker.text

    # Every event replays and parses, the settings report among them.
    reports: list[Any] = []

    def collect(e: Any) -> bool:
        if e.HasField("settings_ignored"):
            reports.append(structs.from_struct(e.settings_ignored.widens))
        return e.HasField("call_finished") and e.call_finished.result.tool_use_id == (
            marker.tool_use_id
        )

    wait_for_event(client, sid, collect)
    assert len(reports) == 1
    widens = reports[0]
    assert widens["permissions"] == {"allow": ["Bash(touch:*)"]}
    assert widens["n"] is None and widens["inf"] is None  # as JSON.stringify writes them
    part, levels = widens["deep"], 0
    while isinstance(part, dict | list):
        part = part["k"] if isinstance(part, dict) else part[0]
        levels += 1
    assert isinstance(part, str) and levels >= 20  # the rest as its JSON text
    assert "bottom" in part

    shown = structs.optional_struct(client.get_session(sid).ignored_settings[0], "widens")
    assert shown == widens
    r = subprocess.run(
        [AGENTCTL, "--socket", daemon.socket, "session", "show", sid],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ignored_settings"][0]["widens"]["n"] is None
