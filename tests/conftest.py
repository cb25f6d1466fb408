"""A real daemon on a temp socket, and the real client talking to it."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import (
    OWNERS_DIRS,
    DaemonProcess,
    log_tail,
    remove_recorded_dirs,
    start_daemon,
)
from tests.support.mounts import detach_under, private_namespace
from tests.support.workspaces import reachable_workspace

# The uid a root daemon runs sandboxed commands as when the workspace belongs to it.
SANDBOX_UID = 65534

# A shell starts a background job (`make test &`) with SIGINT ignored, and every process
# the tests start would inherit that: agentctl, as any program should, then keeps it
# ignored, and the tests of Ctrl-C would wait for nothing. The tests' children get the
# default, however the run was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A parallel run's workers each mount in a namespace of their own (see private_namespace).
if os.environ.get("PYTEST_XDIST_WORKER") and threading.current_thread() is threading.main_thread():
    private_namespace()


@pytest.fixture(scope="session", autouse=True)
def _sessions_dirs_removed_at_the_end(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The run's daemons each record their sessions' /tmp directories in an owners dir
    of their own (tests/support/daemon.py), which no other daemon sweeps: the run
    removes those directories itself once every daemon has stopped, and takes down
    what killed daemons left mounted in its temp dirs (tests/support/mounts.py)."""
    yield
    for owners in sorted(OWNERS_DIRS):
        remove_recorded_dirs(owners)
    base = tmp_path_factory.getbasetemp()
    # This run's, and those of earlier runs pytest could not remove for them (garbage-*).
    for root in [base, *base.parent.glob("garbage-*")]:
        detach_under(str(root))


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = start_daemon(tmp_path_factory.mktemp("agentd"))
    yield proc
    code = proc.stop()
    assert code == 0, f"agentd exited with {code}; its log's tail:\n{log_tail(proc)}"
    at = proc.log.find("Traceback")
    assert at < 0, f"agentd logged a traceback:\n{proc.log[max(0, at - 300) : at + 3000]}"


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[Client]:
    with Client(daemon.socket, timeout=60) as c:
        yield c


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A workspace the sandbox user can reach: under /tmp, 0755, owned by that user.

    pytest's own tmp_path sits in a 0700 directory of root's, which the unprivileged
    uid a root daemon runs commands as could not enter.
    """
    root = reachable_workspace()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def session_id(client: Client, workspace: Path) -> str:
    """A session whose tool calls are not held up by permission prompts."""
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id
