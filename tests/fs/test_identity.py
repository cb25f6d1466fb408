"""agentd/fs/identity.py: a thread acts as a session's identity for one operation (its
file-system ids and groups, on that thread only), and gets its own back after."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.fs import identity
from agentd.fs.identity import FsIdentity, IdentityError, acting_as, call_as
from agentd_sandbox import linux

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching identities needs root")
NOBODY = FsIdentity(65534, 65534, (65534,))


def _in_thread(fn):  # type: ignore[no-untyped-def]
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(fn()))
    thread.start()
    thread.join()
    return box[0]


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory anyone may write, on a path anyone may walk (not pytest's 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="agentd-identity-", dir="/var/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_files_are_touched_with_the_identitys_rights(shared: Path) -> None:
    tmp_path = shared
    private = tmp_path / "root-only"
    private.write_text("secret")
    private.chmod(0o600)

    def work() -> tuple[object, ...]:
        with acting_as(NOBODY):
            ids = (linux.fsuid(), linux.fsgid(), os.getgroups(), identity.current_identity())
            try:
                private.read_text()
                read = "read"
            except PermissionError:
                read = "refused"
            made = tmp_path / "made"
            made.write_text("x")
        return (*ids, read, os.stat(made).st_uid, linux.fsuid(), identity.current_identity())

    uid, gid, groups, during, read, owner, after, after_identity = _in_thread(work)
    assert (uid, gid, groups, during) == (65534, 65534, [65534], NOBODY)
    assert read == "refused" and owner == 65534
    assert (after, after_identity) == (0, None)
    assert linux.fsuid() == 0  # the test's own thread never changed


def test_none_is_the_daemon_and_one_identity_at_a_time() -> None:
    def work() -> str:
        with acting_as(None):
            assert linux.fsuid() == 0
        with acting_as(NOBODY), acting_as(NOBODY):  # the same again: nothing to do
            try:
                with acting_as(FsIdentity(4242, 4242)):
                    return "switched"
            except IdentityError:
                return "refused"

    assert _in_thread(work) == "refused"


def test_call_as_runs_a_function_as_the_identity() -> None:
    assert _in_thread(lambda: call_as(NOBODY, linux.fsuid)) == 65534
