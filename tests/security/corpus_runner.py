"""Run corpus commands in the sandbox as the Bash tool would, enforced or not.

Shared by the differential test (tests/security/test_enforce_corpus.py) and the
enforced-versus-unenforced report (bench/enforce_corpus.py). The policy is built by the
same calls the Bash tool makes (`sandbox_policy.policy_for` and `readonly.enforce`), so what
runs here is what a read-only verdict runs in the daemon.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path

from agentd.bashsec import classify_uncached
from agentd.foundation.config import Config
from agentd.fs import tmpfs
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing import readonly, runtime
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import Session
from agentd_sandbox import spawn

CORPUS = Path(__file__).parent.parent / "bashsec" / "corpus.toml"
MAX_OUTPUT = 64 * 1024


def read_only_commands() -> list[str]:
    """Every corpus command the classifier (as it is now) calls read-only."""
    cases = tomllib.loads(CORPUS.read_text("utf-8"))["case"]
    return [
        c["command"] for c in cases if "command" in c and classify_uncached(c["command"]).read_only
    ]


# Files the corpus commands name, so most of them do real work.
FILES = {
    "README.md": "# project\nhello world\nTODO: more\n",
    "file.txt": "alpha\nbeta\ngamma\n",
    "log.txt": "line 1\nline 2\n",
    "f": "x,y\n1,2\n",
    "x": "x\n",
    "a": "a\n",
    "b": "b\n",
    "a.txt": "a\n",
    "b.txt": "b\n",
    "data.json": '{"a": 1}\n',
    "package.json": '{"name": "p", "version": "1.0.0", "scripts": {"test": "true"}}\n',
    "Cargo.toml": '[package]\nname = "p"\nversion = "0.1.0"\n',
    "Makefile": "all:\n\t@echo built\n",
    "src/main.py": "def main():\n    print('hi')  # TODO\n",
    "src/lib.rs": "fn main() {}\n",
    "src/app.js": "console.log('x')\n",
}


def populate(ws: Path) -> None:
    for rel, text in FILES.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@dataclass
class Outcome:
    command: str
    code: int
    output: str


class Runner:
    """One session-like sandbox setup over a workspace: run commands enforced or not."""

    def __init__(self, ws: Path, *, read_only: bool, wall_seconds: float = 5) -> None:
        # A state dir of its own: the session's temp dir is recorded there
        # (agentd/sessions/dirs.py), never in the machine's default one.
        self.config = Config(state_dir=tempfile.mkdtemp(prefix="agentd-corpus-", dir="/var/tmp"))
        atexit.register(self._remove)
        self.session = Session(
            id=f"corpus-{uuid.uuid4().hex[:12]}",
            workspace_roots=[str(ws)],
            cwd=str(ws),
            owner_uid=0 if os.geteuid() == 0 else os.getuid(),
        )
        self.read_only = read_only
        self.wall_seconds = wall_seconds
        self.runtime = runtime.bare()
        self.tmp_dir = sandbox_policy.session_tmp_dir(self.session, self.config, self.runtime)

    def _remove(self) -> None:
        dirs = session_dirs.of(self.config.state_dir)
        tmpfs.unmount(self.tmp_dir)
        dirs.remove_session(self.session.id)
        dirs.remove_base()
        shutil.rmtree(self.config.state_dir, ignore_errors=True)

    async def run(self, command: str, *, read_only: bool | None = None) -> Outcome:
        read_only = self.read_only if read_only is None else read_only
        policy = sandbox_policy.policy_for(
            self.session, self.config, self.tmp_dir, self.runtime, read_only=read_only
        )
        policy.limits.wall_seconds = self.wall_seconds
        staged = readonly.Staged()
        if read_only:
            staged = await readonly.enforce(
                policy, self.session, self.config, command, self.runtime.staging
            )
        try:
            proc = await spawn(
                policy,
                ["/bin/bash", "-c", command],
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            assert proc.stdout is not None
            data = b""
            while chunk := await proc.stdout.read(65536):
                data = (data + chunk)[:MAX_OUTPUT]
            code = await proc.wait()
        finally:
            staged.cleanup()
        return Outcome(command, code, data.decode("utf-8", "replace"))

    async def run_all(self, commands: list[str], concurrency: int = 4) -> list[Outcome]:
        gate = asyncio.Semaphore(concurrency)

        async def one(command: str) -> Outcome:
            async with gate:
                return await self.run(command)

        return list(await asyncio.gather(*(one(c) for c in commands)))


def make_repo(ws: Path, uid: int | None) -> None:
    """A plain git repository over FILES: one commit, then README.md changed."""
    import subprocess

    populate(ws)
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "first"]):
        subprocess.run(
            ["git", "-c", "safe.directory=*", *args], cwd=ws, env=env, check=True,
            capture_output=True,
        )  # fmt: skip
    (ws / "README.md").write_text(FILES["README.md"] + "changed\n")
    if uid is not None:
        for dirpath, dirnames, filenames in os.walk(ws):
            for name in [*dirnames, *filenames]:
                os.lchown(os.path.join(dirpath, name), uid, uid)
        os.lchown(ws, uid, uid)
