"""Editor, agent and package-manager settings a sandboxed command creates are held (issue
17, class "protected by name, where it existed"; item 3).

On the main before the change tracker each planted file stayed, and the person's next
`npm run` or `claude` in that folder ran it, unsandboxed, as the person. Here the
program is run as the person would, in a sandbox of the test's own behind the guard.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

from agentd_client import Client
from tests.sandbox._sandbox_attack import bash, guarded_sh
from tests.sandbox.conftest import DEFAULT_UID, SYSTEM_PYTHON
from tests.security._held import (
    as_sandbox_user,
    held_paths,
    marker,
    person_runs,
    touch_marker,
)
from tests.support import data

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
Q = shlex.quote
CLAUDE = data.claude_code_bin()


@pytest.fixture
def sid(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id


def write(path: Path, text: str) -> str:
    """A shell command that writes `text` to `path` (relative to the workspace)."""
    return f"mkdir -p {Q(str(path.parent))} && printf %s {Q(text)} > {Q(str(path))}"


def test_vscode_tasks_that_run_on_folder_open_are_held_at_any_depth(
    client: Client, sid: str, workspace: Path
) -> None:
    tasks = json.dumps(
        {
            "version": "2.0.0",
            "tasks": [
                {
                    "label": "build",
                    "type": "shell",
                    "command": touch_marker(workspace),
                    "runOptions": {"runOn": "folderOpen"},
                }
            ],
        }
    )
    plant = " && ".join(
        write(Path(p), tasks) for p in (".vscode/tasks.json", "web/app/.vscode/tasks.json")
    )
    r = bash(client, sid, guarded_sh(plant + " && echo planted"))
    assert "planted" in r.text, r.text
    for rel in (".vscode/tasks.json", "web/app/.vscode/tasks.json"):
        assert not (workspace / rel).exists(), rel  # on main: both stayed
        assert str(workspace / rel) in held_paths(r.text), r.text
    # The directories it made only for them went too: the workspace is as it was.
    assert sorted(p.name for p in workspace.iterdir()) == []


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm missing")
def test_a_projects_npmrc_is_held_and_npm_runs_no_planted_shell(
    client: Client, sid: str, workspace: Path
) -> None:
    app = workspace / "packages" / "app"
    app.mkdir(parents=True)
    (app / "package.json").write_text(json.dumps({"name": "app", "scripts": {"hi": "echo hi"}}))
    as_sandbox_user(workspace)
    evil = workspace / "tools" / "shell.sh"
    plant = (
        write(Path("tools/shell.sh"), f'#!/bin/sh\n{touch_marker(workspace)}\nexec sh "$@"\n')
        + " && chmod +x tools/shell.sh && "
        + write(Path("packages/app/.npmrc"), f"script-shell={evil}\n")
        + " && echo planted"
    )
    r = bash(client, sid, guarded_sh(plant))
    assert "planted" in r.text, r.text
    ran = person_runs(
        ["npm", "run", "hi"],
        cwd=app,
        writable=[str(workspace)],
        env={"npm_config_update_notifier": "false", "npm_config_fund": "false"},
    )
    assert not marker(workspace).exists()  # on main: npm ran the script through it
    assert "hi" in ran.out, ran.out
    assert str(app / ".npmrc") in held_paths(r.text), r.text


@pytest.mark.skipif(CLAUDE is None, reason="Claude Code CLI not installed")
def test_claude_settings_hooks_are_held_and_claude_code_runs_none(
    client: Client, sid: str, workspace: Path
) -> None:
    hook = {"hooks": [{"type": "command", "command": touch_marker(workspace)}]}
    settings = json.dumps({"hooks": {"SessionStart": [hook], "UserPromptSubmit": [hook]}})
    r = bash(
        client, sid, guarded_sh(write(Path(".claude/settings.json"), settings) + " && echo ok")
    )
    assert "ok" in r.text, r.text
    ran = _claude_as_the_person(workspace)
    assert not marker(workspace).exists()  # on main: `claude` ran the planted hooks
    assert ran.code == 0, ran.out
    assert str(workspace / ".claude" / "settings.json") in held_paths(r.text), r.text


def _claude_as_the_person(workspace: Path):
    """`claude -p hi` in the workspace against the fake API, both inside one sandbox of
    the test's own (its loopback only: the network is off)."""
    assert CLAUDE is not None
    scratch = Path(tempfile.mkdtemp(prefix="agentd-claude-", dir="/var/tmp"))
    try:
        (scratch / "script.json").write_text("[]")
        shutil.copy(data.FAKE_API, scratch / "fake_api.py")  # the checkout may be under /tmp
        # The CLI as the sandbox uid can run it: its cache is under root's 0700 home.
        cli = scratch / "claude"
        try:
            os.link(Path(CLAUDE).resolve(), cli)
        except OSError:
            shutil.copy2(Path(CLAUDE).resolve(), cli)
        if os.geteuid() == 0:  # the directory only: the link shares the CLI's inode
            os.chown(scratch, DEFAULT_UID, DEFAULT_UID)
        driver = (
            "import subprocess, sys\n"
            "api = subprocess.Popen([sys.executable, sys.argv[1], '--script', sys.argv[2],"
            " '--record', sys.argv[3]], stdout=subprocess.PIPE, text=True)\n"
            "port = int(api.stdout.readline().split()[1])\n"
            "env = {'PATH': '/usr/bin:/bin', 'HOME': '/tmp/home',"
            " 'ANTHROPIC_BASE_URL': f'http://127.0.0.1:{port}',"
            " 'ANTHROPIC_API_KEY': 'sk-ant-fake', 'DISABLE_AUTOUPDATER': '1',"
            " 'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC': '1', 'IS_SANDBOX': '1'}\n"
            "code = subprocess.run([sys.argv[4], '-p', 'hi'], env=env,"
            " stdin=subprocess.DEVNULL).returncode\n"
            "api.kill()\n"
            "sys.exit(code)\n"
        )
        return person_runs(
            [
                SYSTEM_PYTHON,
                "-c",
                driver,
                str(scratch / "fake_api.py"),
                str(scratch / "script.json"),
                str(scratch / "record.jsonl"),
                str(cli),
            ],
            cwd=workspace,
            writable=[str(workspace), str(scratch)],
            wall=180,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
