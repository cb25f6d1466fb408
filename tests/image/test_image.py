"""The image `make image` built (deploy/image/build.sh) has the Containerfile's layout:
the same environment, volumes, port, entrypoint and stop signal, the venv and commands
where the Containerfile puts them, the same config; and the labels and locks that say
what it was built from."""

from __future__ import annotations

import json
import re
import signal
import tomllib
from typing import Any

import pytest
from dockerfile_parse import DockerfileParser

from tests.image import pod
from tests.support import data

ROOT = data.ROOT


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    (info,) = json.loads(pod.podman("image", "inspect", pod.IMAGE).stdout)
    out: dict[str, Any] = info["Config"]
    out["Labels"] = info.get("Labels") or out.get("Labels") or {}
    return out


def _instruction(parser: DockerfileParser, name: str) -> list[str]:
    return [i["value"] for i in parser.structure if i["instruction"] == name]


def test_the_image_has_the_containerfiles_settings(config: dict[str, Any]) -> None:
    parser = DockerfileParser(fileobj=(ROOT / "Containerfile").open("rb"))
    env = dict(e.split("=", 1) for e in config["Env"])
    for key, value in parser.envs.items():
        if key.startswith("AGENTD_"):
            assert env[key] == value, key
    assert json.loads(_instruction(parser, "ENTRYPOINT")[0]) == config["Entrypoint"]
    assert json.loads(_instruction(parser, "CMD")[0]) == config["Cmd"]
    assert set(json.loads(_instruction(parser, "VOLUME")[0])) == set(config["Volumes"])
    assert {f"{p}/tcp" for p in _instruction(parser, "EXPOSE")} == set(config["ExposedPorts"])
    (stop,) = _instruction(parser, "STOPSIGNAL")
    assert signal.Signals[stop].value == int(config["StopSignal"])  # podman keeps a number
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert config["Labels"]["org.opencontainers.image.version"] == version
    assert re.fullmatch(
        r"[0-9a-f]{40}|unknown", config["Labels"]["org.opencontainers.image.revision"]
    )
    assert config["Labels"]["org.opencontainers.image.source"]


def test_the_image_has_the_containerfiles_files() -> None:
    """Where the Containerfile puts things, and what both install: the venv with agentd
    and the client's extras, the three commands on PATH, the config, the workspace the
    sandbox identity's, the packages the sandbox and the tools need."""
    script = (
        "set -e; for c in agentd agentctl agentd-sandbox; do readlink /usr/local/bin/$c; done;"
        " stat -c '%u:%g %a' /workspace; cat /etc/agentd/config.toml;"
        " /opt/agentd/venv/bin/python -c 'import anthropic, mcp, agentd, agentd_client';"
        " for t in bwrap rg git setpriv prlimit unshare; do command -v $t; done; agentd --version"
    )
    out = pod.podman(
        "run", "--rm", "--network=none", "--entrypoint", "sh", pod.IMAGE, "-c", script
    ).stdout
    lines = out.splitlines()
    assert lines[:3] == [
        f"/opt/agentd/venv/bin/{c}" for c in ("agentd", "agentctl", "agentd-sandbox")
    ]
    assert lines[3] == "65534:65534 755"
    assert (ROOT / "deploy" / "container" / "config.toml").read_text() in out
    for tool in ("bwrap", "rg", "git", "setpriv", "prlimit", "unshare"):
        assert any(line.endswith(f"/{tool}") for line in lines), (tool, out)


def test_the_locks_name_what_the_image_holds() -> None:
    """Every Debian package and Python distribution in the image is named, with its
    version, by the lock files it carries in /etc/agentd; the Python ones are those
    requirements.lock pins (the build installs them as constraints). Debian's are
    packages.lock's unless the mirror moved on since (build.sh says so)."""
    out = pod.podman(
        "run", "--rm", "--network=none", "--entrypoint", "sh", pod.IMAGE, "-c",
        "dpkg-query -W -f '${Package}=${Version}\\n'; echo ---;"
        " /opt/agentd/venv/bin/pip freeze --all --exclude agentd --exclude agentd-client;"
        " echo ---; cat /etc/agentd/packages.lock; echo ---; cat /etc/agentd/requirements.lock",
    ).stdout  # fmt: skip
    debs, wheels, debs_lock, wheels_lock = out.split("---\n")

    def pinned(text: str) -> set[str]:
        return {ln.lower() for ln in text.splitlines() if ln and not ln.startswith("#")}

    assert pinned(debs) == pinned(debs_lock)
    assert pinned(wheels) == pinned(wheels_lock)
    repo_lock = (ROOT / "deploy" / "image" / "requirements.lock").read_text()
    assert pinned(wheels) == pinned(repo_lock)
