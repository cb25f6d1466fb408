"""`python -I -m agentd.tools.formats.worker JOB UID GID AS_BYTES CPU_SECONDS [PARAMS…]`

One decoding job on the bytes read from stdin (isolated.py starts it): writes a JSON
line (the answer, or `error`) and the bytes that go with it.

    image MEDIA_TYPE        the image fitted to the API's limits (decoding.fit_image)
    pdf FIRST LAST MAX      the PDF's page count, and with FIRST > 0 a PDF of pages
                            FIRST..LAST (decoding.pdf_pages)

It is started as the daemon (a root daemon's Python may live where the sandbox identity
cannot reach), imports everything it will need, then becomes the session's sandbox
identity (no supplementary groups), forbids itself new privileges, limits its address
space, CPU time, file size and open files, and only then reads the hostile bytes.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

from agentd.tools.formats import decoding
from agentd_sandbox import linux


def _drop(uid: int, gid: int, address_space: int, cpu_seconds: int) -> None:
    if os.getuid() == 0 and uid != 0:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    linux.set_no_new_privs()
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))


def _job(job: str, params: list[str], data: bytes) -> tuple[dict[str, Any], bytes]:
    if job == "image":
        fitted = decoding.fit_image(data, params[0])
        return {"media_type": fitted.media_type, "dimensions": fitted.dimensions}, fitted.data
    if job == "pdf":
        first, last, whole_max = (int(p) for p in params)
        count, part = decoding.pdf_pages(data, first, last, whole_max)
        return {"pages": count, "part": part is not None}, part or b""
    raise ValueError(f"unknown job {job}")


def main(argv: list[str]) -> int:
    job, uid, gid, address_space, cpu_seconds, *params = argv
    # Pillow and pypdf import parts on first use: now, while the daemon's Python (perhaps
    # under /root) can still be read.
    decoding.warm_up(job)
    _drop(int(uid), int(gid), int(address_space), int(cpu_seconds))
    data = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    try:
        answer, body = _job(job, params, data)
    except MemoryError:
        out.write(json.dumps({"error": "it needs more memory than a decode may use"}).encode())
        return 0
    except Exception as exc:  # the parsers raise many types on hostile bytes
        reason = str(exc).strip().splitlines()
        out.write(json.dumps({"error": reason[0] if reason else type(exc).__name__}).encode())
        return 0
    out.write(json.dumps(answer).encode() + b"\n" + body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
