"""`make test-clones`: a slice of the suite run from fresh clones of this checkout, in the
places people clone to, so that nothing of the daemon or of the tests depends on where
the checkout lives (issue #34):

- under /tmp, which some tests replace with a tmpfs of their own (what they run must
  stay reachable);
- in a directory only its owner may enter (0700, as /root and many homes are): the
  sandbox identity must never need to reach into the checkout, its venv or the Python
  that venv points at.

Each clone gets a venv of its own at .venv, as `make` makes it, with agentd and
agentd-client installed editable from the clone; every other package comes from this
checkout's venv (one .pth line naming its site-packages): no index, a few seconds.
The clone is of HEAD, with the working tree's changes carried over (tracked files as
`git diff HEAD`, untracked ones copied), so what is tested is what is checked out here.

    python scripts/test_clones.py [--keep] [PYTEST_ARGS...]

Exit status 0 when the slice passed in every clone. A failed clone is kept (its path is
printed); `--keep` keeps them all.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Bash through the real daemon (every call a sandbox), a sandbox test with its own
# policies, and the test that mounts a tmpfs over /tmp under a daemon it starts.
SLICE = [
    "tests/tools/test_bash.py",
    "tests/tools/test_bash_start.py",
    "tests/sandbox/test_sandbox_endpoints.py",
    "tests/security/test_mounts_sessions.py",
]


def _git(*args: str, cwd: Path = REPO, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=data, check=True, stdout=subprocess.PIPE
    ).stdout


def places() -> list[tuple[str, Path]]:
    """(what, a fresh directory to clone into): one under /tmp that anyone may pass
    (0755), one only its owner may enter (0700) in the user's cache, in their home."""
    open_dir = Path(tempfile.mkdtemp(prefix="agentd-clone-", dir="/tmp"))
    open_dir.chmod(0o755)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentd"
    cache.mkdir(parents=True, exist_ok=True)
    private_dir = Path(tempfile.mkdtemp(prefix="clone-", dir=cache))
    private_dir.chmod(0o700)
    return [("under /tmp (0755)", open_dir), ("in a 0700 directory", private_dir)]


def clone(into: Path) -> Path:
    """A clone of HEAD at `into`/agentd with this working tree's changes on top."""
    repo = into / "agentd"
    _git("clone", "--quiet", "--no-hardlinks", str(REPO), str(repo))
    diff = _git("diff", "HEAD", "--binary")
    if diff:
        _git("apply", "--whitespace=nowarn", "-", cwd=repo, data=diff)
    untracked = _git("ls-files", "--others", "--exclude-standard", "-z").split(b"\0")
    for name in filter(None, (os.fsdecode(n) for n in untracked)):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, repo / name, follow_symlinks=False)
    return repo


def make_venv(repo: Path) -> Path:
    """repo/.venv: agentd and agentd-client editable from `repo`, the rest from ours."""
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    # A path line only: our site-packages' own .pth files (the editable installs of this
    # checkout) are not read, so agentd is the clone's.
    Path(site, "_agentd_outer_venv.pth").write_text("".join(f"{p}\n" for p in ours))
    install = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    install += ["--no-build-isolation", "-e", "./client", "-e", "."]
    out = subprocess.run(install, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if out.returncode != 0:
        sys.stdout.write(out.stdout.decode(errors="replace"))
        raise SystemExit(f"cannot install the clone at {repo} into its venv")
    return python


def run_slice(repo: Path, python: Path, pytest_args: list[str]) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{python.parent}:{env.get('PATH', '/usr/bin:/bin')}"
    argv = [str(python), "-m", "pytest", "-q", "-n", "auto", "--dist", "loadfile"]
    return subprocess.run([*argv, *pytest_args, *SLICE], cwd=repo, env=env).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep every clone")
    args, pytest_args = parser.parse_known_args()
    failed: list[str] = []
    for what, directory in places():
        started = time.monotonic()
        print(f"== a clone {what}: {directory}", flush=True)
        code = 1
        try:
            repo = clone(directory)
            code = run_slice(repo, make_venv(repo), pytest_args)
        finally:
            took = time.monotonic() - started
            print(f"== {what}: {'passed' if code == 0 else 'FAILED'} ({took:.0f} s)", flush=True)
            if code != 0:
                failed.append(f"{what} ({directory}, kept)")
            if code == 0 and not args.keep:
                shutil.rmtree(directory, ignore_errors=True)
    if failed:
        print("the slice failed from a clone " + "; ".join(failed))
        return 1
    print("the slice passed from every clone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
