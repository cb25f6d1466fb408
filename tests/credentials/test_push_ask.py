"""A push to a protected branch asks a person on a real `agentctl attach` terminal,
whatever the session's mode (here bypassPermissions, which asks nobody anything else),
and goes through or not by that answer."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.credentials.conftest import GIT_HOST, Routes
from tests.credentials.test_git_route import IDENT, git_pushes
from tests.e2e.test_agentctl_attach import _read_until

pytestmark = pytest.mark.timeout(300)


def _head(routes: Routes, ref: str) -> str:
    git_dir = str(routes.repos / "demo.git")
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", "-q", "--verify", ref],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


@pytest.mark.parametrize(("answer", "pushed"), [("n", False), ("y", True)])
def test_a_protected_push_is_asked_on_an_attached_terminal(
    routes: Routes, net_workspace: Path, answer: str, pushed: bool
) -> None:
    with routes.client() as client:
        sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentd_client.cli.main", "--socket", routes.daemon.socket]
            + ["attach", sid],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
        )
        os.close(slave)
        try:
            client.run_tool(sid, "Glob", {"pattern": "*"})
            _read_until(master, b"Glob")  # attached
            before = _head(routes, "refs/heads/main")
            url = f"https://{GIT_HOST}:{routes.git_port}/demo.git"
            out: dict[str, object] = {}
            # Cloned outside the workspace: a clone in it writes a .git/config the daemon
            # holds for a person's approval, which an attached person would be asked too.
            command = (
                f"git clone -q {url} /tmp/w && cd /tmp/w && git pull -q && "
                f"echo {answer} >> MARKER && git {IDENT} commit -qam {answer} && "
                "git push origin main 2>&1; echo RC=$?"
            )
            caller = threading.Thread(
                target=lambda: out.update(
                    r=client.run_tool(sid, "Bash", {"command": command, "timeout": 240_000})
                )
            )
            caller.start()
            seen = _read_until(master, b"[y/N")
            assert b"GitPush" in seen and b"refs/heads/main" in seen, seen
            # A sentence, not the input's JSON.
            assert f"GitPush wants: push to {url}: main: ".encode() in seen, seen
            assert b'{"repository"' not in seen, seen
            os.write(master, answer.encode() + b"\n")
            caller.join(120)
            text = out["r"].text  # type: ignore[attr-defined]
            after = _head(routes, "refs/heads/main")
            if pushed:
                assert "RC=0" in text and after != before, text
            else:
                assert "RC=1" in text and "[remote rejected]" in text and after == before, text
                assert "remote: agentd: refused by" in text and "agentd: agentd" not in text, text
            # The attached terminal shows the push, its ref and who decided.
            shown = _read_until(master, b"refs/heads/main")
            assert (b"pushed to" if pushed else b"push refused") in shown, shown
            last = git_pushes(client, sid)[-1]
            assert last.allowed is pushed and last.updates[0].protected, last
            assert ("allowed by" if pushed else "refused by") in last.decided_by, last
        finally:
            proc.kill()  # the person's terminal goes away
            proc.wait(10)
            os.close(master)
