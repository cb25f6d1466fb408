"""agentd_sandbox/hostview.py: what a sandbox start looks up about the host, kept between
starts and looked up again whenever what it rests on changed: a credential made in a
home, an allowed name turned into a link to one, a way closed by a chmod, a directory
mounted over a home, another allow-list; the mount table read again only after a mount.

The homes are a test's own (visibility's lookups pointed at them). Whether an answer is
reused is checked where nothing else writes: under a tmpfs over /mnt in a mount
namespace of the test's own (a busy /tmp on the way would make any answer stale)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_sandbox import hostview, visibility
from agentd_sandbox.identity import Identity

ROOT = Path(__file__).resolve().parents[2]
NOBODY = Identity(65534, 65534, switch=True)
ALLOW = (".gitconfig", ".config/git/config", ".cargo/bin")


def _home(base: Path) -> Path:
    home = base / "homes" / "u"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "config").write_text("[user]\n")
    (home / ".gitconfig").write_text("[user]\n")
    for path in (base, base / "homes", home, home / ".config", home / ".config" / "git"):
        path.chmod(0o755)
    return home


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home of the test's own that the sandbox uid can reach (pytest's tmp_path is in
    a 0700 directory), the only one visibility finds; no system paths."""
    base = Path(tempfile.mkdtemp(prefix="agentd-hostview-", dir="/var/tmp"))
    base.chmod(0o755)
    home = _home(base)
    monkeypatch.setattr(visibility, "home_dirs", lambda identity: [str(home.parent)])
    monkeypatch.setattr(visibility, "user_homes", lambda identity, dirs=None: [str(home)])
    monkeypatch.setattr(visibility, "SECRET_PATHS", ())
    monkeypatch.setattr(visibility, "ENDPOINT_DIRS", ())
    monkeypatch.setattr(visibility, "KEEP_TARGETS", ())
    monkeypatch.setattr(hostview, "PASSWD_PLACES", (str(base / "passwd"),))
    monkeypatch.setattr(hostview, "home_of", lambda uid: None)
    yield home
    shutil.rmtree(base, ignore_errors=True)


def _views() -> hostview.HostViews:
    # No racy margin: these tests change the tree right after a lookup on purpose.
    return hostview.HostViews(racy_seconds=0)


def test_the_answer_is_visibilitys(home: Path) -> None:
    view = _views().get(NOBODY, ALLOW)
    assert view.homes == (str(home),) and view.dirs == (str(home.parent),)
    assert set(view.allowed) == {f"{home}/.gitconfig", f"{home}/.config/git/config"}
    assert view.secrets == ()


def test_a_credential_made_in_a_home_is_seen_at_once(home: Path) -> None:
    views = _views()
    assert views.get(NOBODY, ALLOW).secrets == ()
    (home / ".ssh").mkdir(mode=0o755)
    assert views.get(NOBODY, ALLOW).secrets == (f"{home}/.ssh",)
    (home / ".config" / "gh").mkdir(mode=0o755)  # one level down: its way is stamped
    assert f"{home}/.config/gh" in views.get(NOBODY, ALLOW).secrets


def test_an_allowed_name_turned_into_a_link_to_a_credential_is_dropped(home: Path) -> None:
    views = _views()
    assert f"{home}/.gitconfig" in views.get(NOBODY, ALLOW).allowed
    (home / ".netrc").write_text("machine x password y\n")
    (home / ".gitconfig").unlink()
    (home / ".gitconfig").symlink_to(home / ".netrc")
    view = views.get(NOBODY, ALLOW)
    assert f"{home}/.gitconfig" not in view.allowed
    assert f"{home}/.netrc" in view.secrets


def test_a_way_closed_by_a_chmod_is_seen(home: Path) -> None:
    views = _views()
    assert f"{home}/.config/git/config" in views.get(NOBODY, ALLOW).allowed
    (home / ".config").chmod(0o700)  # nobody may no longer search it
    assert f"{home}/.config/git/config" not in views.get(NOBODY, ALLOW).allowed


def test_another_home_named_by_home_is_another_answer(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$HOME is where visibility finds the daemon's own home (with its credentials)."""
    seen: list[str] = []
    monkeypatch.setattr(
        visibility, "home_dirs", lambda identity: seen.append(os.path.expanduser("~")) or []
    )
    views = _views()
    monkeypatch.setenv("HOME", str(home))
    views.get(NOBODY, ALLOW)
    monkeypatch.setenv("HOME", str(home / ".config"))
    views.get(NOBODY, ALLOW)
    assert seen == [str(home), str(home / ".config")]


def test_another_allow_list_is_another_answer(home: Path) -> None:
    views = _views()
    assert f"{home}/.gitconfig" in views.get(NOBODY, ALLOW).allowed
    assert views.get(NOBODY, (".cargo/bin",)).allowed == ()
    assert views.computed == 2


# Run in a mount namespace of its own, as root: a tmpfs over /mnt (nothing else writes
# there, and its only way up is /) holds the homes.
_IN_A_NAMESPACE = textwrap.dedent(
    """
    import os, subprocess, sys
    sys.path.insert(0, {root!r})
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/mnt"], check=True)
    os.chmod("/mnt", 0o755)
    from pathlib import Path
    from agentd_sandbox import hostview, visibility
    from agentd_sandbox.identity import Identity
    from tests.sandbox.test_hostview import ALLOW, _home

    home = _home(Path("/mnt"))
    visibility.home_dirs = lambda identity: [str(home.parent)]
    visibility.user_homes = lambda identity, dirs=None: [str(home)]
    visibility.SECRET_PATHS = visibility.ENDPOINT_DIRS = visibility.KEEP_TARGETS = ()
    hostview.PASSWD_PLACES = ("/mnt/passwd",)
    hostview.home_of = lambda uid: None
    os.environ["HOME"] = str(home)
    views = hostview.HostViews(racy_seconds=0)
    nobody = Identity(65534, 65534, switch=True)
    first = views.get(nobody, ALLOW)
    again = views.get(nobody, ALLOW)
    assert again == first and (views.computed, views.reused) == (1, 1), views.computed
    (home / "notes.txt").write_text("x")  # a name made in a home: looked up again
    views.get(nobody, ALLOW)
    assert views.computed == 2, views.computed
    other = Path("/mnt/other")
    (other / ".ssh").mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(other), str(home)], check=True)
    assert views.get(nobody, ALLOW).secrets == (str(home / ".ssh"),)
    print("ok")
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount needs root")
def test_an_unchanged_host_is_looked_up_once_and_a_mount_over_a_home_is_seen() -> None:
    script = _IN_A_NAMESPACE.format(root=str(ROOT))
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount needs root")
def test_the_mount_table_is_read_again_only_after_a_mount() -> None:
    script = textwrap.dedent(
        f"""
        import subprocess, sys
        sys.path.insert(0, {str(ROOT)!r})
        from agentd_sandbox.mountinfo import MountTable
        table = MountTable()
        first = table.text()
        assert table.text() is first and table.reads == 1
        subprocess.run(["mount", "-t", "tmpfs", "agentd-hostview-test", "/mnt"], check=True)
        text = table.text()
        assert table.reads == 2 and "agentd-hostview-test" in text, table.reads
        assert table.text() is text
        print("ok")
        """
    )
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
