"""`agentctl mcp install` for a login user, whose daemon listens under XDG_RUNTIME_DIR.

Codex and the official MCP SDK start the server with a stripped environment (no
XDG_RUNTIME_DIR, no AGENTD_*), so the installed entry must carry where the daemon is.
Everything here runs as a real non-root user (tests/support/login_user.py): its daemon
on its default socket, `agentctl mcp install` from its login environment, then real
Codex (against the fake Responses API) and the MCP SDK's stdio client starting the
server. With the daemon gone, both report agentctl's reason from the handshake.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client.integrations.codex import RUN
from tests.e2e.test_mcp_codex import CODEX, FAKE_API
from tests.support import login_user
from tests.support.daemon import DaemonProcess, start_daemon

WHY = login_user.available()
pytestmark = pytest.mark.skipif(bool(WHY), reason=WHY or "-")
AGENTCTL = str(Path(sys.executable).parent / "agentctl")

# The MCP SDK's stdio client, run as the user, starting the server the way Claude Code's
# configuration says: its own default environment, plus the entry's `env`.
SDK_CLIENT = textwrap.dedent(
    """
    import asyncio, json, sys
    import mcp
    from mcp.client.stdio import StdioServerParameters

    entry = json.loads(sys.argv[1])
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=entry.get("env")
    )

    async def main():
        try:
            async with mcp.Client(params) as m:
                listed = await m.list_tools()
                done = await m.call_tool("Bash", {"command": "id -u; echo $XDG_RUNTIME_DIR"})
                print(json.dumps({"tools": [t.name for t in listed.tools],
                                  "text": done.content[0].text, "error": done.is_error}))
        except Exception as exc:  # the SDK's task groups wrap what failed
            leaves = []

            def walk(e):
                for x in getattr(e, "exceptions", None) or []:
                    walk(x)
                if not getattr(e, "exceptions", None):
                    leaves.append(e)

            walk(exc)
            print(json.dumps({"failed": [type(e).__name__ for e in leaves],
                              "message": " | ".join(str(e) for e in leaves)}))

    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def user() -> Iterator[login_user.LoginUser]:
    base = Path(tempfile.mkdtemp(prefix="agentd-login-", dir="/tmp"))
    base.chmod(0o755)
    also = [CODEX] if CODEX else []
    try:
        yield login_user.login_user(base, also=[os.path.realpath(p) for p in also])
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def user_daemon(user: login_user.LoginUser, tmp_path: Path) -> Iterator[DaemonProcess]:
    """The user's daemon on its default socket, $XDG_RUNTIME_DIR/agentd/agentd.sock."""
    base = user.own(user.runtime_dir.parent / f"daemon-{os.getpid()}-{id(tmp_path)}", 0o755)
    user.own(base / "state")
    socket = str(user.runtime_dir / "agentd" / "agentd.sock")
    d = start_daemon(base, env=user.env(), inherit_env=False, wrapper=user.argv(), socket=socket)
    try:
        yield d
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


def _session(user: login_user.LoginUser, workspace: Path) -> str:
    made = user.run(AGENTCTL, "session", "new", "--workspace", str(workspace), "--mode",
                    "bypassPermissions")  # fmt: skip
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _sdk(user: login_user.LoginUser, entry: dict[str, object]) -> dict[str, object]:
    ran = user.run(sys.executable, "-c", SDK_CLIENT, json.dumps(entry))
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.strip().splitlines()[-1])


def test_the_installed_entry_reaches_the_users_daemon_with_a_stripped_environment(
    user: login_user.LoginUser, user_daemon: DaemonProcess
) -> None:
    workspace = user.own(Path(user_daemon.state_dir).parent / "ws", 0o755)
    sid = _session(user, workspace)
    home = user.own(Path(user_daemon.state_dir).parent / "home")
    # From the user's login shell, no flag: the entry pins what agentctl resolved.
    r = user.run(AGENTCTL, "mcp", "install", "claude-code", "--workspace", str(workspace),
                 "--session", sid, "--json", env=user.env(HOME=str(home)))  # fmt: skip
    assert r.returncode == 0, r.stderr
    installed = json.loads(r.stdout)
    assert installed["reachable"] is True
    entry = json.loads((home / ".claude.json").read_text())["projects"][str(workspace)][
        "mcpServers"
    ]["agentd"]
    assert entry["args"] == ["--socket", user_daemon.socket, "mcp", "--session", sid]
    got = _sdk(user, entry)
    assert "Bash" in got["tools"] and got["error"] is False, got
    uid, runtime = (str(got["text"]).splitlines() + [""])[:2]
    assert uid == str(user.uid)  # the user's own daemon ran it, in its sandbox
    # ... and the MCP SDK had really stripped the variable the default socket comes from.
    assert runtime == ""


@pytest.mark.skipif(CODEX is None, reason="Codex CLI not installed")
def test_codex_reaches_the_users_daemon_then_says_why_not(
    user: login_user.LoginUser, user_daemon: DaemonProcess
) -> None:
    assert CODEX is not None
    base = Path(user_daemon.state_dir).parent
    workspace = user.own(base / "ws", 0o755)
    sid = _session(user, workspace)
    codex_home = user.own(base / "codex")
    record = base / "requests.jsonl"
    api = subprocess.Popen(
        [sys.executable, str(FAKE_API), "--tool", "Bash", "--record", str(record),
         "--arguments", json.dumps({"command": "id -u > proof.txt"})],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert api.stdout is not None
        port = int(api.stdout.readline().split()[1])
        config = codex_home / "config.toml"
        config.write_text(
            'model = "gpt-fake"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
            'wire_api = "responses"\nenv_key = "FAKE_OPENAI_KEY"\n'
        )
        os.chown(config, user.uid, user.gid)
        env = user.env(CODEX_HOME=str(codex_home), FAKE_OPENAI_KEY="fake")
        r = user.run(AGENTCTL, "mcp", "install", "codex", "--workspace", str(workspace),
                     "--session", sid, env=env)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert f"dials unix:{user_daemon.socket}" in r.stdout
        server = tomllib.loads(config.read_text())["mcp_servers"]["agentd"]
        assert server["args"][:2] == ["--socket", user_daemon.socket]

        def codex(prompt: str) -> subprocess.CompletedProcess[str]:
            # Codex runs in the user's login environment, XDG_RUNTIME_DIR and all; it
            # starts the MCP server without it.
            return user.run(CODEX, *RUN.split()[1:], "exec", "--skip-git-repo-check", "-C",
                            str(workspace), prompt, env=env, timeout=180,
                            stdin=subprocess.DEVNULL)  # fmt: skip

        ran = codex("go")
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert (workspace / "proof.txt").read_text().strip() == str(user.uid)

        user_daemon.stop()
        refused = codex("again")
    finally:
        api.terminate()
        api.wait(10)
    # Codex could not start the required server, and says agentctl's reason.
    assert refused.returncode != 0
    said = refused.stdout + refused.stderr
    assert "cannot reach agentd at" in said and user_daemon.socket in said, said[-3000:]


def test_a_server_that_cannot_reach_the_daemon_says_so_in_the_handshake(
    user: login_user.LoginUser, tmp_path: Path
) -> None:
    gone = str(user.runtime_dir / "agentd" / "gone.sock")
    entry = {"command": AGENTCTL, "args": ["--socket", gone, "mcp", "--session", "web"]}
    got = _sdk(user, entry)
    assert got.get("failed"), got
    message = str(got["message"])
    assert "agentctl mcp: cannot reach agentd at" in message and gone in message, got
