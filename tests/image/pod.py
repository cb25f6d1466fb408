"""The manifests' pod, run by podman: the StatefulSet's pod template (as kustomize
renders it) made into the Pod that `podman kube play` runs, and podman with the
settings in containers.conf beside this file.

What a node would give the pod and podman cannot is replaced, and only that: each
volume claim becomes a podman volume named for the claim and the pod (as a
StatefulSet's claims are named), the TLS secret a host directory, and the socket's
emptyDir a host directory too, so agentctl outside the pod reaches the daemon; the TLS
port, when asked, is published on the host's loopback (what a Service gives a router)."""

from __future__ import annotations

import atexit
import copy
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests.deploy import kustomize
from tests.support import data

HERE = Path(__file__).resolve().parent
BASE = data.ROOT / "deploy" / "kubernetes" / "base"
IMAGE = os.environ.get("AGENTD_IMAGE", "localhost/agentd:latest")
# The StatefulSet's volume claims: their volumes outlive a pod.
CLAIMS = {"state", "workspace"}


def _conf() -> str:
    """containers.conf with the runtime wrapper's absolute path (podman needs one)."""
    text = (HERE / "containers.conf").read_text()
    text = text.replace('"tests/image/runc-procmount"', json.dumps(str(HERE / "runc-procmount")))
    fd, path = tempfile.mkstemp(prefix="agentd-image-tests-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    atexit.register(os.unlink, path)
    return path


CONF = _conf()


def podman(
    *args: str, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """podman with the tests' containers.conf, its output as text."""
    env = {**os.environ, "CONTAINERS_CONF": CONF}
    done = subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done


def image_exists() -> bool:
    try:
        return podman("image", "exists", IMAGE, check=False, timeout=60).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False


def statefulset() -> dict[str, Any]:
    (sts,) = [d for d in kustomize.render(BASE) if d["kind"] == "StatefulSet"]
    return sts


def pod_from(
    sts: dict[str, Any], name: str, tls: Path, run: Path, tls_port: int = 0
) -> dict[str, Any]:
    """The Pod the StatefulSet would make as `name`, for podman; `tls_port`: the host's
    loopback port its TLS listener is published on (none: 0)."""
    template = copy.deepcopy(sts["spec"]["template"])
    spec = template["spec"]
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        container["image"] = IMAGE
        container["imagePullPolicy"] = "Never"
        # podman 4.3 publishes a port with no hostPort on the host's same port (a kubelet
        # publishes none): only the TLS port, and only where asked.
        ports = [p for p in container.get("ports", []) if tls_port and p["name"] == "grpc-tls"]
        for port in ports:
            port.update(hostPort=tls_port, hostIP="127.0.0.1")
        container.pop("ports", None)
        if ports:
            container["ports"] = ports
    volumes = []
    for volume in spec["volumes"]:
        if "secret" in volume:
            volume = {"name": volume["name"], "hostPath": {"path": str(tls), "type": "Directory"}}
        elif volume["name"] == "run":
            volume = {"name": "run", "hostPath": {"path": str(run), "type": "Directory"}}
        elif "emptyDir" in volume:
            # podman 4.3 makes an emptyDir a volume named as the pod spec's, which every
            # pod would share: one of this pod's own, removed with it (down).
            claim = {"claimName": f"{volume['name']}-{name}"}
            volume = {"name": volume["name"], "persistentVolumeClaim": claim}
        volumes.append(volume)
    for claim in sts["spec"]["volumeClaimTemplates"]:
        claim_name = f"{claim['metadata']['name']}-{name}"
        volumes.append(
            {"name": claim["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim_name}}
        )
    spec["volumes"] = volumes
    spec["restartPolicy"] = "Never"
    # What podman 4.3 reads only from annotations: the pod's seccomp profile, and (for
    # runc-procmount) the containers whose /proc is unmasked, by their command lines.
    annotations = {}
    if spec.get("securityContext", {}).get("seccompProfile", {}).get("type") == "Unconfined":
        annotations["seccomp.security.alpha.kubernetes.io/pod"] = "unconfined"
    unmasked = [
        _command_line(c)
        for c in spec["containers"]
        if c.get("securityContext", {}).get("procMount") == "Unmasked"
    ]
    annotations["io.agentd.tests/proc-unmasked"] = json.dumps(unmasked)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": template["metadata"].get("labels", {}),
            "annotations": annotations,
        },
        "spec": spec,
    }


def _command_line(container: dict[str, Any]) -> list[str]:
    """What the container runs: its command, or the image's entrypoint, then its args."""
    (info,) = json.loads(podman("image", "inspect", container["image"]).stdout)
    command = container.get("command") or info["Config"].get("Entrypoint") or []
    args = container.get("args", [] if "command" in container else info["Config"].get("Cmd"))
    return [*command, *(args or [])]


def play(pod: dict[str, Any], where: Path, ids: int) -> subprocess.CompletedProcess[str]:
    """`podman kube play` of `pod`; its user namespace (hostUsers: false) maps the pod's
    ids 0-65535 to `ids` and up, as a kubelet gives a pod 65536 ids of its own."""
    path = where / f"{pod['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    flags = []
    if pod["spec"].get("hostUsers") is False:
        # podman 4.3 reads no hostUsers; a fixed range (within the "containers" ids of
        # /etc/subuid) lets the host give the secret's files to the pod's root first.
        flags.append(f"--userns=auto:size=65536,uidmapping=0:{ids}:65536,gidmapping=0:{ids}:65536")
    before = _volumes()
    try:
        return podman("kube", "play", *flags, str(path))
    finally:
        # podman removes an init container once it ran, and with it what tells which
        # anonymous volumes (the image's VOLUME lines) were its own: the new ones.
        _anonymous.setdefault(pod["metadata"]["name"], set()).update(
            v for v in _volumes() - before if len(v) == 64
        )


_anonymous: dict[str, set[str]] = {}


def _volumes() -> set[str]:
    return set(podman("volume", "ls", "-q").stdout.split())


def down(name: str) -> None:
    """The pod and its containers gone, with the anonymous volumes that podman made for
    the image's VOLUME lines (a kubelet makes none) and its emptyDir's; the claims'
    volumes stay."""
    gone = _anonymous.pop(name, set())
    for cid in podman("ps", "-a", "-q", "--filter", f"pod={name}", check=False).stdout.split():
        for mount in inspect(cid)["Mounts"]:
            volume = mount.get("Name", "")
            claim = volume.removesuffix(f"-{name}") in CLAIMS
            if (
                mount["Type"] == "volume"
                and (len(volume) == 64 or volume.endswith(name))
                and not claim
            ):
                gone.add(volume)
    for _ in range(3):  # a pod still starting may refuse its removal once
        podman("pod", "rm", "--force", "--time", "20", name, check=False)
        if podman("pod", "exists", name, check=False).returncode != 0:
            break
    if gone:
        podman("volume", "rm", "--force", *sorted(gone), check=False)


def inspect(container: str) -> dict[str, Any]:
    (out,) = json.loads(podman("container", "inspect", container).stdout)
    return out
