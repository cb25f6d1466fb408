# ruff: noqa: F811  (pytest fixtures imported from _sandbox_attack, used as parameters)
"""Output by path, and what other users see of a running command (issue 7, items 10, 5).

`> /dev/stdout` reopens fd 1 through /proc/self/fd: a pipe the daemon made as root was
refused to the sandbox uid. And the text of a command (secrets in it included) showed in
every user's `ps` through bwrap's and bash's argv.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import uuid

import pytest

from agentd_client import Client
from tests.support.waiting import wait_until

from ._sandbox_attack import (  # noqa: F401  (fixtures are used by name)
    bash,
    guarded_sh,
    sandbox_daemon,
    sec_client,
    sec_session,
    sec_workspace,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
# A user other than the sandbox's, to look at the process list as.
OBSERVER_UID = 4243


def test_writing_to_dev_stdout_and_stderr_works(sec_client: Client, sec_session: str) -> None:
    script = "echo via-path > /dev/stdout; echo via-tee | tee /dev/stdout; echo err > /dev/stderr"
    r = bash(sec_client, sec_session, guarded_sh(script))
    assert not r.is_error, r.text
    assert r.text.splitlines() == ["via-path", "via-tee", "via-tee", "err"], r.text


def _process_list_as(uid: int) -> str:
    """Every command line on the host as `uid` sees it (`ps` run as that user)."""
    out = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
         "ps", "-eo", "args", "-ww"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="looking as another user needs root")
def test_other_users_do_not_see_the_command_text(sec_client: Client, sec_session: str) -> None:
    with pytest.raises(KeyError):
        pwd.getpwuid(OBSERVER_UID)  # nobody real, so no one's processes are hidden from it
    secret = f"hunter2-{uuid.uuid4().hex[:8]}"
    marker = f"{int(uuid.uuid4().int % 10**6) + 10**6}.7"
    command = f"export API_TOKEN={secret}; sleep {marker} # {secret}"
    r = sec_client.run_tool(sec_session, "Bash", {"command": command, "run_in_background": True})
    task_id = r.data["backgroundTaskId"]
    try:

        def listed() -> str:  # once the command's sleep is up (it names no secret)
            text = _process_list_as(OBSERVER_UID)
            return text if f"sleep {marker}" in text else ""

        seen = wait_until(listed, what="the command in the process list")
        assert secret not in seen
        assert "API_TOKEN" not in seen
    finally:
        sec_client.run_tool(sec_session, "TaskStop", {"task_id": task_id})
