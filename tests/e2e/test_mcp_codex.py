"""Real Codex running its tool calls through agentd, offline, against a fake Responses API.

Needs the Codex CLI, which `make test` installs into ~/.cache/agentd/codex (or
CODEX_BIN); skipped without it. `agentctl mcp install codex` writes agentd's server into Codex's
config (agentd_client/codex.py says what and why); Codex, its own shell turned off,
then runs the scripted Bash call in the session's sandbox, and the result reaches the
fake API.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.core.structs import from_struct
from agentd_client.integrations import conversation as conv
from agentd_client.integrations.codex import RUN
from tests.support import ctl, data
from tests.support.daemon import DaemonProcess

ROOT = data.ROOT
FAKE_API = data.TESTS / "support" / "fake_responses.py"


def _codex() -> str | None:
    for candidate in (
        os.environ.get("CODEX_BIN"),
        shutil.which("codex"),
        str(ROOT / ".oracle" / "node_modules" / ".bin" / "codex"),
        # where `make test` installs it
        os.path.expanduser("~/.cache/agentd/codex/node_modules/.bin/codex"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


CODEX = _codex()
pytestmark = pytest.mark.skipif(CODEX is None, reason="Codex CLI not installed")


def test_codex_runs_a_sandboxed_bash_through_agentd(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    assert CODEX is not None
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    record = tmp_path / "requests.jsonl"
    command = "echo via-agentd > proof.txt; id -u"
    api = subprocess.Popen(
        [sys.executable, str(FAKE_API), "--tool", "Bash", "--record", str(record),
         "--arguments", json.dumps({"command": command})],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert api.stdout is not None
        port = int(api.stdout.readline().split()[1])
        # The user's own settings, which the install keeps: the fake model provider.
        config = codex_home / "config.toml"
        config.write_text(
            'model = "gpt-fake"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
            'wire_api = "responses"\nenv_key = "FAKE_OPENAI_KEY"\n'
        )
        started = time.monotonic()
        install = ctl.run(
            "--socket", daemon.socket, "mcp", "install", "codex", "--workspace", str(workspace),
            "--session", sid, env={"CODEX_HOME": str(codex_home)},
        )  # fmt: skip
        assert install.returncode == 0, install.stderr
        written = tomllib.loads(config.read_text())
        assert written["model_providers"]["fake"]["base_url"].endswith(f":{port}/v1")
        assert written["mcp_servers"]["agentd"]["required"] is True
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "CODEX_HOME": str(codex_home),
            "FAKE_OPENAI_KEY": "fake",
        }
        flags = RUN.split()[1:]
        run = subprocess.run(
            [CODEX, *flags, "exec", "--skip-git-repo-check", "-C", str(workspace), "go"],
            env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    finally:
        api.terminate()
        api.wait(10)
    assert run.returncode == 0, run.stderr[-3000:]
    print(f"mcp install -> Codex's sandboxed Bash through agentd answered: {elapsed:.1f}s")
    bodies = [json.loads(line)["body"] for line in record.read_text().splitlines()]
    # Codex's own shell was off; agentd's tools were there from the first request.
    names = [t.get("name") for t in bodies[0]["tools"]]
    assert "exec_command" not in names and "mcp__agentd" in names
    inputs = [i for b in bodies for i in b.get("input", [])]
    outputs = [i for i in inputs if i.get("type") == "function_call_output"]
    assert len(outputs) == 1 and "65534" in json.dumps(outputs[0]["output"])  # the sandbox's uid
    assert (workspace / "proof.txt").read_text() == "via-agentd\n"
    journal = conv.session_events(client, sid)
    started_calls = [e.call_started for e in journal if e.HasField("call_started")]
    assert [(c.name, from_struct(c.input)["command"]) for c in started_calls] == [("Bash", command)]
