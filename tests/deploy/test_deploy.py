"""The container image and the Kubernetes manifests, checked offline: the manifests
render (tests/deploy/kustomize.py) and validate against Kubernetes' schemas (strict: an
unknown field is an error), agree with the Containerfile and the image's config, and
`agentd health` (what every probe runs) answers as a probe needs. No image is built
here: there is no container runtime on these machines."""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from dockerfile_parse import DockerfileParser

from agentd.foundation.config import Config
from tests.deploy import kustomize
from tests.support import data
from tests.support.daemon import DaemonProcess

ROOT = data.ROOT
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
K8S_VERSION = "1.33.0"  # the oldest with hostUsers on by default, and appArmorProfile


def _by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        out.setdefault(doc["kind"], []).append(doc)
    return out


@pytest.fixture(scope="module")
def overlay() -> list[dict[str, Any]]:
    return kustomize.render(K8S / "overlays" / "example")


@pytest.fixture(scope="module")
def containerfile() -> DockerfileParser:
    parser = DockerfileParser(fileobj=(ROOT / "Containerfile").open("rb"))
    return parser


@pytest.mark.parametrize("where", ["base", "overlays/example"])
def test_manifests_validate_against_the_schemas(where: str) -> None:
    docs = kustomize.render(K8S / where)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_schema_check_can_fail() -> None:
    bad = kustomize.render(K8S / "base")[0]
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_one_daemon_per_workspace(overlay: list[dict[str, Any]]) -> None:
    kinds = _by_kind(overlay)
    (sts,) = kinds["StatefulSet"]
    assert sts["spec"]["replicas"] == 1
    namespace = kinds["Namespace"][0]["metadata"]["name"]
    assert {d["metadata"].get("namespace") for d in overlay if d["kind"] != "Namespace"} == {
        namespace
    }
    claims = {c["metadata"]["name"]: c for c in sts["spec"]["volumeClaimTemplates"]}
    # The overlay's patch changed sizes and kept the base's access modes.
    assert claims["workspace"]["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert claims["state"]["spec"]["accessModes"] == ["ReadWriteOnce"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/agentd:0.1.0"


def test_the_pod_gives_bubblewrap_what_it_needs(overlay: list[dict[str, Any]]) -> None:
    (sts,) = _by_kind(overlay)["StatefulSet"]
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["hostUsers"] is False
    assert pod["securityContext"]["seccompProfile"]["type"] == "Unconfined"
    assert pod["securityContext"]["appArmorProfile"]["type"] == "Unconfined"
    assert container["securityContext"]["procMount"] == "Unmasked"
    # The same capabilities as the systemd unit's bounding set, no more.
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(ROOT / "systemd" / "system" / "agentd.service")
    bounding = {c.removeprefix("CAP_") for c in unit["Service"]["CapabilityBoundingSet"].split()}
    caps = container["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"] and set(caps["add"]) == bounding


def test_probes_config_and_volumes_agree(
    overlay: list[dict[str, Any]], containerfile: DockerfileParser
) -> None:
    kinds = _by_kind(overlay)
    (sts,) = kinds["StatefulSet"]
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = container[probe]["exec"]["command"]
        assert command[:2] == ["agentd", "health"], probe
        # The probe's own timeout ends before Kubernetes gives up on it.
        assert float(command[command.index("--timeout") + 1]) < container[probe]["timeoutSeconds"]
    env = containerfile.envs
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    claims = {c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]}

    def mounted_at(path: str) -> str:
        """The volume holding `path`, which must be a directory below its mount point
        (the daemon makes it 0700: a volume's root may have any mode)."""
        holder = max((m for m in mounts if path.startswith(m + "/")), key=len)
        return mounts[holder]

    assert mounted_at(env["AGENTD_STATE_DIR"]) == "state" and "state" in claims
    assert mounted_at(str(Path(env["AGENTD_SOCKET"]).parent)) == "run"
    assert mounts["/workspace"] == "workspace" and "workspace" in claims
    # No fsGroup: it would open the state volume to the sandbox's group.
    assert "fsGroup" not in pod["securityContext"]
    (init,) = pod["initContainers"]
    assert init["command"] == ["chown", "65534:65534", "/workspace"]
    assert init["image"] == container["image"]
    # The image's config: valid, and its TLS files are the secret's items where mounted.
    config = Config.load(str(DEPLOY / "container" / "config.toml"))
    tls_dir = next(p for p, n in mounts.items() if n == "tls")
    secret = next(v for v in pod["volumes"] if v["name"] == "tls")["secret"]
    items = {f"{tls_dir}/{i['path']}" for i in secret["items"]}
    assert {config.tls_cert, config.tls_key, config.token_file} == items
    # The Service reaches the TCP listener's port, by the container port's name.
    port = int(config.tcp_listen.rpartition(":")[2])
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    service = next(s for s in kinds["Service"] if s["metadata"]["name"] == "agentd")
    (svc_port,) = service["spec"]["ports"]
    assert named[svc_port["targetPort"]] == port == svc_port["port"]
    assert (
        service["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    )
    assert named["metrics"] == int(config.metrics_listen.rpartition(":")[2])


def test_containerfile(containerfile: DockerfileParser) -> None:
    cf = containerfile
    instructions = [i["instruction"] for i in cf.structure if i["instruction"] != "COMMENT"]
    assert instructions[0] == "FROM" and cf.baseimage.startswith("docker.io/library/python:3.11")
    # What the sandbox and the tools need, installed.
    apt = " ".join(i["value"] for i in cf.structure if i["instruction"] == "RUN")
    for package in ("bubblewrap", "util-linux", "libseccomp2", "ripgrep", "git"):
        assert re.search(rf"\b{package}\b", apt), package
    # The client with every extra a shipped command needs (agentctl mcp, agentctl agent),
    # and every command of both distributions on PATH (deploy/README.md runs
    # `agentd-sandbox check` in there).
    extras = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    needed = {name for name, deps in extras.items() if deps}
    installed = re.search(r'pip install [^&]*"\./client\[([a-z,]+)\]" \.', apt)
    assert installed and set(installed.group(1).split(",")) == needed, apt
    scripts = {
        *tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"],
        *tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]["scripts"],
    }
    linked = re.search(r"ln -s ((?:/opt/agentd/venv/bin/\S+\s+(?:\\\s+)?)+)/usr/local/bin/", apt)
    assert linked, apt
    assert {Path(p).name for p in linked.group(1).replace("\\", " ").split()} == scripts
    exec_form = {i["instruction"]: i["value"] for i in cf.structure}
    assert exec_form["ENTRYPOINT"] == '["agentd"]'
    assert exec_form["CMD"] == '["serve"]'
    assert re.search(r'CMD \["agentd", "health"', exec_form["HEALTHCHECK"])
    assert exec_form["EXPOSE"] == "7777"
    assert cf.envs["AGENTD_CONFIG"] == "/etc/agentd/config.toml"
    # Every COPY source is in the repository.
    for value in (i["value"] for i in cf.structure if i["instruction"] == "COPY"):
        source = value.split()[0]
        assert (ROOT / source).exists(), source
    volumes = next(i["value"] for i in cf.structure if i["instruction"] == "VOLUME")
    assert str(Path(cf.envs["AGENTD_STATE_DIR"]).parent) in volumes
    # The build context leaves out the local venv and git data, for podman and docker.
    for ignore in (".containerignore", ".dockerignore"):
        lines = (ROOT / ignore).read_text().splitlines()
        assert ".venv" in lines and ".git" in lines, ignore
        # Nothing the image installs from is left out.
        assert not {"agentd", "client", "sandbox", "deploy", "pyproject.toml"} & set(lines)


def test_agentd_health_answers_as_a_probe_needs(daemon: DaemonProcess, tmp_path: Path) -> None:
    def health(socket: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentd", "health", "--socket", socket, "--timeout", "5"],
            capture_output=True,
            text=True,
            timeout=30,
        )

    up = health(daemon.socket)
    assert up.returncode == 0 and up.stdout.strip() == "SERVING", up
    down = health(str(tmp_path / "none.sock"))
    assert down.returncode == 1 and len(down.stderr.strip().splitlines()) == 1, down
    assert "UNAVAILABLE" in down.stderr


def test_health_and_version_load_nothing_of_the_daemon(daemon: DaemonProcess) -> None:
    """A probe's budget is 3 s on a busy node: `agentd health` and `--version` import only
    what they use (bench/health.py times them against grpcurl)."""
    probe = (
        "import sys\nfrom agentd.__main__ import main\ntry:\n    main(sys.argv[1:])\n"
        "finally:\n    print(*sorted(m for m in sys.modules if m.startswith('agentd')), "
        "file=sys.stderr)"
    )
    for args in (["health", "--socket", daemon.socket], ["--version"]):
        ran = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        loaded = set(ran.stderr.split())
        assert "agentd.__main__" in loaded and loaded <= {
            "agentd",
            "agentd.__main__",
            "agentd.cli",
            "agentd.cli.health",
            "agentd_client",
            "agentd_client.core",
            "agentd_client.core.paths",
        }, (args, loaded)
    # The service name health asks about is the API's, without loading the API to say so.
    from agentd.cli import health
    from agentd_client.v1 import agentd_pb2

    assert agentd_pb2.DESCRIPTOR.services_by_name["Agentd"].full_name == health.SERVICE
