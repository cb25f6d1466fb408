"""A change to a file that direnv or neovim runs is held, and the person's direnv and
nvim, run next in the workspace, still run what the person had: the content they
allowed, never the content a sandboxed call planted. Each plants through the daemon's
Bash; the person's program runs in a sandbox of the test's own with a throwaway home.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.security._held import as_sandbox_user, held_paths, marker, person_runs, touch_marker
from tests.support.workspaces import reachable_workspace

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
Q = shlex.quote


@pytest.fixture
def sid(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id


@pytest.fixture
def home() -> Iterator[Path]:
    """The person's throwaway home (direnv's allow list, nvim's state), outside the
    workspace and reachable by the uid the person's programs run as here."""
    root = reachable_workspace()
    as_sandbox_user(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "TERM": "dumb",
    }


@pytest.mark.skipif(shutil.which("direnv") is None, reason="direnv missing (make system-deps)")
def test_an_allowed_envrc_changed_in_a_call_is_held_and_direnv_loads_the_persons(
    client: Client, sid: str, workspace: Path, home: Path
) -> None:
    (workspace / "app").mkdir()
    (workspace / "app" / ".envrc").write_text("export FROM=person\n")
    as_sandbox_user(workspace)
    ws = [str(workspace), str(home)]
    allowed = person_runs(
        ["direnv", "allow", "."], cwd=workspace / "app", writable=ws, env=_env(home)
    )
    assert allowed.code == 0, allowed.out
    planted = f"export FROM=sandbox\n{touch_marker(workspace)}\n"
    r = client.run_tool(sid, "Bash", {"command": f"printf %s {Q(planted)} > app/.envrc; echo done"})
    assert "done" in r.text, r.text
    assert str(workspace / "app" / ".envrc") in held_paths(r.text), r.text
    # direnv keys its allow list by content: had the change stayed, the .envrc would be
    # blocked and FROM unset; held, the person's allowed .envrc loads as before.
    ran = person_runs(
        ["direnv", "exec", ".", "sh", "-c", 'echo "FROM=$FROM"'],
        cwd=workspace / "app",
        writable=ws,
        env=_env(home),
    )
    assert "FROM=person" in ran.out, ran.out
    assert not marker(workspace).exists(), ran.out


@pytest.mark.skipif(shutil.which("nvim") is None, reason="neovim missing (make system-deps)")
@pytest.mark.parametrize("name", [".nvimrc", ".exrc"])
def test_an_exrc_changed_in_a_call_is_held_and_nvim_sources_the_persons(
    client: Client, sid: str, workspace: Path, home: Path, name: str
) -> None:
    loaded = workspace / "app" / "LOADED"
    (workspace / "app").mkdir()
    (workspace / "app" / name).write_text(f"call writefile(['person'], {str(loaded)!r})\n")
    as_sandbox_user(workspace)
    planted = f"call writefile(['sandbox'], {str(loaded)!r})\nsilent !{touch_marker(workspace)}\n"
    r = client.run_tool(sid, "Bash", {"command": f"printf %s {Q(planted)} > app/{name}; echo done"})
    assert "done" in r.text, r.text
    assert str(workspace / "app" / name) in held_paths(r.text), r.text
    init = home / ".config" / "nvim" / "init.vim"
    init.parent.mkdir(parents=True)
    init.write_text("set exrc\n")  # a person whose init sets 'exrc'
    as_sandbox_user(home)
    ran = person_runs(
        ["nvim", "--headless", "-i", "NONE", "+qa!"],
        cwd=workspace / "app",
        writable=[str(workspace), str(home)],
        env=_env(home),
        wall=60,
    )
    assert not marker(workspace).exists(), ran.out
    assert loaded.read_text().strip() == "person", ran.out
