"""Prometheus metrics on a local port, and the headline numbers of `agentctl status`."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentd_client import Client, ToolResult
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.ports import free_port
from tests.support.waiting import wait_for_event


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, str]]:
    port = free_port()
    daemon = start_daemon(
        tmp_path_factory.mktemp("metered"), extra_args=["--metrics-listen", f"127.0.0.1:{port}"]
    )
    yield daemon, f"http://127.0.0.1:{port}/metrics"
    assert daemon.stop() == 0, daemon.log
    assert "Traceback" not in daemon.log, daemon.log


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_counters_move_with_tool_calls(metered: tuple[DaemonProcess, str], workspace: Path) -> None:
    daemon, url = metered
    (workspace / "a.txt").write_text("hello\n")
    before = scrape(url)
    with Client(daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        opened = scrape(url)
        assert value(opened, "agentd_open_sessions") == value(before, "agentd_open_sessions") + 1
        ok = c.run_tool(sid, "Read", {"file_path": str(workspace / "a.txt")})
        bad = c.run_tool(sid, "Read", {"file_path": str(workspace / "missing.txt")})
        bash = c.run_tool(sid, "Bash", {"command": "echo hi"})
        assert (ok.is_error, bad.is_error, bash.is_error) == (False, True, False)
        status = c.status()
    after = scrape(url)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("agentd_tool_calls_total", tool="Read", outcome="ok") == 1
    assert moved("agentd_tool_calls_total", tool="Read", outcome="error") == 1
    assert moved("agentd_tool_calls_total", tool="Bash", outcome="ok") == 1
    assert moved("agentd_tool_call_seconds_count", tool="Read") == 2
    assert moved("agentd_tool_call_seconds_sum", tool="Bash") > 0
    assert moved("agentd_sandbox_start_seconds_count") == 1
    assert moved("agentd_permission_decisions_total", behavior="allow") == 3
    assert value(after, "agentd_running_calls") == 0
    # agentctl status's number is the same count.
    served = sum(v for (n, _), v in after.items() if n == "agentd_tool_calls_total")
    assert status.calls_served == served


def test_the_process_and_the_build_are_described(metered: tuple[DaemonProcess, str]) -> None:
    """The series every Prometheus client exports for its process, and which build runs."""
    import grpc

    daemon, url = metered
    got = scrape(url)
    values = {name: v for (name, _), v in got.items()}
    assert values["process_resident_memory_bytes"] > 0
    assert values["process_open_fds"] > 0 and values["process_cpu_seconds_total"] > 0
    with open(f"/proc/{daemon.proc.pid}/stat") as f:  # its own start, not the scraper's
        ticks = int(f.read().rpartition(")")[2].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    started = boot + ticks / os.sysconf("SC_CLK_TCK")
    assert abs(values["process_start_time_seconds"] - started) < 2
    build = [dict(labels) for (name, labels), v in got.items() if name == "agentd_build_info"]
    assert len(build) == 1 and build[0]["version"] == "0.1.0"
    assert build[0]["grpcio"] == grpc.__version__
    assert values["agentd_build_info"] == 1
    assert any(name == "python_info" for name, _ in got)


def test_unknown_tool_names_do_not_grow_the_metrics(
    metered: tuple[DaemonProcess, str], workspace: Path
) -> None:
    """Label values come from the registry: a client inventing tool names cannot make
    the daemon keep a new series for each one."""
    daemon, url = metered
    names = [f"NoSuchTool{i}" for i in range(50)]
    with Client(daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        for name in names:
            assert c.run_tool(sid, name, {}).is_error
        # An alias counts under its tool's own name.
        results = [c.run_tool(sid, "KillShell", {"shell_id": "no-such-task"})]
    text = httpx.get(url, timeout=10).text
    assert not any(name in text for name in names)
    samples = scrape(url)
    assert value(samples, "agentd_tool_calls_total", tool="unknown", outcome="error") >= 50
    assert results[0].is_error
    assert value(samples, "agentd_tool_calls_total", tool="TaskStop", outcome="error") == 1
    assert "KillShell" not in text


def test_pending_asks_and_decisions_and_agentctl_status(
    metered: tuple[DaemonProcess, str], workspace: Path
) -> None:
    daemon, url = metered
    with Client(daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace)).id  # default mode: Bash npm asks
        results: list[ToolResult] = []
        stream = c.attach(sid)  # someone is listening, so the engine asks
        assert stream.wait_attached()
        call = threading.Thread(
            target=lambda: results.append(c.run_tool(sid, "Bash", {"command": "npm install"}))
        )
        call.start()
        try:
            asked = wait_for_event(c, sid, lambda e: e.HasField("permission_requested"))
            samples = scrape(url)
            assert value(samples, "agentd_pending_permission_asks") == 1
            assert value(samples, "agentd_running_calls") == 1
            out = agentctl(daemon.socket, "status")
            assert "asks pending: 1" in out and "calls running: 1" in out, out
            c.resolve_permission(sid, asked.permission_requested.request_id, "deny")
            call.join(60)
        finally:
            stream.cancel()
    assert results and results[0].is_error
    samples = scrape(url)
    assert value(samples, "agentd_pending_permission_asks") == 0
    assert (
        value(samples, "agentd_permission_asks_answered_total", decision="deny", by="person") == 1
    )
    assert value(samples, "agentd_permission_decisions_total", behavior="deny") >= 1
    out = agentctl(daemon.socket, "status")
    assert "asks pending: 0" in out and "calls served: " in out, out


def agentctl(socket: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agentd_client.cli.main", "--socket", socket, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_metrics_are_off_by_default(daemon: DaemonProcess) -> None:
    assert "metrics on" not in daemon.log


@pytest.mark.parametrize("listen", ["9464", "localhost:", "127.0.0.1:99999", ":9464"])
def test_a_bad_metrics_address_is_one_line(tmp_path: Path, listen: str) -> None:
    done = run_agentd(tmp_path, "--metrics-listen", listen)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "setting metrics_listen" in done.stderr and "host:port" in done.stderr


def test_a_taken_metrics_port_is_one_line_and_leaves_no_socket(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_agentd(tmp_path, "--metrics-listen", f"127.0.0.1:{port}")
    assert done.returncode == 2
    assert f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "agentd.sock").exists()


def run_agentd(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "agentd",
            "serve",
            "--socket",
            str(base / "run" / "agentd.sock"),
            "--state-dir",
            str(base / "state"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
