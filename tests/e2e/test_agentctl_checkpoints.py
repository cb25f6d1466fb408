"""agentctl checkpoints, diff, restore, rewind against the real daemon: what a person
types, what they read (through the sanitiser), and --json for scripts."""

from __future__ import annotations

import json
from pathlib import Path

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess


def test_the_workflow_from_a_terminal(
    client: Client, daemon: DaemonProcess, session_id: str, workspace: Path
) -> None:
    def agentctl(*args: str) -> ctl.subprocess.CompletedProcess[str]:
        return ctl.run("--socket", daemon.socket, *args)

    client.run_tool(session_id, "Bash", {"command": "printf 'a\\nb\\n' > f.txt"}, "c-1")
    client.run_tool(
        session_id, "Bash", {"command": "sed -i s/a/A/ f.txt; printf x > $'\\e[31mred'"}, "c-2"
    )
    listed = agentctl("checkpoints", session_id)
    assert listed.returncode == 0, listed.stderr
    assert "c-1  Bash  +1 ~0 -0" in listed.stdout and "c-2  Bash  +1 ~1 -0" in listed.stdout
    as_json = json.loads(agentctl("checkpoints", session_id, "--json").stdout)
    assert [x["tool_use_id"] for x in as_json] == ["c-1", "c-2"]

    diff = agentctl("diff", session_id, "c-2")
    assert "-a" in diff.stdout and "+A" in diff.stdout and "\x1b" not in diff.stdout
    names = agentctl("diff", session_id, "c-1", "--since", "--names")
    assert "A f.txt" in names.stdout and "\x1b" not in names.stdout

    dry = agentctl("restore", session_id, "c-2", "f.txt", "--dry-run")
    assert dry.returncode == 0 and "write  f.txt" in dry.stdout
    assert (workspace / "f.txt").read_text() == "A\nb\n"
    done = agentctl("restore", session_id, "c-2", "f.txt")
    assert done.returncode == 0, done.stderr
    assert (workspace / "f.txt").read_text() == "a\nb\n"

    asked = agentctl("rewind", session_id, "c-1")  # stdin is not a terminal: no answer
    assert asked.returncode == 1 and "nothing was changed" in asked.stderr
    rewound = json.loads(agentctl("rewind", session_id, "c-1", "--yes", "--json").stdout)
    assert rewound["applied"] and not (workspace / "f.txt").exists()

    refused = agentctl("diff", session_id, "no-such-call")
    assert refused.returncode != 0 and "agentctl checkpoints SESSION" in refused.stderr


def test_attach_shows_what_each_call_changed(
    client: Client, daemon: DaemonProcess, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    client.run_tool(sid, "Bash", {"command": "echo 1 > shown.txt; echo 2 > also.txt"}, "c-at")
    client.close_session(sid)  # its replay ends: attach prints it all and returns
    shown = ctl.run("--socket", daemon.socket, "attach", sid)
    assert shown.returncode == 0, shown.stderr
    assert "files changed by call c-at (Bash): +2 ~0 -0, checkpoint 1" in shown.stdout
    assert "    +also.txt" in shown.stdout and "    +shown.txt" in shown.stdout
