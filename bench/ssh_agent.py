"""An ssh login through the session's ssh-agent against the same login with the key
file inside the sandbox, side by side in one run.

    .venv/bin/python bench/ssh_agent.py [--logins 30]

One daemon, one proxied session, openssh-server on loopback (git.test for the proxy).
Inside one Bash call, --logins times each in turn: `ssh git.test true` with
  - a key file in the sandbox, no agent (the baseline: what agentd replaces);
  - the agent signing with a key file the daemon holds;
  - the agent passing the signature to the owner's own ssh-agent.
Each login is a new ssh process: key exchange, the session bind, the signature, exit.
What the agent adds is the difference of the medians (goal: under 10 % of a login).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from _common import SANDBOX_UID, percentile, verdict, workspace

from agentd_client import Client
from tests.credentials.ssh_world import owner_agent
from tests.network import servers
from tests.network.support import GIT, proxied_config
from tests.sandbox.conftest import sandbox_dir
from tests.support.daemon import start_daemon

LOGINS = r"""
import json, subprocess, sys, time
n, cases = int(sys.argv[1]), json.loads(sys.argv[2])
out = {name: [] for name in cases}
for _ in range(n):
    for name, cmd in cases.items():
        t0 = time.perf_counter()
        subprocess.run(["sh", "-c", cmd], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        out[name].append((time.perf_counter() - t0) * 1000)
print(json.dumps(out))
"""


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logins", type=int, default=30)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-ssh-"))
    secrets = sandbox_dir("agentd-bench-ssh-keys-")
    ws = Path(workspace())
    try:
        inside = ws / "inside_key"
        pubs = [keygen(inside), keygen(Path(secrets) / "file_key"), keygen(base / "owner_key")]
        for path in (inside, Path(f"{inside}.pub")):
            os.chown(path, SANDBOX_UID, SANDBOX_UID)
        (ws / "file.pub").write_text(pubs[1])
        (ws / "owner.pub").write_text(pubs[2])
        with contextlib.ExitStack() as stack:
            agent = stack.enter_context(owner_agent(secrets))
            subprocess.run(
                ["ssh-add", "-q", str(base / "owner_key")],
                check=True,
                env={**os.environ, "SSH_AUTH_SOCK": agent},
                stderr=subprocess.DEVNULL,
            )
            port = stack.enter_context(servers.sshd(base / "sshd", "".join(pubs)))
            host_pub = (base / "sshd" / "host_ed25519.pub").read_text().split()
            known = base / "known_hosts"
            known.write_text(f"[{GIT}]:{port} {host_pub[0]} {host_pub[1]}\n")
            config = base / "config.toml"
            proxied_config(
                config,
                f'ssh_agent_hosts = ["{GIT}:{port}"]\n'
                f'ssh_agent_key_files = ["{secrets}/file_key"]\n'
                f'ssh_agent_upstream = "{agent}"\nssh_agent_known_hosts = "{known}"\n'
                f'allow_rules = ["SshAgent({GIT}:{port})"]\n',
            )
            proc = start_daemon(base / "d", ["--config", str(config)])
            stack.callback(proc.stop)
            opts = f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -p {port}"
            login = f"root@{GIT} true"
            cases = {
                "key file in the sandbox": f'SSH_AUTH_SOCK= eval "$GIT_SSH_COMMAND {opts} '
                f'-i {ws}/inside_key {login}"',
                "agent, daemon's key file": f'eval "$GIT_SSH_COMMAND {opts} -i {ws}/file.pub '
                f'{login}"',
                "agent, owner's agent": f'eval "$GIT_SSH_COMMAND {opts} -i {ws}/owner.pub {login}"',
            }

            def run(n: int) -> str:
                py = shlex.quote(LOGINS)
                return f"/usr/bin/python3 -c {py} {n} {shlex.quote(json.dumps(cases))}"

            with Client(proc.socket, timeout=900) as c:
                sid = c.create_session(str(ws), permission_mode="bypassPermissions").id
                c.run_tool(sid, "Bash", {"command": run(1)})  # warm: namespace, proxy, agent
                r = c.run_tool(sid, "Bash", {"command": run(args.logins), "timeout": 600_000})
                if r.is_error:
                    raise SystemExit(f"bench command failed: {r.text}")
                times = json.loads(r.text.strip().splitlines()[-1])
        baseline = percentile(times["key file in the sandbox"], 50)
        for name, samples in times.items():
            p50, p99 = percentile(samples, 50), percentile(samples, 99)
            line = f"{name}: p50 {p50:.1f} ms, p99 {p99:.1f} ms"
            if name != "key file in the sandbox":
                added = p50 - baseline
                line += (
                    f"; adds {added:+.1f} ms = {added / baseline:+.0%} of a login "
                    f"(goal < 10%: {verdict(added / baseline < 0.10)})"
                )
            print(line)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(secrets, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
