"""What a checkpoint per writing call costs, on a large workspace: the same Bash call
through a daemon that keeps checkpoints and one that does not (`checkpoints = false`),
interleaved in one run; beside a shadow-git checkpoint of the same change (`git add -A`
and `git write-tree` on a git dir of its own, as Cline, Gemini CLI and OpenCode do);
and the restore of a call that changed 100 files.

    .venv/bin/python bench/checkpoints.py [--files N] [--rounds N]

Rows (p50 and p90, ms):
- the first writing call, without and with (with: the capture of untracked files);
- a call changing 3 files, without checkpoints, then with them (the ratio and the
  difference: the goal is <= 20 ms over the call without);
- a read-only call (`ls`), without and with (the goal: no difference);
- the shadow-git checkpoint of the same 3-file change (its first run, then later ones);
- RestoreCheckpoint of a call that changed 100 files (the goal: <= 200 ms);
- the store's size against the distinct bytes the calls changed (the goal: <= 1.1x).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _common import SANDBOX_UID, percentile, workspace

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon


def make_tree(root: str, files: int) -> None:
    """`files` small files, 100 per directory, owned by the sandbox's uid."""
    for i in range(files // 100):
        d = os.path.join(root, f"d{i // 10}", f"s{i % 10}")
        os.makedirs(d, exist_ok=True)
        for j in range(100):
            with open(os.path.join(d, f"f{j}.txt"), "w") as f:
                f.write(f"{i} {j}\n")
    subprocess.run(["chown", "-R", f"{SANDBOX_UID}:{SANDBOX_UID}", root], check=True)


def start(base: Path, checkpoints: bool) -> DaemonProcess:
    base.mkdir(parents=True)
    config = base / "agentd.toml"
    config.write_text(f"checkpoints = {'true' if checkpoints else 'false'}\n")
    return start_daemon(base, ["--config", str(config)])


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def row(label: str, samples: list[float]) -> str:
    return f"{label:44} p50 {percentile(samples, 50):8.1f}  p90 {percentile(samples, 90):8.1f}"


def store_bytes(base: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(base / "state" / "checkpoints"):
        total += sum(os.lstat(os.path.join(dirpath, n)).st_size for n in names)
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-ckpt-"))
    ws_on, ws_off = workspace(), workspace()
    daemons: list[DaemonProcess] = []
    try:
        t0 = time.perf_counter()
        for ws in (ws_on, ws_off):
            make_tree(ws, args.files)
        print(f"two workspaces of {args.files} files (made in {time.perf_counter() - t0:.1f}s)")
        on, off = start(base / "on", True), start(base / "off", False)
        daemons += [on, off]
        c_on, c_off = Client(on.socket, timeout=300), Client(off.socket, timeout=300)
        s_on = c_on.create_session(ws_on, permission_mode="bypassPermissions").id
        s_off = c_off.create_session(ws_off, permission_mode="bypassPermissions").id
        samples: dict[str, list[float]] = {}
        first_call = {}
        for name, c, s in (("without", c_off, s_off), ("with", c_on, s_on)):
            # The baselines' first walk, and with checkpoints the capture (a walk and
            # the copy of untracked files within its budget): once per root.
            command = {"command": "echo 0 > first.txt"}
            first_call[name] = timed(lambda c=c, s=s, k=command: c.run_tool(s, "Bash", k))
        for name, ms in first_call.items():
            print(f"{'first writing call, ' + name + ' checkpoints':44} {ms:12.1f}")
        for i in range(args.rounds):
            three = f"for f in d0/s0/f1.txt d0/s1/f2.txt d1/s2/f3.txt; do echo {i} >> $f; done"
            for name, c, s in (("without", c_off, s_off), ("with", c_on, s_on)):
                key = f"3 files changed, {name} checkpoints"
                samples.setdefault(key, []).append(
                    timed(lambda c=c, s=s, t=three: c.run_tool(s, "Bash", {"command": t}))
                )
                key = f"read-only (ls), {name} checkpoints"
                samples.setdefault(key, []).append(
                    timed(lambda c=c, s=s: c.run_tool(s, "Bash", {"command": "ls > /dev/null"}))
                )
        for key, values in samples.items():
            print(row(key, values))
        a = percentile(samples["3 files changed, with checkpoints"], 50)
        b = percentile(samples["3 files changed, without checkpoints"], 50)
        print(f"{'  checkpoint cost per 3-file call':44} p50 {a - b:+8.1f} ms ({a / b:.2f}x)")

        shadow = tempfile.mkdtemp(prefix="agentd-bench-shadow-")
        git = ["git", f"--git-dir={shadow}", f"--work-tree={ws_off}", "-c", "safe.directory=*"]
        subprocess.run([*git, "init", "-q"], check=True, capture_output=True)
        first = timed(lambda: subprocess.run([*git, "add", "-A"], check=True))
        later = []
        for i in range(min(args.rounds, 10)):
            subprocess.run(["sh", "-c", f"cd {ws_off} && echo {i} >> d0/s0/f1.txt"], check=True)
            later.append(timed(lambda: subprocess.run([*git, "add", "-A"], check=True)))
            subprocess.run([*git, "write-tree"], check=True, capture_output=True)
        print(f"{'shadow git: first checkpoint (add -A)':44} {first:12.1f}")
        print(row("shadow git: later checkpoints (1 file)", later))
        shutil.rmtree(shadow, ignore_errors=True)

        hundred = "for i in $(seq 100); do echo changed >> d1/s$((i % 10))/f$i.txt; done"
        restores = []
        for i in range(5):
            call = f"hundred-{i}"
            c_on.run_tool(s_on, "Bash", {"command": hundred.replace("f$i", "f$((i - 1))")}, call)
            restores.append(timed(lambda call=call: c_on.restore_checkpoint(s_on, call)))
        print(row("RestoreCheckpoint of 100 files", restores))
        distinct: dict[str, int] = {}
        for x in c_on.list_checkpoints(s_on):
            for f in c_on.diff_checkpoint(s_on, x.tool_use_id, fmt="names").files:
                for image in (f.before, f.after):
                    if image.sha256:
                        distinct[image.sha256] = image.size
        stored = store_bytes(base / "on")
        ratio = stored / max(1, sum(distinct.values()))
        print(
            f"store: {stored} bytes on disk for {len(distinct)} distinct contents of "
            f"{sum(distinct.values())} bytes ({ratio:.2f}x; small files pay a file each)"
        )
        c_on.close()
        c_off.close()
    finally:
        for d in daemons:
            d.stop()
        for p in (ws_on, ws_off, str(base)):
            shutil.rmtree(p, ignore_errors=True)


if __name__ == "__main__":
    main()
