"""A rule chosen at the prompt lets the command it was offered for run, for the class of
commands people see asked: quotes with `;` inside, pipes, `&&`, VAR= prefixes,
subshells, redirections. Through the daemon, with a real `agentctl attach` on a pty
answering, as a person does; then the same command again runs by the rule, unasked.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from agentd_client import Client
from tests.e2e.test_attach_terminals import attached
from tests.support.daemon import DaemonProcess
from tests.support.screen import plain_lines

# (command, which offered rule the person picks: "a" the broadest, "last" the narrowest)
CLASS = [
    ('python3 -c \'import sys; open("q.txt", "w").write("1")\'', "a"),
    ('python3 -c \'import sys; open("q.txt", "w").write("1")\'', "last"),
    ("touch 'a; b.txt'", "last"),
    ("echo one && touch made.txt", "a"),
    ("FOO=1 touch env.txt", "a"),
    ("FOO=1 touch env.txt", "last"),
    ("(cd sub && touch inside.txt)", "a"),
    ("ls | tee listing.txt", "1"),
    ("echo hi > out.txt", "a"),
    ("touch x.txt && rm x.txt", "a"),
]


def _offered(prompt: str) -> list[str]:
    """The rules the prompt offers, [a] first, then the narrower ones in their order."""
    first = re.findall(r"\[a\]lways adds the rule (.+?)\r?\n", prompt)
    narrower = re.findall(r"\[\d+\] always, narrower: (.+?)\r?\n", prompt)
    return first[-1:] + narrower


def _decided_by(client: Client, sid: str, tool_use_id: str) -> str:
    last = client.get_session(sid).last_seq
    found = ""
    stream = client.attach(sid, 0)
    for e in stream:
        if e.HasField("permission_decided") and e.permission_decided.tool_use_id == tool_use_id:
            found = e.permission_decided.decided_by
        if e.seq >= last:
            break
    stream.cancel()
    return found


@pytest.mark.parametrize(("command", "pick"), CLASS, ids=[f"{c} [{p}]" for c, p in CLASS])
def test_a_chosen_rule_lets_its_command_run_again_unasked(
    daemon: DaemonProcess, client: Client, workspace: Path, command: str, pick: str
) -> None:
    (workspace / "sub").mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(workspace / "sub", 65534, 65534)
    sid = client.create_session(str(workspace), permission_mode="default").id
    with attached(daemon, sid) as (term, _):
        client.run_tool(sid, "Glob", {"pattern": "ready-marker"})
        term.wait_for("ready-marker")
        out: dict[str, Any] = {}
        t = threading.Thread(
            target=lambda: out.update(r=client.run_tool(sid, "Bash", {"command": command}))
        )
        t.start()
        prompt = term.wait_for(lambda t: t.last_line().startswith("╰ Allow?"), what="the prompt")
        offered = _offered(prompt + "\n")
        assert offered, prompt
        index = {"a": 0, "last": len(offered) - 1}.get(pick, int(pick) if pick.isdigit() else 0)
        key = "a" if index == 0 else str(index)
        term.send(f"{key}\n")
        t.join(60)
        assert not out["r"].is_error or "Exit code" in out["r"].text, out["r"].text
        chosen = offered[index]
        # The terminal says which rule was added.
        said = f"added the allow rule {chosen}"
        term.wait_for(lambda t: said in "".join(plain_lines(t.raw)), what=said)
        assert list(client.get_session(sid).allow_rules) == [chosen]
        # The identical command again: it runs by that rule, nobody is asked.
        again = client.run_tool(sid, "Bash", {"command": command}, tool_use_id="toolu_again")
        assert _decided_by(client, sid, "toolu_again") == "rule", (chosen, again.text)
    client.close_session(sid)
