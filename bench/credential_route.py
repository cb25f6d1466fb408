"""What a credential route costs against the same upstream reached directly through the
proxy (a CONNECT tunnel, the token handed to the client), side by side in one run.

    .venv/bin/python bench/credential_route.py [--rounds 5] [--mib 64]

One daemon, one proxied session. The upstream is the tests' TLS server (git
http-backend and static files, the token required), on the host's loopback. Each
round, baseline first: a `git clone` of a repository (--files files) and a curl
download of --mib MiB, once through the route (the daemon adds the token over TLS)
and once through a CONNECT tunnel with the token on the command line (what a sandbox
holding the secret would do). Medians of the rounds, and the ratio route/direct.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from _common import workspace

from agentd_client import Client
from tests.credentials import upstreams
from tests.network import servers
from tests.support.daemon import start_daemon

HOST = "git.test"
TIMED = (
    "a=$(date +%s%N); {cmd} >/dev/null 2>&1 || echo FAILED; "
    'b=$(date +%s%N); echo "T=$(( (b-a)/1000000 ))"'
)


def timed(client: Client, sid: str, command: str) -> int:
    text = client.run_tool(
        sid, "Bash", {"command": TIMED.format(cmd=command), "timeout": 600_000}
    ).text
    assert "FAILED" not in text, text
    return int(text.split("T=")[1].split()[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-creds-"))
    ws = workspace()
    try:
        tls = upstreams.make_tls(base / "tls", [HOST])
        shutil.copy(tls.ca, Path(ws) / "ca.pem")
        os.chmod(Path(ws) / "ca.pem", 0o644)
        token = "ghp_" + os.urandom(12).hex()
        (base / "token").write_text(token)
        (base / "token").chmod(0o600)
        repos = base / "repos"
        repos.mkdir()
        bare = servers.bare_repo(repos, "demo", "BENCH")
        work = repos / "demo-work"
        for i in range(args.files):
            (work / f"f{i}.txt").write_text(f"file {i}\n" * 200)
        env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
        ident = ["-c", "user.name=b", "-c", "user.email=b@b"]
        subprocess.run(["git", "-C", str(work), "add", "."], check=True, env=env)
        subprocess.run(
            ["git", "-C", str(work), *ident, "commit", "-qm", "files"], check=True, env=env
        )
        subprocess.run(
            ["git", "-C", str(work), "push", "-q", str(bare), "main"], check=True, env=env
        )
        (repos / "big.bin").write_bytes(os.urandom(1 << 20) * args.mib)
        basic = base64.b64encode(f"bot:{token}".encode()).decode()
        with (
            upstreams.git_https(repos, tls, f"Basic {basic}", "http://x") as (port, _),
            upstreams.index_https(repos, tls, f"Bearer {token}", "http://x") as (fport, _),
        ):
            (base / "config.toml").write_text(
                f'network_allowed_domains = ["{HOST}"]\nnetwork_allow_private_hosts = ["{HOST}"]\n'
                f'network_resolve = {{ "{HOST}" = ["127.0.0.1"] }}\n'
                f'[[credential_sources]]\nname = "t"\nfile = "{base / "token"}"\n'
                f'[[credential_routes]]\nname = "git"\nkind = "git"\n'
                f'upstream = "https://{HOST}:{port}/"\nsource = "t"\nusername = "bot"\n'
                f'ca_file = "{tls.ca}"\n'
                f'[[credential_routes]]\nname = "files"\nkind = "http"\n'
                f'upstream = "https://{HOST}:{fport}/"\nsource = "t"\nca_file = "{tls.ca}"\n'
            )
            proc = start_daemon(base / "d", ["--config", str(base / "config.toml")])
            try:
                with Client(proc.socket, timeout=600) as client:
                    sid = client.create_session(ws, permission_mode="bypassPermissions").id
                    # Upper case: the same host, but not what the route's insteadOf matches.
                    direct_url = f"https://{HOST.upper()}:{port}/demo.git"
                    direct_git = (
                        f"git -c http.sslCAInfo={ws}/ca.pem "
                        f"-c 'http.extraHeader=Authorization: Basic {basic}' clone -q {direct_url}"
                    )
                    route_git = f"git clone -q https://{HOST}:{port}/demo.git"
                    direct_get = (
                        f"curl -sf --cacert {ws}/ca.pem -H 'Authorization: Bearer {token}' "
                        f"-o /dev/null https://{HOST}:{fport}/big.bin"
                    )
                    route_get = "curl -sf -o /dev/null http://127.0.0.1:3130/files/big.bin"
                    figures: dict[str, list[int]] = {k: [] for k in ("dg", "rg", "dd", "rd")}
                    for r in range(args.rounds + 1):
                        got = {
                            "dg": timed(client, sid, f"rm -rf /tmp/c && {direct_git} /tmp/c"),
                            "rg": timed(client, sid, f"rm -rf /tmp/c && {route_git} /tmp/c"),
                            "dd": timed(client, sid, direct_get),
                            "rd": timed(client, sid, route_get),
                        }
                        if r:  # the first round warms both paths
                            for k, v in got.items():
                                figures[k].append(v)
            finally:
                proc.stop()
        med = {k: statistics.median(v) for k, v in figures.items()}
        mib_s = {k: args.mib / (med[k] / 1000) for k in ("dd", "rd")}
        print(f"git clone ({args.files} files), median of {args.rounds} (ms):")
        print(f"  direct (CONNECT, token in the sandbox): {med['dg']:.0f}")
        ratio = med["rg"] / med["dg"]
        print(f"  through the route:                      {med['rg']:.0f}  ({ratio:.2f}x)")
        print(f"download of {args.mib} MiB, median (MiB/s):")
        print(f"  direct (CONNECT, token in the sandbox): {mib_s['dd']:.0f}")
        ratio = mib_s["rd"] / mib_s["dd"]
        print(f"  through the route:                      {mib_s['rd']:.0f}  ({ratio:.2f}x)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
