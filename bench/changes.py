"""What knowing a Bash call's changes costs on a 100,000-file workspace: the Bash tool with
the change tracker (agentd/changes/) against the same tool without it, interleaved in
one run, and the candidates that were not chosen, measured on the same tree.

    .venv/bin/python bench/changes.py [--files N] [--rounds N] [--flood N] [--flood-rounds N]

Rows:
- a call (`true`, and one that writes a file) without tracking, then with it (fanotify
  events read by the run's reader; the baseline refreshed by stat);
- the same with `changes_tracking = "scan"` (the fallback: a walk per call);
- a call that writes `--flood` new files (a build's output, 100,000 by default) without
  tracking, then with it: what a flood of ordinary events costs the call;
- the one-time cost: the first call's walk that builds the root's baseline, and its
  memory;
- the candidates, per call: a metadata snapshot (lstat of every path), the code-bearing
  walk alone, `git status` on the tree committed (git's stat cache), and what the
  kernel allows here for an overlay upper dir.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import resource
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _common import percentile, workspace

from agentd.changes import fanotify, walk
from agentd.changes.service import ChangeTracker
from agentd.permissions.asker import Asker
from agentd.sandboxing import codebearing
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store
from agentd.tools.base import ToolContext
from agentd.tools.bash.tool import BashTool
from tests.support.services import FORKSERVER, config_under, make_services

UID = 65534


def make_tree(root: str, files: int) -> None:
    """`files` files, 100 per directory, 10 directories per parent, and a repository."""
    per_dir = 100
    for i in range(files // per_dir):
        d = os.path.join(root, f"d{i // 10}", f"s{i % 10}")
        os.makedirs(d, exist_ok=True)
        for j in range(per_dir):
            with open(os.path.join(d, f"f{j}.txt"), "w") as f:
                f.write("x\n")
    subprocess.run(["git", "init", "-q", root], check=True)
    subprocess.run(["chown", "-R", f"{UID}:{UID}", root], check=True)


class Untracked(ChangeTracker):
    """The baseline row: the same Bash tool, its calls followed by no tracker."""

    async def begin(self, session: Session, identity: object) -> None:  # type: ignore[override]
        return None


class Harness:
    """The Bash tool called as the executor would, with or without a tracker."""

    def __init__(self, ws: str, state: str, tracking: str) -> None:
        self.config = config_under(
            Path(state) / tracking, changes_tracking=tracking if tracking != "none" else "auto"
        )
        os.makedirs(self.config.state_dir, mode=0o700, exist_ok=True)
        self.store = Store(os.path.join(self.config.state_dir, "a.db"))
        self.services = make_services(self.config, self.store)
        if tracking == "none":
            asker = Asker(SessionManager(self.store, self.config), 60)
            self.services.commands.changes = Untracked(self.config, asker)
        self.session = Session(id=f"s-{tracking}", workspace_roots=[ws], cwd=ws)

    @property
    def tracker(self) -> ChangeTracker:
        return self.services.commands.changes

    async def call(self, command: str) -> None:
        async def progress(**kw: object) -> None:
            pass

        ctx = ToolContext(
            session=self.session,
            tool_use_id="toolu_bench",
            state_dir=self.config.state_dir,
            progress=progress,
            services=self.services,
        )
        ctx.sandbox = SandboxMode.NORMAL
        result = await BashTool().call({"command": command}, ctx)
        text = result.text_content()
        assert not result.is_error and "held" not in text, text


def overlay_probe() -> str:
    """What this kernel allows for an overlay upper dir the daemon could read events
    from: a filesystem mark with file handles on an overlay."""
    base = tempfile.mkdtemp(prefix="agentd-ovl-")
    parts = {n: os.path.join(base, n) for n in ("lower", "upper", "work", "merged")}
    for p in parts.values():
        os.mkdir(p)
    opts = f"lowerdir={parts['lower']},upperdir={parts['upper']},workdir={parts['work']}"
    out = []
    try:
        for extra in ("", ",index=on,nfs_export=on"):
            if subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts + extra,
                               parts["merged"]], capture_output=True).returncode != 0:  # fmt: skip
                out.append(f"mount{extra or ''}: refused")
                continue
            group = fanotify.open_group()
            fd = os.open(parts["merged"], os.O_PATH | os.O_DIRECTORY)
            try:
                fanotify.mark_filesystem(group, fd)
                verdict = "ok"
            except OSError as exc:
                verdict = os.strerror(exc.errno or 0)
            finally:
                os.close(fd)
                os.close(group)
            xattrs = os.listxattr(parts["upper"])
            out.append(f"overlay{extra or ' (default)'}: FID mark {verdict}, upper xattrs {xattrs}")
            subprocess.run(["umount", parts["merged"]], check=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return "; ".join(out)


def flood_command(files: int, into: str) -> str:
    """A build's output: `files` new files, 1,000 per directory, under `into`."""
    script = (
        "import os, sys\n"
        "n, into = int(sys.argv[1]), sys.argv[2]\n"
        "for i in range(n):\n"
        "    d = os.path.join(into, str(i // 1000))\n"
        "    if i % 1000 == 0:\n"
        "        os.makedirs(d)\n"
        "    with open(os.path.join(d, f'o{i}.o'), 'w') as f:\n"
        "        f.write('x')\n"
    )
    return f"python3 -c {shlex.quote(script)} {files} {shlex.quote(into)}"


def timed(fn, rounds: int) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def snapshot(root: str) -> int:
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lstat(os.path.join(dirpath, name))
            n += 1
    return n


async def main_async(args: argparse.Namespace) -> None:
    ws = workspace()
    state = tempfile.mkdtemp(prefix="agentd-bench-changes-")
    try:
        t0 = time.perf_counter()
        make_tree(ws, args.files)
        made = time.perf_counter() - t0
        count = sum(len(f) for _, _, f in os.walk(ws))
        print(f"workspace {ws}: {count} files (made in {made:.1f}s)")
        harnesses = {name: Harness(ws, state, name) for name in ("none", "events", "scan")}
        tracker = harnesses["events"].tracker
        assert tracker.mode == "events", "needs root"

        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        await harnesses["events"].call("true")  # builds the baseline: one walk
        first = (time.perf_counter() - t0) * 1000
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        baseline = next(iter(tracker._baselines.values()))
        await harnesses["scan"].call("true")
        for h in harnesses.values():  # warm
            for _ in range(3):
                await h.call("true")

        samples: dict[str, list[float]] = {}
        for i in range(args.rounds):
            for name, h in harnesses.items():
                for label, command in (("true", "true"), ("writes a file", f"echo {i} > out.txt")):
                    key = f"{label:14} {name}"
                    t = time.perf_counter()
                    await h.call(command)
                    samples.setdefault(key, []).append((time.perf_counter() - t) * 1000)

        flood: dict[str, list[float]] = {}
        for i in range(args.flood_rounds):
            for name in ("none", "events"):
                into = os.path.join(ws, "build", f"{name}-{i}")
                t = time.perf_counter()
                await harnesses[name].call(flood_command(args.flood, into))
                flood.setdefault(name, []).append((time.perf_counter() - t) * 1000)
                shutil.rmtree(into)

        table = codebearing.table()
        alt = {
            "metadata snapshot (lstat all)": timed(lambda: snapshot(ws), 5),
            "code-bearing walk (scan mode)": timed(lambda: walk.scan(ws, table), 5),
        }
        subprocess.run(["git", "-c", "safe.directory=*", "-C", ws, "add", "-A"], check=True)
        subprocess.run(
            ["git", "-c", "safe.directory=*", "-c", "user.name=b", "-c", "user.email=b@b",
             "-C", ws, "commit", "-qm", "all"], check=True,
        )  # fmt: skip
        alt["git status (stat cache)"] = timed(
            lambda: subprocess.run(
                ["git", "-c", "safe.directory=*", "-C", ws, "status", "--porcelain"],
                check=True, capture_output=True,
            ),
            5,
        )  # fmt: skip
    finally:
        FORKSERVER.close()
        subprocess.run(["rm", "-rf", ws, state], check=False)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"{args.rounds} interleaved rounds; load {load}")
    print(f"{'per call':40} {'p50 ms':>8} {'p90 ms':>8} {'vs none':>8}")
    for label in ("true", "writes a file"):
        base = percentile(samples[f"{label:14} none"], 50)
        for name in ("none", "events", "scan"):
            ms = samples[f"{label:14} {name}"]
            p50 = percentile(ms, 50)
            print(f"{label:14} {name:25} {p50:8.1f} {percentile(ms, 90):8.1f} {p50 / base:7.2f}x")
    base = percentile(flood["none"], 50)
    for name in ("none", "events"):
        p50 = percentile(flood[name], 50)
        label = f"writes {args.flood} files"
        print(f"{label:20} {name:19} {p50:8.1f} {max(flood[name]):8.1f} {p50 / base:7.2f}x")
    print(f"  ({args.flood_rounds} interleaved rounds of the flood; second column: max)")
    print(
        f"first call (baseline walk, once per root): {first:.0f} ms; "
        f"baseline: {len(baseline.entries)} files, {baseline.content_bytes} bytes kept; "
        f"peak RSS +{(rss1 - rss0) / 1024:.1f} MiB"
    )
    print("candidates, per call (p50 of 5):")
    for name, ms in alt.items():
        print(f"  {name:38} {percentile(ms, 50):8.1f} ms")
    print(f"  overlay upper dir: {overlay_probe()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--flood", type=int, default=100_000, help="files a flood call writes")
    parser.add_argument("--flood-rounds", type=int, default=3)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    ctypes.CDLL(None)  # fail early where there is no libc (the tracker needs it)
    main()
