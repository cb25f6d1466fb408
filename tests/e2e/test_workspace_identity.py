"""A root daemon refuses a workspace its sandbox identity cannot use, in one line that
says how to fix it, and the fix works: a newcomer's first session as root, on a project
under /root, through the real agentctl on a terminal.

The machine's /root is not touched: the daemon and the newcomer's shell share a mount
namespace of their own whose /root is an empty 0700 directory made here (with what they
run from bound into it: the interpreter's pyenv, the checkout and its venv when they
live under /root), so `chmod o+x /root` changes that directory only.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.core.errors import InvalidRequest
from tests.support.ctl import AGENTCTL, OnPty
from tests.support.daemon import DaemonProcess, start_daemon, top_names_under

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a root daemon's identity drop")


def _private_root(base: Path) -> list[str]:
    """A wrapper that starts the daemon in a mount namespace whose /root is `base/root`."""
    home = base / "root"
    home.mkdir(mode=0o700)
    binds = []
    real_home = Path("/root")
    for name in top_names_under(str(real_home)):  # the interpreter, the checkout, the venv
        if (real_home / name).is_dir():
            (home / name).mkdir()
            binds.append(shlex.join(["mount", "--bind", str(real_home / name), str(home / name)]))
    script = " && ".join([*binds, f"mount --rbind {home} /root", 'exec "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"]


@pytest.fixture
def root_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    d = start_daemon(tmp_path / "d", wrapper=_private_root(tmp_path))
    yield d
    d.stop()


def _shell_in(daemon: DaemonProcess) -> OnPty:
    """A newcomer's bash on a terminal, in the daemon's mount namespace."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(
        AGENTD_SOCKET=daemon.socket,
        PATH=f"{Path(AGENTCTL).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        PS1="newcomer$ ",
        TERM="dumb",
        COLUMNS="400",
        HOME="/root",
    )
    proc = subprocess.Popen(
        ["nsenter", f"--mount=/proc/{daemon.proc.pid}/ns/mnt", "--", "bash", "--norc", "-i"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        start_new_session=True,
        env=env,
    )
    os.close(slave)
    term = OnPty(proc, master)
    term.read_until(b"newcomer$ ")
    return term


def _run(term: OnPty, command: str, timeout: float = 120) -> tuple[str, int]:
    """Type `command` at the prompt; what it printed, and its exit status."""
    start = len(term.seen)
    os.write(term.master, f"{command}; echo rc=$?\n".encode())
    done = re.compile(rb"\r\nrc=(\d+)\r\nnewcomer\$ ")
    deadline = time.monotonic() + timeout
    while not (m := done.search(term.seen, start)):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(term.seen[start:].decode(errors="replace"))
        if select.select([term.master], [], [], left)[0]:
            term.seen += os.read(term.master, 65536)
    out = term.seen[start : m.start()].decode(errors="replace").replace("\r\n", "\n")
    return "\n".join(out.split("\n")[1:]).strip(), int(m.group(1))  # after the echoed line


def test_a_newcomer_s_project_under_root_is_refused_with_a_fix_that_works(
    root_daemon: DaemonProcess,
) -> None:
    term = _shell_in(root_daemon)
    try:
        _, rc = _run(term, "mkdir -p /root/src/project && cd /root/src/project && git init -q")
        assert rc == 0
        out, rc = _run(
            term,
            "agentctl session new --workspace /root/src/project --name web --mode acceptEdits",
        )
        assert rc == 3, out
        (line,) = out.splitlines()  # one line, no traceback
        assert "uid 65534 (nobody)" in line and "sandbox_uid" in line, line
        assert "search (x) on /root (drwx------ root:root)" in line, line
        assert "write on /root/src/project" in line, line
        fix = re.search(r"Fix: (.+?), or ", line)
        assert fix, line
        assert fix.group(1) == "chmod o+x /root && chown -R 65534:65534 /root/src/project"
        # The newcomer types the fix the line gave, then the same command again.
        _, rc = _run(term, fix.group(1))
        assert rc == 0
        out, rc = _run(
            term,
            "agentctl session new --workspace /root/src/project --name web --mode acceptEdits",
        )
        assert rc == 0, out
        out, rc = _run(
            term, """agentctl call -s web Write '{"file_path": "notes.txt", "content": "hi\\n"}'"""
        )
        assert rc == 0, out
        out, rc = _run(term, """agentctl call -s web Bash '{"command": "cat notes.txt; id -u"}'""")
        assert rc == 0 and out.splitlines()[-2:] == ["hi", "65534"], out
        out, rc = _run(term, "stat -c %u /root/src/project/notes.txt")
        assert (rc, out) == (0, "65534")
    finally:
        term.close()


def test_the_check_is_the_identity_s_own_not_the_modes(
    daemon: DaemonProcess, client: Client
) -> None:
    """An ACL that lets the identity in is a way in, where a root stat of the modes would
    say no; without it the parent that stops the identity is named."""
    base = Path(tempfile.mkdtemp(prefix="agentd-acl-", dir="/tmp"))  # 0700, root's
    try:
        ws = base / "ws"
        ws.mkdir()
        os.chown(ws, 65534, 65534)
        with pytest.raises(InvalidRequest) as refused:
            client.create_session(str(ws))
        line = refused.value.details()
        assert f"search (x) on {base} (drwx------ root:root)" in line, line
        assert f"Fix: chmod o+x {base}, or use a workspace outside {base}" in line, line
        _set_acl(base, user=65534, perms=1)  # setfacl -m u:65534:x BASE
        assert base.stat().st_mode & 0o001 == 0  # "others" still may not search it
        sid = client.create_session(str(ws)).id
        client.close_session(sid)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _set_acl(path: Path, *, user: int, perms: int) -> None:
    """setfacl -m u:USER:PERMS without the acl package: the POSIX ACL xattr itself."""
    import struct

    mode = path.stat().st_mode
    undefined = 0xFFFFFFFF
    entries = [
        (0x01, (mode >> 6) & 7, undefined),  # owner
        (0x02, perms, user),
        (0x04, (mode >> 3) & 7, undefined),  # owning group
        (0x10, perms | ((mode >> 3) & 7), undefined),  # mask
        (0x20, mode & 7, undefined),  # others
    ]
    data = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    os.setxattr(path, "system.posix_acl_access", data)
