"""What operators use: --version, JSON logs, SIGHUP reload."""

from __future__ import annotations

import importlib.metadata
import json
import signal
import subprocess
import sys
from pathlib import Path

import agentd
from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60)


def test_version_of_both_commands(daemon: DaemonProcess) -> None:
    installed = importlib.metadata.version("agentd")
    assert installed == agentd.__version__
    assert run("agentd", "--version").stdout.strip() == f"agentd {installed}"
    assert run("agentd_client.cli.main", "--version").stdout.strip() == f"agentctl {installed}"
    with Client(daemon.socket) as c:
        assert c.status().version == installed


def test_json_logs_are_one_object_per_line(tmp_path: Path, workspace: Path) -> None:
    daemon = start_daemon(tmp_path / "d", extra_args=["--log-format", "json"])
    with Client(daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace)).id
        c.close_session(sid)
    assert daemon.stop() == 0
    entries = [json.loads(line) for line in daemon.log_lines]  # every line parses
    assert len(entries) >= 3
    for entry in entries:
        assert set(entry) >= {"time", "level", "logger", "message"}
    assert any(e["message"].startswith("agentd serving on unix:") for e in entries)
    assert any(e["message"] == "agentd shutting down" for e in entries)


def test_bad_log_settings_are_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    for text, expect in [
        ('log_format = "xml"', "setting log_format in"),
        ("log_format = 1", "setting log_format in"),
        ('log_level = "LOUD"', "setting log_level in"),
        ("log_level = 10", "setting log_level in"),
        ("metrics_listen = 9464", "setting metrics_listen in"),
    ]:
        config.write_text(text + "\n")
        done = run("agentd", "serve", "--config", str(config), "--socket", str(tmp_path / "s"))
        assert done.returncode == 2
        assert done.stderr.strip().startswith(f"agentd: {expect}"), done.stderr
        assert "expected" in done.stderr, done.stderr
        assert done.stderr.strip().count("\n") == 0, done.stderr


def test_sighup_reloads_rules_and_keeps_the_old_config_when_the_new_one_is_bad(
    tmp_path: Path, workspace: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("deny_rules = []\n")
    secret = workspace / "secret.txt"
    secret.write_text("s3cret\n")
    daemon = start_daemon(tmp_path / "d", extra_args=["--config", str(config)])

    def reload(expect: str) -> str:
        mark = len(daemon.log_lines)
        daemon.proc.send_signal(signal.SIGHUP)
        return daemon.wait_for_log(expect, after=mark)

    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="acceptEdits").id
            assert not c.run_tool(sid, "Read", {"file_path": str(secret)}).is_error

            config.write_text(f'deny_rules = ["Read(/{secret})"]\n')  # "//": absolute
            line = reload("reloaded:")
            assert "reloaded: deny_rules" in line and "restart" not in line
            denied = c.run_tool(sid, "Read", {"file_path": str(secret)})
            assert denied.is_error and "s3cret" not in denied.text

            for bad, why in [
                ("deny_rules = [", "cannot read config file"),
                ('deny_rules = ["Read("]', "deny_rules"),
                ("no_such_setting = 1", "unknown settings"),
                ('log_level = "LOUD"', "setting log_level"),
            ]:
                config.write_text(bad + "\n")
                line = reload("reload failed, keeping the running config")
                assert why in line, line
                # one line per reload, and the running rules are still the old ones
                assert "Traceback" not in daemon.log
                still = c.run_tool(sid, "Read", {"file_path": str(secret)})
                assert still.is_error and "s3cret" not in still.text

            config.write_text(
                f'trusted_settings = [{{path = "{workspace}/.claude/settings.json", '
                f'sha256 = "{"0" * 64}"}}]\nlog_level = "DEBUG"\n'
                "task_max_seconds = 10.0\n"
            )
            line = reload("reloaded:")
            assert "reloaded: deny_rules, trusted_settings, log_level" in line, line
            assert "needs a restart to apply: task_max_seconds" in line
            assert not c.run_tool(sid, "Read", {"file_path": str(secret)}).is_error
            assert c.status().pid == daemon.proc.pid  # the same daemon, never restarted
    finally:
        assert daemon.stop() == 0, daemon.log
