"""Decoding a workspace's images and PDFs in a worker process, bounded, as the session.

The bytes are hostile, and decoding them is the heaviest work Read does: a 16383-pixel
square image takes a gigabyte, a crafted PDF can keep pypdf's pure-Python parser busy
for seconds (holding the GIL the event loop needs). So the daemon hands them to
`python -I -m agentd.tools.formats.worker` (worker.py): the session's sandbox identity,
no supplementary groups, no new privileges, limits on address space, CPU time, file
size and open files, a wall-clock deadline, and at most WORKERS at once daemon-wide. A
crash or a limit there fails one Read, never the daemon.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

# The worker's whole address space (a 16383-pixel-square RGBA image is 1 GiB).
ADDRESS_SPACE = 3 * 1024**3
CPU_SECONDS = 60
# How long a Read waits for its worker.
DEADLINE_SECONDS = 120
# Workers at once, daemon-wide: each may take gigabytes.
WORKERS = 2
_slots = threading.BoundedSemaphore(WORKERS)


class DecodeError(Exception):
    """The worker could not do the job; the message says why, for the model."""


def run(
    job: str, params: list[str], data: bytes, identity: tuple[int, int] | None
) -> tuple[dict[str, Any], bytes]:
    """Run `job` on `data` in a worker acting as `identity` (uid, gid; None: the daemon's
    own): its JSON answer and the bytes after it. Blocks: call it from a worker thread."""
    uid, gid = identity if identity is not None else (os.getuid(), os.getgid())
    argv = [
        sys.executable,
        "-I",
        "-m",
        "agentd.tools.formats.worker",
        job,
        str(uid),
        str(gid),
        str(ADDRESS_SPACE),
        str(CPU_SECONDS),
        *params,
    ]
    with _slots:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"LC_ALL": "C.UTF-8"},
            cwd="/",
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(data, timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise DecodeError(f"it took longer than {DEADLINE_SECONDS} s") from None
    head, _, body = out.partition(b"\n")
    try:
        meta = json.loads(head)
    except ValueError:
        meta = None
    if proc.returncode != 0 or not isinstance(meta, dict):
        lines = err.decode(errors="replace").strip().splitlines()
        raise DecodeError(lines[-1] if lines else _exit_reason(proc.returncode))
    if "error" in meta:
        raise DecodeError(str(meta["error"]))
    return meta, body


def _exit_reason(code: int) -> str:
    if code < 0:
        return f"the decoder was stopped by signal {-code}, past its memory or time limit"
    return f"the decoder exited with status {code}"
