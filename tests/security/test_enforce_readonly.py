"""A command that runs only on the classifier's read-only verdict cannot write.

Through the real daemon, in `default` mode with nobody attached: whatever the classifier
calls read-only runs with the workspace read-only, no network and the repository's git
config cut to inert keys. The payloads below are the issue's examples of commands the
classifier wrongly called read-only; if the classifier now catches one, it is denied
(nobody attached), which these tests also accept: what they check is the disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd_client import Client
from tests.conftest import SANDBOX_UID
from tests.security.hostile import make_hostile_repo, markers, snapshot

UID = SANDBOX_UID if os.geteuid() == 0 else None


def bash(client: Client, sid: str, command: str):
    return client.run_tool(sid, "Bash", {"command": command})


@pytest.fixture
def hostile(client: Client, workspace: Path) -> tuple[str, Path, str]:
    """(session id, workspace, session temp dir): default mode, nobody attached."""
    sid = client.create_session(str(workspace), permission_mode="default").id
    r = bash(client, sid, 'echo "$TMPDIR"')
    assert not r.is_error, r.text
    tmp = r.text.strip()
    make_hostile_repo(workspace, [tmp, str(workspace)], UID)
    return sid, workspace, tmp


WRITERS = [
    "x='$(touch p)'; echo ${x@P}",
    "let 'a[$(touch p)]=1'",
    "read -r PS4 <<< '$(touch p)'; set -x; true",
    "echo data | sort --o=p",
    "echo sh | xargs -I ls env ls -c 'touch p'",
    "git rev-list --output=p HEAD",
    "git status",
    "git diff",
    "git log -p -1",
    "git diff HEAD -- data.bin",
    "git st",
    "git lg -1",
    "git status --short && git log --oneline -1 | cat",
]


@pytest.mark.parametrize("command", WRITERS)
def test_nothing_is_written_and_nothing_planted_runs(
    client: Client, hostile: tuple[str, Path, str], command: str
) -> None:
    sid, ws, tmp = hostile
    before = snapshot(ws)
    r = bash(client, sid, command)
    assert snapshot(ws) == before, r.text
    assert markers(ws, tmp) == [], r.text
    assert not (ws / "p").exists()


def test_the_example_really_writes_without_enforcement(client: Client, workspace: Path) -> None:
    """The control: the same payload in bypassPermissions (not enforced) does write, so
    the test above would catch a sandbox that stopped enforcing."""
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    bash(client, sid, "x='$(touch p)'; echo ${x@P}")
    assert (workspace / "p").exists()


def test_read_only_programs_work_quietly(client: Client, hostile: tuple[str, Path, str]) -> None:
    sid, ws, tmp = hostile
    before = snapshot(ws)
    status = bash(client, sid, "git status --short")
    assert not status.is_error, status.text
    assert "README.md" in status.text and "Read-only" not in status.text
    for command, expect in [
        ("git log --oneline", "first"),
        ("git diff README.md", "+changed"),
        ("ls", "README.md"),
        ("cat README.md", "changed"),
        ("rg -n hi src", "main.py"),
        ("git branch --show-current", "main"),
    ]:
        r = bash(client, sid, command)
        assert not r.is_error, (command, r.text)
        assert expect in r.text, (command, r.text)
        assert "Read-only file system" not in r.text, (command, r.text)
        assert "warning" not in r.text.lower(), (command, r.text)
    assert snapshot(ws) == before
    assert markers(ws, tmp) == []


def test_the_temp_dir_stays_writable(client: Client, hostile: tuple[str, Path, str]) -> None:
    sid, _, tmp = hostile
    r = bash(client, sid, 'ls -la "$TMPDIR" > /dev/null && echo ok')
    assert not r.is_error and "ok" in r.text


def test_a_failed_write_says_why(client: Client, hostile: tuple[str, Path, str]) -> None:
    """A read-only run refused a write: the result says so, naming what it tried to write,
    so the model asks instead of retrying. Needs a command the classifier wrongly calls
    read-only; skipped once the classifier catches them all."""
    from agentd.bashsec import classify

    sid, ws, _ = hostile
    writers = [
        "git rev-list --output=out.txt HEAD",
        "echo data | sort --o=out.txt",
        "x='$(touch out.txt)'; echo ${x@P}",
    ]
    command = next((c for c in writers if classify(c).read_only), None)
    if command is None:
        pytest.skip("the classifier calls none of these read-only any more")
    r = bash(client, sid, command)
    assert r.is_error, r.text
    assert "ran read-only because it was classified read-only" in r.text, r.text
    assert "`out.txt`" in r.text, r.text
    assert "ask the user to run it with write access" in r.text
    assert not (ws / "out.txt").exists()


def test_rule_allowed_commands_run_as_before(
    client: Client, hostile: tuple[str, Path, str]
) -> None:
    """A command a rule allows runs with the workspace writable, as today."""
    sid, ws, _ = hostile
    client.update_permissions(sid, allow=["Bash(touch:*)"])
    r = bash(client, sid, "touch made-by-rule")
    assert not r.is_error, r.text
    assert (ws / "made-by-rule").exists()


def test_no_network_when_enforced(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    r = bash(client, sid, "cat /proc/net/dev")
    assert not r.is_error, r.text
    interfaces = [line.split(":")[0].strip() for line in r.text.splitlines() if ":" in line]
    assert interfaces == ["lo"], r.text


def test_the_traps_fire_without_enforcement(client: Client, workspace: Path) -> None:
    """The control: the planted config runs its programs when the run is not enforced,
    so the tests above would see a trap that got through."""
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    tmp = bash(client, sid, 'echo "$TMPDIR"').text.strip()
    make_hostile_repo(workspace, [tmp], UID)
    bash(client, sid, "git status; git diff; git diff HEAD -- data.bin; git st")
    ran = {os.path.basename(m).rsplit("-", 1)[-1] for m in markers(tmp)}
    assert {"fsmonitor", "extdiff", "alias"} <= ran, ran


def test_git_sees_only_the_inert_config(client: Client, hostile: tuple[str, Path, str]) -> None:
    sid, _, _ = hostile
    r = bash(client, sid, "git config --list --show-scope")
    assert not r.is_error, r.text
    local = [line for line in r.text.splitlines() if line.startswith("local")]
    assert any("core.repositoryformatversion" in line for line in local), r.text
    for key in ("fsmonitor", "pager", "external", "textconv", "alias", "hookspath", "include"):
        assert not any(key in line.lower() for line in local), r.text


@pytest.mark.parametrize(
    "command",
    [
        "git -c core.fsmonitor='touch p' status",
        "git -c alias.status='!touch p' status",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch p' "
        "git status",
        "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='touch p'\" git status",
        "git status > p",
        "git status | tee p",
        "git status $(touch p)",
    ],
)
def test_the_readme_rule_does_not_cover_what_it_did_not_see(
    client: Client, hostile: tuple[str, Path, str], command: str
) -> None:
    """With `Bash(git status:*)`, what the rule did not see keeps the call from running
    unasked (or, if the classifier calls it read-only, runs it read-only)."""
    sid, ws, tmp = hostile
    client.update_permissions(sid, allow=["Bash(git status:*)"])
    before = snapshot(ws)
    r = bash(client, sid, command)
    assert not (ws / "p").exists(), r.text
    assert snapshot(ws) == before, r.text
    assert markers(ws, tmp) == [], r.text


def test_a_rule_allowed_git_status_does_not_run_the_repositorys_programs(
    client: Client, hostile: tuple[str, Path, str]
) -> None:
    """With `Bash(git status:*)`, `git status` runs unasked with the workspace writable,
    as a rule allows, but the hostile repository's fsmonitor, pager and hooks do not run;
    a command the rule allows that is not read-only runs as before."""
    sid, ws, tmp = hostile
    client.update_permissions(sid, allow=["Bash(git status:*)", "Bash(touch:*)"])
    r = bash(client, sid, "git status --short")
    assert not r.is_error and "README.md" in r.text, r.text
    assert markers(ws, tmp) == [], r.text
    assert not bash(client, sid, "touch made").is_error
    assert (ws / "made").exists()
