"""`agentctl trust`: list, approve (showing what it widens) and revoke, through the real
daemon; an approval names exact content."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentd_client import Client
from tests.support.daemon import DaemonProcess


def agentctl(
    daemon: DaemonProcess, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agentd_client.cli.main", "--socket", daemon.socket, *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)


def entries(daemon: DaemonProcess, path: Path) -> list[dict[str, Any]]:
    out = agentctl(daemon, "trust", "ls", "--json", "--path", str(path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_trust_ls_approve_revoke(daemon: DaemonProcess, client: Client, workspace: Path) -> None:
    (workspace / ".claude").mkdir()
    path = workspace / ".claude" / "settings.local.json"
    body = {"permissions": {"allow": ["Bash(make:*)"], "deny": ["Read(.env)"]}}
    path.write_text(json.dumps(body))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    client.create_session(str(workspace))

    # listed among the open sessions' files, with only what it widens
    out = agentctl(daemon, "trust", "ls", "--json")
    mine = [e for e in json.loads(out.stdout) if e["path"] == str(path)]
    assert mine == [
        {
            "path": str(path),
            "sha256": sha,
            "state": "untrusted",
            "source": "",
            "approved_by": "",
            "approved_ms": "0",
            "current": True,
            "error": "",
            "widens": {"permissions": {"allow": ["Bash(make:*)"]}},
        }
    ]

    # approve asks, showing the widening parts; "n" trusts nothing
    out = agentctl(daemon, "trust", "approve", str(path), stdin="n\n")
    assert out.returncode == 1 and "Bash(make:*)" in out.stdout and "Trust these" in out.stdout
    assert entries(daemon, path)[0]["state"] == "untrusted"

    # a hash the file does not hold is refused, in one line
    out = agentctl(daemon, "trust", "approve", str(path), "--sha256", "0" * 64)
    assert out.returncode == 3 and f"sha256 {sha}" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1

    out = agentctl(daemon, "trust", "approve", str(path), stdin="y\n")
    assert out.returncode == 0 and f"trusted {path} (sha256 {sha})" in out.stdout, out.stderr
    [entry] = entries(daemon, path)
    assert (entry["state"], entry["source"], entry["current"]) == ("trusted", "approved", True)

    out = agentctl(daemon, "trust", "revoke", str(path), "--json")
    assert [e["sha256"] for e in json.loads(out.stdout)] == [sha]
    assert entries(daemon, path)[0]["state"] == "untrusted"

    out = agentctl(daemon, "trust", "approve", str(workspace / "settings.json"), "--yes")
    assert out.returncode == 3 and "not a workspace settings file" in out.stderr
