"""The mount list: paths inside a root bound by descriptor, never through a link, and the
final list checked before bwrap starts (issue 17, item 1).

check() is fed wrong lists here directly: a builder bug must fail the start, never show
a hidden file. The builder is then given links where the policy names paths, and the
sandbox started for real shows nothing of their targets.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from agentd_sandbox import SandboxPolicy, SandboxUnavailable, anchored, bwrap, identity, mounts
from agentd_sandbox.mounts import Mount, Role, check
from tests.sandbox.conftest import run_capture

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

SECRET = "agentd-mount-list-" + os.urandom(6).hex()


@pytest.fixture
def hidden_home() -> Iterator[str]:
    """A world-readable directory in /home with a secret: only the cover hides it."""
    path = tempfile.mkdtemp(prefix="agentd-ml-", dir="/home")
    os.chmod(path, 0o755)
    with open(os.path.join(path, "secret"), "w") as f:
        f.write(SECRET)
    os.chmod(os.path.join(path, "secret"), 0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _fd(path: str) -> int:
    return os.open(path, os.O_PATH | os.O_CLOEXEC)


def test_a_good_list_passes(ws: str) -> None:
    root, inner = _fd(ws), None
    os.mkdir(os.path.join(ws, ".git"))
    inner = _fd(os.path.join(ws, ".git"))
    try:
        check(
            [
                Mount("tmpfs", "/home", Role.COVER),
                Mount("bind", ws, Role.GRANT, fd=root),
                Mount("ro-bind", f"{ws}/.git", Role.PROTECT, fd=inner),
                Mount("tmpfs", f"{ws}/.git", Role.HIDE),
            ],
            covered=["/tmp", "/home"],
            secrets=[f"{ws}/.git"],
        )
    finally:
        os.close(root)
        os.close(inner)


def test_a_protection_whose_descriptor_is_elsewhere_fails_the_start(
    ws: str, hidden_home: str
) -> None:
    # What a name bound through its link would give: /home's content at ws/.idea.
    root, elsewhere = _fd(ws), _fd(hidden_home)
    try:
        bad = [
            Mount("tmpfs", "/home", Role.COVER),
            Mount("bind", ws, Role.GRANT, fd=root),
            Mount("ro-bind", f"{ws}/.idea", Role.PROTECT, fd=elsewhere),
        ]
        with pytest.raises(SandboxUnavailable, match="would show"):
            check(bad, covered=["/tmp", "/home"], secrets=[])
        # Bound onto itself, but outside every root granted before it.
        bad[2] = Mount("ro-bind", hidden_home, Role.PROTECT, fd=elsewhere)
        with pytest.raises(SandboxUnavailable, match="beneath no root"):
            check(bad, covered=["/tmp", "/home"], secrets=[])
    finally:
        os.close(root)
        os.close(elsewhere)


def test_a_protection_bound_by_name_fails_the_start(ws: str) -> None:
    root = _fd(ws)
    try:
        bad = [
            Mount("bind", ws, Role.GRANT, fd=root),
            Mount("ro-bind", f"{ws}/.bashrc", Role.PROTECT, source=f"{ws}/.bashrc"),
        ]
        with pytest.raises(SandboxUnavailable, match="by name"):
            check(bad, covered=["/tmp"], secrets=[])
    finally:
        os.close(root)


def test_a_grant_holding_a_covered_place_fails_the_start() -> None:
    bad = [Mount("tmpfs", "/home", Role.COVER), Mount("ro-bind", "/", Role.GRANT, source="/")]
    with pytest.raises(SandboxUnavailable, match="would show all of /(tmp|home) again"):
        check(bad, covered=["/tmp", "/home"], secrets=[])


def test_a_secret_shown_after_it_was_hidden_fails_the_start(ws: str) -> None:
    secret = os.path.join(ws, "state")
    os.mkdir(secret)
    root, again = _fd(ws), _fd(secret)
    try:
        hidden_first = [
            Mount("bind", ws, Role.GRANT, fd=root),
            Mount("tmpfs", secret, Role.HIDE),
            Mount("bind", secret, Role.PROTECT, fd=again),
        ]
        with pytest.raises(SandboxUnavailable, match="which is hidden"):
            check(hidden_first, covered=["/tmp"], secrets=[secret])
        never_hidden = [hidden_first[0], hidden_first[2]]
        with pytest.raises(SandboxUnavailable, match="which is hidden"):
            check(never_hidden, covered=["/tmp"], secrets=[secret])
    finally:
        os.close(root)
        os.close(again)


@pytest.mark.parametrize("kind", ["ro-bind", "ro-bind-data"])
def test_a_stand_in_for_a_hidden_host_file_fails_the_start(
    kind: str, ws: str, hidden_home: str
) -> None:
    """A file bound from a descriptor (ro-bind) or given by its content (ro-bind-data)
    may not stand in for a hidden host file; at a mount point of the sandbox's own it may."""
    if kind == "ro-bind":
        staged = os.path.join(ws, "copy")
        with open(staged, "w") as f:
            f.write("sanitised\n")
        fd = _fd(staged)
    else:
        fd = os.memfd_create("test", os.MFD_CLOEXEC)
    try:
        bad = [
            Mount("tmpfs", "/home", Role.COVER),
            Mount(kind, f"{hidden_home}/secret", Role.GRANT, fd=fd),
        ]
        with pytest.raises(SandboxUnavailable, match="stand in"):
            check(bad, covered=["/tmp", "/home"], secrets=[])
        # A fixed mount point of the sandbox's own (no host file there) is fine.
        check(
            [bad[0], Mount(kind, "/run/agentd-test-mount", Role.GRANT, fd=fd)],
            covered=["/tmp", "/home", "/run"],
            secrets=[],
        )
    finally:
        os.close(fd)


async def test_a_file_given_by_content_is_shown_read_only_from_nowhere(ws: str) -> None:
    # Its content is all the sandbox gets: no host path, so nothing the identity must
    # reach (a helper kept in a checkout under /root, issue #34).
    pol = SandboxPolicy(
        writable=[ws], cwd=ws, ro_files=[(b"#!/bin/sh\necho HELPER-RAN\n", "/run/a/helper")]
    )
    script = "/run/a/helper; stat -c %a /run/a/helper; chmod u+w /run/a/helper; "
    script += "echo x >> /run/a/helper && echo WROTE"
    res = await run_capture(pol, ["sh", "-c", script])
    assert res.out.split() == ["HELPER-RAN", "555"], (res.out, res.err)
    assert "Read-only" in res.err, res.err


def _linked_workspace(ws: str, target_dir: str) -> SandboxPolicy:
    """A workspace whose protected names are links to `target_dir` (and its secret), and
    the policy that names them as the daemon would."""
    os.makedirs(os.path.join(ws, ".git", "hooks"))
    for name in (".idea", ".vscode"):
        os.symlink(target_dir, os.path.join(ws, name))
    os.symlink(os.path.join(target_dir, "secret"), os.path.join(ws, ".bashrc"))
    os.symlink(os.path.join(target_dir, "secret"), os.path.join(ws, ".git", "config"))
    os.symlink(target_dir, os.path.join(ws, ".git", "modules"))
    if os.geteuid() == 0:
        for d, names, files in os.walk(ws):
            for n in [*names, *files, "."]:
                os.lchown(os.path.join(d, n), identity.DEFAULT_UID, identity.DEFAULT_UID)
    names = [".idea", ".vscode", ".bashrc", ".git/config", ".git/hooks"]
    return SandboxPolicy(
        writable=[ws, os.path.join(ws, ".git"), os.path.join(ws, ".git", "modules")],
        read_only=[os.path.join(ws, n) for n in names],
        cwd=ws,
    )


def test_links_named_by_the_policy_are_bound_nowhere(ws: str, hidden_home: str) -> None:
    pol = _linked_workspace(ws, hidden_home)
    ident = identity.resolve(pol)
    argv, mount_list = bwrap.build_argv(pol, ["true"], identity=ident, bwrap="bwrap")
    try:
        bound = {anchored.fd_path(fd) for fd in mount_list.fds}
        assert bound == {ws, os.path.join(ws, ".git"), os.path.join(ws, ".git", "hooks")}
        assert hidden_home not in " ".join(argv)
        for m in mount_list.mounts:
            if m.role is Role.PROTECT and m.op in mounts.BINDS:
                assert m.fd is not None and m.source is None
    finally:
        mount_list.close()


async def test_the_sandbox_shows_nothing_through_them_and_holds_no_descriptor(
    ws: str, hidden_home: str
) -> None:
    pol = _linked_workspace(ws, hidden_home)
    script = "cat .idea/secret .vscode/secret .bashrc .git/config; ls /proc/self/fd; true"
    res = await run_capture(pol, ["sh", "-c", script])
    assert res.rc == 0, res.err
    assert SECRET not in res.out, res.out
    # 0, 1, 2 and ls's own directory: none of the descriptors bwrap was handed.
    assert sorted(res.out.split()[-4:]) == ["0", "1", "2", "3"], res.out


def test_a_view_that_is_no_overlay_or_over_no_root_fails_the_start(ws: str) -> None:
    root, other = _fd(ws), _fd(ws)
    try:
        with pytest.raises(SandboxUnavailable, match="not an overlay"):
            check(
                [Mount("bind", ws, Role.GRANT, fd=root), Mount("bind", ws, Role.VIEW, fd=other)],
                covered=["/tmp"],
                secrets=[],
            )
    finally:
        os.close(root)
        os.close(other)
