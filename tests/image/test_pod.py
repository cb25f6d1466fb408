"""The manifests' pod run by `podman kube play` (tests/image/pod.py makes it from the
StatefulSet kustomize renders): agentd starts in it, agentctl outside calls it through
the socket's volume, its sandbox holds in there, and the journal on the state volume
outlives the pod."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd_client import Client
from agentd_client.core.errors import AgentdError
from tests.image import pod
from tests.support import ctl
from tests.support.ports import free_port
from tests.support.router import available, router
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(600)


class Node:
    """One pod of the StatefulSet, with its claims' volumes (named as a StatefulSet names
    them), deleted and made again as a node would."""

    def __init__(self, where: Path, name: str, tls_name: str = "localhost", slot: int = 0) -> None:
        self.name = name
        self.tls_name = tls_name
        self.tls_port = free_port() if tls_name != "localhost" else 0
        self.where = where
        self.tls = where / "tls"
        self.run = where / "run"
        # As an emptyDir is: anyone may write its root; agentd makes its socket's
        # directory 0700 below it.
        self.run.mkdir(mode=0o777)
        self.run.chmod(0o777)
        agentd = str(Path(ctl.AGENTCTL).parent / "agentd")
        subprocess.run(
            [agentd, "tls", "init", "--dir", str(self.tls), "--name", tls_name],
            check=True,
            capture_output=True,
        )
        # The laptop's copies of the CA and token (the pod's are given to its root below).
        self.laptop = where / "laptop"
        self.laptop.mkdir()
        for f in ("ca.pem", "token"):
            (self.laptop / f).write_bytes((self.tls / f).read_bytes())
            (self.laptop / f).chmod(0o600)
        # The pod's ids on the host (pod.play): a range of its own per test run and pod.
        self.ids = 3_000_000_000 + ((os.getpid() % 4000) * 3 + slot) * 65536
        # The secret's files as a kubelet gives them: the pod's root's, mode 0400.
        self.tls.chmod(0o755)
        for f in self.tls.iterdir():
            f.chmod(0o400)
            os.chown(f, self.ids, self.ids)
        self.socket = str(self.run / "sock" / "agentd.sock")
        self.started = 0.0

    @property
    def container(self) -> str:
        return f"{self.name}-agentd"

    def start(self) -> None:
        self.started = time.monotonic()
        spec = pod.pod_from(pod.statefulset(), self.name, self.tls, self.run, self.tls_port)
        pod.play(spec, self.where, self.ids)
        with self.client() as c:

            def serving() -> bool:
                state = pod.podman("inspect", "--format", "{{.State.Status}}", self.container)
                if state.stdout.strip() == "exited":
                    raise RuntimeError(f"agentd exited in the pod: {self.log()}")
                try:
                    c.status(timeout=5)
                except AgentdError:
                    return False
                return True

            wait_until(serving, 240, self.log, interval=0.5)

    def delete(self) -> None:
        pod.down(self.name)

    def client(self) -> Client:
        return Client(self.socket, timeout=60)

    def log(self) -> str:
        return pod.podman("logs", self.container, check=False).stderr[-4000:]

    def volumes(self) -> list[str]:
        return [f"state-{self.name}", f"workspace-{self.name}"]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("pod"), f"agentd-test-{os.getpid()}")
    try:
        n.start()
        yield n
    finally:
        n.delete()
        pod.podman("volume", "rm", "--force", *n.volumes(), check=False)


def _agentctl(node: Node, *args: str) -> Any:
    r = ctl.run("--socket", node.socket, *args, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _bash(node: Node, session: str, command: str) -> dict[str, Any]:
    r = ctl.run(
        "--socket", node.socket, "call", "-s", session, "Bash",
        json.dumps({"command": command}), "--json", timeout=120,
    )  # fmt: skip
    assert r.stdout, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _text(result: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in result.get("content", []))


def test_the_pod_runs_as_the_manifests_say(node: Node) -> None:
    """What podman made of the pod spec: the capabilities, the unconfined profiles and
    the user namespace are the spec's, not podman's defaults."""
    info = pod.inspect(node.container)
    caps = set(info["EffectiveCaps"] or [])
    assert caps == {"CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_KILL"}, caps
    assert "no-new-privileges" in info["HostConfig"]["SecurityOpt"]
    assert info["HostConfig"]["ReadonlyRootfs"] is True
    uid_map = info["HostConfig"]["IDMappings"]["UidMap"]
    assert uid_map and not uid_map[0].startswith("0:0:"), uid_map  # hostUsers: false


def test_a_call_from_agentctl_outside_runs_sandboxed_in_the_pod(node: Node) -> None:
    session = _agentctl(
        node,
        "session",
        "new",
        "--workspace",
        "/workspace",
        "--name",
        "first",
        "--mode",
        "bypassPermissions",
    )
    result = _bash(node, session["id"], "id -u; echo made-in-the-pod > /workspace/a.txt; cat a.txt")
    assert _text(result).split() == ["65534", "made-in-the-pod"], result
    first_call = time.monotonic() - node.started
    print(f"pod start to first call served: {first_call:.1f} s")


def test_the_sandbox_holds_inside_the_pod(node: Node) -> None:
    """The sandbox's own report, then the probes: what a sandboxed command must not
    reach in there (the daemon's state and secrets, the daemon's processes, new user
    namespaces, the network)."""
    check = pod.podman("exec", node.container, "agentd-sandbox", "check", check=False)
    assert check.stdout.startswith("{"), (check.stdout, check.stderr)
    in_force = json.loads(check.stdout)["in_force"]
    for what in ("user_namespace", "uid_drop", "no_capabilities", "seccomp", "no_new_privs"):
        assert in_force[what] is True, (what, in_force)
    assert in_force["disable_userns"] is True
    session = _agentctl(
        node,
        "session",
        "new",
        "--workspace",
        "/workspace",
        "--network",
        "off",
        "--mode",
        "bypassPermissions",
    )
    probes = {
        "cat /var/lib/agentd/state/agentd.db": "denied",
        "cat /etc/agentd/tls/token": "denied",
        "ls /proc | grep -c '^[0-9]'": "few",
        "unshare -U true": "denied",
        "cat /proc/self/status | grep ^CapEff": "nocaps",
        "echo x > /etc/probe": "denied",
        "getent hosts localhost >/dev/null; exec 3<>/dev/tcp/10.88.0.1/53": "denied",
    }
    for command, expect in probes.items():
        result = _bash(node, session["id"], command)
        text = _text(result)
        if expect == "denied":
            assert result.get("is_error") or "Exit code" in text, (command, text)
        elif expect == "few":
            assert int(text.split()[-1]) < 10, (command, text)
        elif expect == "nocaps":
            assert text.split()[-1] == "0000000000000000", (command, text)


def test_the_change_tracker_says_how_it_follows_calls(node: Node) -> None:
    """fanotify's filesystem marks need CAP_SYS_ADMIN in the node's user namespace, which
    a pod of its own user namespace never has: the daemon says it walks instead, and
    why."""
    log = node.log()
    assert "what calls change is" in log, log
    if "followed by fanotify events" not in log:
        assert "found by a walk at their start and end: " in log, log


def test_the_journal_outlives_the_pod(node: Node) -> None:
    """Deleted (SIGTERM, as a node drains it) and made again on the same claims: the
    sessions are there, and a task the stop ended says it ended."""
    with node.client() as c:
        sid = c.create_session(
            "/workspace", name="outlives", permission_mode="bypassPermissions"
        ).id
        r = c.run_tool(sid, "Bash", {"command": "sleep 1000", "run_in_background": True})
        task_id = r.data["backgroundTaskId"]
        assert next(t for t in c.list_tasks(sid) if t.id == task_id).status == "running"
    node.delete()
    assert pod.podman("volume", "exists", f"state-{node.name}", check=False).returncode == 0
    node.start()
    with node.client() as c:
        names = {s.name for s in c.list_sessions()}
        assert "outlives" in names, names
        task = next(t for t in c.list_tasks(sid) if t.id == task_id)
        assert task.status != "running", task
        assert task.status in {"killed", "failed", "interrupted"}, task
    with node.client() as c:
        assert (
            c.run_tool(sid, "Bash", {"command": "cat /workspace/a.txt"}).text.strip()
            == "made-in-the-pod"
        )


def test_two_workspaces_route_by_name_through_one_entry_point(
    node: Node, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two pods, each its own workspace, certificate and token, behind the shipped router
    (deploy/router/nginx.conf) on one port: each context, differing from the other by its
    server name, lands in its own pod; a name no route lists lands nowhere."""
    if not available():
        pytest.fail("nginx is not unpacked: `make nginx` (make test-image runs it)")
    names = {"web": "web.agentd.test", "api": "api.agentd.test"}
    base = tmp_path_factory.mktemp("routed")
    for key in names:
        (base / key).mkdir()
    nodes = {
        k: Node(base / k, f"{node.name}-{k}", v, slot)
        for slot, (k, v) in enumerate(names.items(), start=1)
    }
    try:
        for key, n in nodes.items():
            n.start()
            sid = _agentctl(n, "session", "new", "--workspace", "/workspace", "--name", key,
                            "--mode", "bypassPermissions")["id"]  # fmt: skip
            _bash(n, sid, f"echo the {key} pod > /workspace/which.txt")
        routes = {names[k]: f"127.0.0.1:{n.tls_port}" for k, n in nodes.items()}
        with router(base / "router", routes) as address:
            env = {"AGENTD_CLIENT_CONFIG": str(base / "client.toml")}
            for key, n in nodes.items():
                added = ctl.run(
                    "context", "add", key, "--address", address, "--server-name", names[key],
                    "--ca", str(n.laptop / "ca.pem"), "--token-file", str(n.laptop / "token"),
                    env=env,
                )  # fmt: skip
                assert added.returncode == 0, added.stderr
            for key in nodes:
                read = ctl.run(
                    "--context", key, "call", "-s", key, "Read",
                    '{"file_path": "/workspace/which.txt"}', env=env, timeout=120,
                )  # fmt: skip
                assert read.returncode == 0, read.stderr
                assert read.stdout.startswith(f"1\tthe {key} pod"), read.stdout
            web = nodes["web"].laptop
            unknown = ctl.run(
                "--address", address, "--server-name", "nobody.agentd.test",
                "--ca", str(web / "ca.pem"), "--token-file", str(web / "token"), "status",
            )  # fmt: skip
            assert unknown.returncode == 2, unknown.stdout
    finally:
        for n in nodes.values():
            n.delete()
            pod.podman("volume", "rm", "--force", *n.volumes(), check=False)
