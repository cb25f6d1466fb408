"""fsidentity: one thread borrows a session's identity; no other thread is touched,
and the thread gets its own back."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.fs.identity import FsIdentity, IdentityError, acting_as, current_identity

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching identity needs root")

NOBODY = FsIdentity(65534, 65534)


def _creds() -> tuple[str, str, str]:
    status = Path("/proc/thread-self/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return fields["Uid"].split()[3], fields["Gid"].split()[3], fields["Groups"].strip()


@pytest.fixture
def root_only(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "root-only"
    path.write_text("secret\n")
    path.chmod(0o600)
    yield path


def test_only_the_acting_thread_loses_root(root_only: Path) -> None:
    inside = threading.Event()
    checked = threading.Event()
    seen: dict[str, object] = {}

    def worker() -> None:
        with acting_as(NOBODY):
            seen["creds"] = _creds()
            try:
                root_only.read_text()
                seen["read"] = True
            except PermissionError:
                seen["read"] = False
            inside.set()
            checked.wait(10)
        seen["after"] = _creds()

    before = _creds()
    thread = threading.Thread(target=worker)
    thread.start()
    assert inside.wait(10)
    # While the worker acts as nobody, this thread is still root.
    assert root_only.read_text() == "secret\n"
    assert _creds() == before
    checked.set()
    thread.join(10)
    assert seen["creds"][:2] == ("65534", "65534") and seen["creds"][2] == ""
    assert seen["read"] is False
    assert seen["after"] == before


def test_identity_is_given_back_after_an_exception(root_only: Path) -> None:
    before = _creds()
    with pytest.raises(PermissionError), acting_as(NOBODY):
        root_only.read_text()
    assert _creds() == before
    assert current_identity() is None
    assert root_only.read_text() == "secret\n"


def test_one_thread_cannot_act_for_two_identities() -> None:
    with acting_as(NOBODY):
        with acting_as(NOBODY):  # the same one again: fine
            assert current_identity() == NOBODY
        with pytest.raises(IdentityError), acting_as(FsIdentity(65533, 65533)):
            pass
        assert current_identity() == NOBODY
    assert current_identity() is None
