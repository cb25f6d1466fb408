"""agentctl loads only what a command uses: its parser names each command as a
"module:function" imported when it runs, so `--version` and `--help` load no gRPC,
protobuf or SDK, and `status` loads no SDK (bench/agentctl_start.py times them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.daemon import DaemonProcess

# Runs agentctl's main in this process, then lists what it imported.
_PROBE = (
    "import sys\nfrom agentd_client.cli.main import main\ntry:\n    main(sys.argv[1:])\n"
    "except SystemExit:\n    pass\n"
    "finally:\n    print(*sorted(sys.modules), file=sys.stderr)"
)
HEAVY = ("grpc", "google.protobuf", "anthropic", "mcp", "httpx", "asyncio", "agentd_client.v1")
SDKS = ("anthropic", "mcp", "httpx", "shtab", "agentd_client.integrations.agent")


# What a command that only prints text loads nothing of: a terminal's width tables, a
# config parser when there is no config, the JSON rendering of messages.
NOT_FOR_TEXT = (
    "wcwidth", "tomllib", "google.protobuf.json_format", "shtab", "uuid", "tempfile", "hashlib"
)  # fmt: skip


def _loaded(
    *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    ran = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=60, env=env
    )
    return ran, set(ran.stderr.split())


def _of(loaded: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == r or m.startswith(f"{r}.") for r in roots))


def test_version_and_help_import_no_grpc() -> None:
    for args in (["--version"], ["--help"], ["exec", "--help"], ["context", "ls", "--json"]):
        ran, loaded = _loaded(*args)
        assert "agentd_client.cli.main" in loaded, ran.stderr
        assert not _of(loaded, HEAVY), (args, _of(loaded, HEAVY))
    ran, loaded = _loaded("--version")
    assert not _of(loaded, (*NOT_FOR_TEXT, "argparse", "agentd_client.cli.tree")), ran.stderr


def test_version_still_printed() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "agentd_client.cli.main", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0 and ran.stdout.startswith("agentctl "), ran


def test_help_lists_every_command() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "agentd_client.cli.main", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    for word in ("status", "session", "call", "agent", "mcp", "trust", "credentials", "exec"):
        assert f"    {word} " in ran.stdout, (word, ran.stdout)
    for word in ("attach-task", "forward", "ports", "completion"):
        assert f"    {word}" in ran.stdout, (word, ran.stdout)


def test_status_loads_no_sdk(daemon: DaemonProcess, tmp_path: Path) -> None:
    env = {**os.environ, "AGENTD_CLIENT_CONFIG": str(tmp_path / "none.toml")}
    ran, loaded = _loaded("--socket", daemon.socket, "status", env=env)
    assert "agentd_client.cli.commands.sessions" in loaded, ran.stderr
    assert not _of(loaded, SDKS), _of(loaded, SDKS)
    assert not _of(loaded, NOT_FOR_TEXT), _of(loaded, NOT_FOR_TEXT)
    others = _of(loaded, ("agentd_client.cli.commands",))
    assert set(others) <= {
        "agentd_client.cli.commands",
        "agentd_client.cli.commands.contexts",
        "agentd_client.cli.commands.sessions",
    }, others


def test_a_call_loads_no_sdk_nor_a_screen(
    daemon: DaemonProcess, session_id: str, tmp_path: Path
) -> None:
    env = {**os.environ, "AGENTD_CLIENT_CONFIG": str(tmp_path / "none.toml")}
    session = session_id
    ran, loaded = _loaded(
        "--socket", daemon.socket, "call", "-s", session, "Read", '{"file_path": "nothing"}',
        env=env,
    )  # fmt: skip
    assert "agentd_client.cli.commands.calls" in loaded, ran.stderr
    assert not _of(loaded, (*SDKS, *NOT_FOR_TEXT)), _of(loaded, (*SDKS, *NOT_FOR_TEXT))


def test_an_unreachable_daemon_is_still_one_line(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "agentd_client.cli.main", "--socket", str(tmp_path / "no.sock"),
         "status"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert ran.returncode == 2, ran
    assert ran.stderr.startswith("agentctl: cannot reach agentd at unix:"), ran.stderr
