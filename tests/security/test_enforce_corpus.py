"""The differential test (issue 8): every corpus command the classifier calls read-only
runs enforced in a scratch copy of a hostile workspace, and nothing changes.

The workspace is a git repository whose config plants core.fsmonitor, core.pager,
pager.*, diff.external, a textconv and a filter driver, an alias, core.hooksPath with
hooks, an include, and `.claude/settings.json` with a hook: each planted program writes
a marker into the session's temp dir (writable even in a read-only run) and into the
workspace. After all the commands, no path of the workspace has changed and no marker
exists. The counts are printed (run with -s to see them).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from agentd.bashsec import classify_uncached
from tests.conftest import SANDBOX_UID
from tests.security.corpus_runner import Runner, populate, read_only_commands
from tests.security.hostile import make_hostile_repo, markers, snapshot
from tests.security.test_enforce_readonly import WRITERS

UID = SANDBOX_UID if os.geteuid() == 0 else None
# Commands that, unenforced, run what the hostile repository plants.
TRAPPED = ["git status", "git diff", "git diff HEAD -- data.bin", "git st", "git log -1"]


def _hostile_copy(runner_tmp: str, ws: Path) -> None:
    ws.chmod(0o755)
    populate(ws)
    make_hostile_repo(ws, [runner_tmp, str(ws)], UID, widening=True)


def test_no_read_only_corpus_command_writes_under_enforcement() -> None:
    corpus = read_only_commands()
    assert len(corpus) > 100
    # and the examples the classifier (as it is in this tree) calls read-only
    examples = [c for c in WRITERS if classify_uncached(c).read_only and c not in corpus]
    commands = corpus + examples
    ws = Path(tempfile.mkdtemp(prefix="agentd-diff-", dir="/tmp"))
    try:
        runner = Runner(ws, read_only=True, wall_seconds=5)
        _hostile_copy(runner.tmp_dir, ws)
        before = snapshot(ws)
        started = time.monotonic()
        outcomes = asyncio.run(runner.run_all(commands))
        elapsed = time.monotonic() - started
        changed = {
            k for k in before.keys() | snapshot(ws).keys() if before.get(k) != snapshot(ws).get(k)
        }
        ran = markers(ws, runner.tmp_dir)
        refused = sum(1 for o in outcomes if "Read-only file system" in o.output)
        print(
            f"\ndifferential: {len(corpus)} read-only corpus commands and {len(examples)} of "
            f"the issue's examples run enforced in "
            f"{elapsed:.1f}s; {len(changed)} workspace paths changed; {len(ran)} planted "
            f"programs ran; {refused} commands were refused a write"
        )
        assert changed == set(), sorted(changed)
        assert ran == [], ran
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_the_hostile_workspace_is_hostile_unenforced() -> None:
    """The control: unenforced, the planted programs run and the workspace changes, so
    the test above would see it if enforcement let either happen."""
    ws = Path(tempfile.mkdtemp(prefix="agentd-diff-", dir="/tmp"))
    try:
        runner = Runner(ws, read_only=False, wall_seconds=5)
        _hostile_copy(runner.tmp_dir, ws)
        before = snapshot(ws)
        asyncio.run(runner.run_all([*TRAPPED, "x='$(touch p)'; echo ${x@P}"]))
        ran = {os.path.basename(m).rsplit("-", 1)[-1] for m in markers(ws, runner.tmp_dir)}
        assert {"fsmonitor", "extdiff", "alias"} <= ran, ran
        assert snapshot(ws) != before
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_a_read_only_run_cannot_plant_config_for_a_later_run(tmp_path: Path) -> None:
    """The temp dir stays writable in a read-only run, but HOME (which a later run with
    write access obeys: .gitconfig, .npmrc, usercustomize…) does not."""
    ws = Path(tempfile.mkdtemp(prefix="agentd-diff-", dir="/tmp"))
    try:
        ws.chmod(0o755)
        runner = Runner(ws, read_only=True)
        plant = (
            "printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > \"$HOME/.gitconfig\"; "
            'mkdir -p "$HOME/.config/git"; echo planted > "$TMPDIR/scratch" && echo tmp-ok'
        )
        r = asyncio.run(runner.run(plant))
        assert "Read-only file system" in r.output and "tmp-ok" in r.output, r.output
        later = asyncio.run(
            runner.run('cat "$HOME/.gitconfig"; ls -A "$HOME"; echo end', read_only=False)
        )
        assert (
            later.output.strip()
            == "cat: "
            + os.path.join(runner.tmp_dir, "home", ".gitconfig")
            + ": No such file or directory\nend"
        ), later.output
    finally:
        shutil.rmtree(ws, ignore_errors=True)
