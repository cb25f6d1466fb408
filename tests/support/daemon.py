"""Start the real daemon as a process on a temp socket and state dir, for tests and benches."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentd.sessions import dirs as session_dirs
from agentd.sessions import tmp_owners
from tests.support.waiting import wait_until

# How long a daemon may take to serve: generous, since a loaded machine (the suite's
# workers, other runs) can take many times an idle one's second.
START_SECONDS = 90.0
LOG_TAIL_LINES = 40


@dataclass
class DaemonProcess:
    socket: str
    state_dir: str
    proc: subprocess.Popen[bytes]
    log_lines: list[str] = field(default_factory=list)
    logged: threading.Condition = field(default_factory=threading.Condition)

    @property
    def log(self) -> str:
        return "".join(self.log_lines)

    def wait_for_log(self, text: str, after: int = 0, timeout: float = 30) -> str:
        """The first log line from index `after` on that contains `text`."""
        with self.logged:
            found = self.logged.wait_for(
                lambda: (
                    any(text in line for line in self.log_lines[after:])
                    or self.proc.poll() is not None
                ),
                timeout,
            )
            for line in self.log_lines[after:]:
                if text in line:
                    return line
        raise TimeoutError(f"no log line with {text!r} (found={found}):\n{self.log}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


# This checkout: a daemon the tests start imports agentd from it (an editable install).
CHECKOUT = Path(__file__).resolve().parents[2]


def runs_from() -> list[str]:
    """Where a daemon or agentctl the tests start runs from, as named and as resolved: the
    interpreter's installation, the venv, this checkout, every directory on the path. A
    test that covers a directory (/tmp, /root) shows these again: the checkout may be
    anywhere (issue #34)."""
    named = [sys.executable, sys.prefix, sys.base_prefix, str(CHECKOUT), os.getcwd(), *sys.path]
    return list(dict.fromkeys([*named, *map(os.path.realpath, named)]))


def top_names_under(directory: str) -> list[str]:
    """The names in `directory` that hold something runs_from() lists."""
    names = set()
    for path in runs_from():
        rel = os.path.relpath(os.path.abspath(path), directory)
        if rel != "." and not rel.startswith(".."):
            names.add(rel.split(os.sep)[0])
    return sorted(names)


# Every owners dir a daemon of this run recorded its sessions' /tmp directories in: the
# run removes those directories at its end (tests/conftest.py), as nothing else will.
OWNERS_DIRS: set[str] = set()


def start_daemon(
    base: Path,
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = START_SECONDS,
    wrapper: list[str] | None = None,
    keep_tasks: bool = False,
    tmp_owners_dir: Path | None = None,
    socket: str | None = None,
    inherit_env: bool = True,
) -> DaemonProcess:
    """A daemon on `base`; unless `keep_tasks`, its stop (SIGTERM) stops the background
    tasks too, so no test leaves a task's shim running (tasks outlive a daemon).

    It records whose its sessions' /tmp directories are in `tmp_owners_dir` (default
    `base`/owners), never in the machine's: another daemon of the same uid (a person's,
    another test run's) must not sweep them, nor this one theirs.
    `socket`: elsewhere than base/run; `inherit_env=False`: only `env` (another user's).

    Ready when it logs "agentd serving" and its socket is there, within `timeout` (a
    loaded machine takes long); else it is killed and the error shows its log's tail."""
    base.mkdir(parents=True, exist_ok=True)
    socket = socket or str(base / "run" / "agentd.sock")
    state_dir = str(base / "state")
    owners = str(tmp_owners_dir or base / "owners")
    OWNERS_DIRS.add(owners)
    proc_env = {**(os.environ if inherit_env else {}), **(env or {})}
    proc_env.pop("AGENTD_SOCKET", None)
    proc_env.pop("AGENTD_STATE_DIR", None)
    proc = subprocess.Popen(
        [
            *(wrapper or []),
            sys.executable,
            "-m",
            "agentd",
            "serve",
            "--socket",
            socket,
            "--state-dir",
            state_dir,
            "--tmp-owners-dir",
            owners,
            *([] if keep_tasks else ["--stop-tasks-on-exit"]),
            *(extra_args or []),
        ],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=proc_env,
    )
    # A `--socket` among `extra_args` comes last on the command line, so it is the one served.
    args = extra_args or []
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--socket":
            socket = value
        elif flag == "--state-dir":
            state_dir = value
    daemon = DaemonProcess(socket, state_dir, proc)
    ready = threading.Event()
    serving: list[bool] = []

    def drain() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            with daemon.logged:
                daemon.log_lines.append(line)
                daemon.logged.notify_all()
            if "agentd serving" in line:
                serving.append(True)
                ready.set()
        ready.set()  # the daemon exited; stop waiting
        with daemon.logged:
            daemon.logged.notify_all()

    threading.Thread(target=drain, daemon=True).start()
    started = time.monotonic()
    # Its stderr may end before it can be seen to exit: serving is what it said.
    served = ready.wait(timeout) and bool(serving) and proc.poll() is None
    if served and not socket.startswith("@"):
        left = max(1.0, timeout - (time.monotonic() - started))
        try:
            wait_until(lambda: os.path.exists(socket), left, "the daemon's socket")
        except TimeoutError:
            served = False
    if not served:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5 if not serving else 0)  # one that said why it stops is exiting
        code = proc.poll()
        daemon.stop(signal.SIGKILL)
        how = f"exited with {code}" if code is not None else f"not serving after {timeout:.0f} s"
        raise RuntimeError(f"agentd did not start ({how}); its log's tail:\n{log_tail(daemon)}")
    return daemon


def log_tail(daemon: DaemonProcess, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines the daemon logged."""
    with daemon.logged:
        return "".join(daemon.log_lines[-lines:])


def remove_recorded_dirs(owners: str) -> None:
    """Remove the /tmp directories of every session recorded in `owners`, by the sweep a
    daemon runs for one gone for good: for a run's end, when its daemons have stopped."""
    state_dirs = set()
    for record in Path(owners).glob("*"):
        try:
            state_dirs.add(json.loads(record.read_text())["state_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for state_dir in state_dirs:
        tmp_owners.sweep(owners, state_dir, lambda _: False, math.inf, remove_unknown=True)
        session_dirs.of(state_dir).remove_base()
