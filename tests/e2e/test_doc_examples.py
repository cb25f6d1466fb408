"""The documentation's own examples, run as they are written: the anthropic SDK loop and
tool runner of docs/guides/anthropic-sdk.md (against the fake Messages API), and the
grpcurl call of docs/guides/grpc.md (against a daemon on the
default socket of a login user, under XDG_RUNTIME_DIR). Only the workspace path is
put in for `/src/project`; the rest comes from the environment, as for a reader."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support import data
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.fake_messages import running

# Every page a reader may copy from, the README included.
PAGES = "\n".join(
    p.read_text() for p in [data.ROOT / "README.md", *sorted((data.ROOT / "docs").rglob("*.md"))]
)


def _block(language: str, containing: str) -> str:
    """The one fenced block of `language` in the pages that holds `containing`."""
    blocks = re.findall(rf"```{language}\n(.*?)```", PAGES, re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"{len(found)} {language} blocks hold {containing!r}"
    return found[0]


@pytest.mark.parametrize("example", ["loop", "tool runner"])
def test_the_sdk_examples_run_every_turn(
    daemon: DaemonProcess, workspace: Path, tmp_path: Path, example: str
) -> None:
    loop = _block("python", "claude.messages.create(")
    if example == "loop":
        program = loop
    else:  # it uses what the loop's example set up: the clients, `approve`
        program = loop[: loop.index("with agentd.approver(")] + _block("python", "tool_runner(")
    program = program.replace('"/src/project"', repr(str(workspace)))
    (workspace / "a.txt").write_text("alpha\n")
    # Two turns of tool calls, then the fake model ends.
    script = [
        [{"name": "Read", "input": {"file_path": str(workspace / "a.txt")}}],
        [{"name": "Bash", "input": {"command": "pytest -q; echo ran-$((6*7))"}}],
    ]
    with running(script, tmp_path / "api") as api:
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": api.url,
            "AGENTD_SOCKET": daemon.socket,
        }
        ran = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                             text=True, timeout=180)  # fmt: skip
        results = api.results()
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == "Done.", ran.stdout
    # Both turns ran, the Bash call approved by the example's `approve`.
    assert [r["tool_use_id"] for r in results] == ["toolu_oracle_0001", "toolu_oracle_0002"]
    assert "ran-42" in json.dumps(results[1]["content"]), results


def test_the_grpcurl_example_on_a_login_users_default_socket(
    workspace: Path, tmp_path: Path
) -> None:
    block = _block("sh", "grpcurl -plaintext")
    command = "\n".join(line for line in block.splitlines() if not line.startswith("#"))
    grpcurl = Path(sys.executable).parent / "grpcurl"
    if not grpcurl.exists():
        pytest.skip("grpcurl is not installed (the dev extra installs it on x86-64 Linux)")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    socket = runtime / "agentd" / "agentd.sock"
    daemon = start_daemon(tmp_path / "d", socket=str(socket))
    try:
        (workspace / "README.md").write_text("# agentd\nsecond\nthird\nfourth\n")
        with Client(str(socket)) as c:
            sid = c.create_session(str(workspace)).id
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update({"XDG_RUNTIME_DIR": str(runtime), "S": sid,
                    "PATH": f"{grpcurl.parent}:{env['PATH']}"})  # fmt: skip
        ran = subprocess.run(["bash", "-euc", command], env=env, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    finally:
        daemon.stop()
    assert ran.returncode == 0, ran.stderr
    reply = json.loads(ran.stdout)
    assert reply["content"][0]["text"].startswith("1\t# agentd\n2\tsecond\n3\tthird")
    assert reply["data"]["file"]["numLines"] == 3
