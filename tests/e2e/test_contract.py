"""The contract around the daemon: generated code, tool specs, health, reflection, the
thin client's imports, agentctl end to end, and garbage on the socket."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agentd_client import Client
from tests.support import data
from tests.support.daemon import DaemonProcess
from tests.support.data import TOOL_SCHEMAS

ROOT = data.ROOT
AGENTCTL = str(Path(sys.executable).parent / "agentctl")


def test_generated_grpc_code_is_current() -> None:
    r = subprocess.run(
        [sys.executable, "scripts/gen_proto.py", "--check"], cwd=ROOT, capture_output=True
    )
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


def test_list_tools_is_the_anthropic_format(client: Client) -> None:
    tools = client.list_tools()
    assert tools
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names))
    for t in tools:
        assert set(t) == {"name", "description", "input_schema"}
        assert t["description"].strip(), t["name"]
        assert t["input_schema"]["type"] == "object"
    reference = {
        t["name"]: t["input_schema"] for t in json.loads(TOOL_SCHEMAS.read_text())["tools"]
    }
    shared = [t for t in tools if t["name"] in reference]
    # The core tools are all in the reference, with its schemas exactly.
    assert {"Bash", "Read", "Write", "Edit", "Glob", "Grep"} <= {t["name"] for t in shared}
    for t in shared:
        assert t["input_schema"] == reference[t["name"]], t["name"]


def test_health_serving(daemon: DaemonProcess) -> None:
    with grpc.insecure_channel(f"unix:{daemon.socket}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        for service in ("", "agentd.v1.Agentd"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, service


def test_reflection_lists_the_service(daemon: DaemonProcess) -> None:
    with grpc.insecure_channel(f"unix:{daemon.socket}") as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        replies = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
    names = {s.name for r in replies for s in r.list_services_response.service}
    assert "agentd.v1.Agentd" in names
    assert "grpc.health.v1.Health" in names


def _reflect(daemon: DaemonProcess, version: str, request: Any) -> Any:
    """One reflection request over `version`'s method (v1 has v1alpha's wire form)."""
    with grpc.insecure_channel(f"unix:{daemon.socket}") as ch:
        method = ch.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        (reply,) = list(method(iter([request]), timeout=10))
    return reply


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_is_served_as_v1_and_v1alpha(daemon: DaemonProcess, version: str) -> None:
    listed = _reflect(daemon, version, reflection_pb2.ServerReflectionRequest(list_services=""))
    names = {s.name for s in listed.list_services_response.service}
    assert {
        "agentd.v1.Agentd",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    for symbol, file_name, package in (
        ("agentd.v1.Agentd", "agentd/v1/agentd.proto", "agentd.v1"),
        ("grpc.reflection.v1.ServerReflection", "grpc/reflection/v1/reflection.proto",
         "grpc.reflection.v1"),
    ):  # fmt: skip
        request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)
        reply = _reflect(daemon, version, request)
        files = [
            descriptor_pb2.FileDescriptorProto.FromString(raw)
            for raw in reply.file_descriptor_response.file_descriptor_proto
        ]
        found = next(f for f in files if f.name == file_name)
        assert found.package == package, found


def test_thin_client_imports_nothing_of_the_daemon() -> None:
    code = (
        "import agentd_client, agentd_client.cli.main, sys; "
        "bad = [m for m in sys.modules if m == 'agentd' or m.startswith(('agentd.', "
        "'agentd_sandbox'))]; assert not bad, bad"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd="/")
    assert r.returncode == 0, r.stderr.decode()


def _ctl(daemon: DaemonProcess, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [AGENTCTL, "--socket", daemon.socket, *args], capture_output=True, text=True, timeout=60
    )
    if ok:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def test_agentctl_end_to_end(daemon: DaemonProcess, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("hi there\n")
    status = _ctl(daemon, "status")
    assert f"pid {daemon.proc.pid}" in status.stdout

    created = json.loads(
        _ctl(
            daemon, "session", "new", "--workspace", str(workspace), "--mode", "bypassPermissions",
            "--json",
        ).stdout
    )  # fmt: skip
    sid = created["id"]
    assert sid and created["workspace_roots"] == [str(workspace)]
    assert sid in _ctl(daemon, "session", "ls").stdout
    shown = json.loads(_ctl(daemon, "session", "show", sid).stdout)
    assert shown["id"] == sid and shown["permission_mode"] == "bypassPermissions"

    read = _ctl(daemon, "call", "--session", sid, "Read", json.dumps({"file_path": "hello.txt"}))
    assert read.stdout.startswith("1\thi there\n")
    as_json = json.loads(
        _ctl(
            daemon, "call", "--session", sid, "--json", "Read", '{"file_path": "hello.txt"}'
        ).stdout
    )
    assert set(as_json) == {"content", "is_error", "data"}
    assert as_json["is_error"] is False
    assert as_json["content"][0]["type"] == "text"
    assert as_json["content"][0]["text"].startswith("1\thi there")
    failed = _ctl(daemon, "call", "--session", sid, "Read", '{"file_path": "nope"}', ok=False)
    assert failed.returncode == 1 and "does not exist" in failed.stdout

    tools = json.loads(_ctl(daemon, "tools", "--format", "anthropic").stdout)
    assert isinstance(tools, list) and {"name", "description", "input_schema"} <= set(tools[0])
    assert "Read" in _ctl(daemon, "tools").stdout

    bg = _ctl(
        daemon, "call", "--session", sid, "Bash",
        json.dumps({"command": "echo bg-done", "run_in_background": True}),
    )  # fmt: skip
    task_id = bg.stdout.split("with ID: ")[1].split(".")[0]
    tasks = _ctl(daemon, "tasks", "--session", sid)
    assert task_id in tasks.stdout
    listed = json.loads(_ctl(daemon, "tasks", "--session", sid, "--json").stdout)
    assert task_id in [t["id"] for t in listed]

    verdict = json.loads(_ctl(daemon, "classify", "rm -rf x").stdout)
    assert "destructive" in verdict["categories"]
    assert verdict.get("read_only") is False

    assert f"closed {sid}" in _ctl(daemon, "session", "close", "-f", sid).stdout
    assert sid not in _ctl(daemon, "session", "ls").stdout
    assert sid in _ctl(daemon, "session", "ls", "--all").stdout

    missing = _ctl(daemon, "session", "show", "no-such-session", ok=False)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


def test_garbage_on_the_socket_does_not_crash(daemon: DaemonProcess, client: Client) -> None:
    rng = random.Random(1234)
    payloads = [
        os.urandom(4096),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(rng.randrange(256) for _ in range(4096)),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x00" * 65536,
        b"",
    ]
    for payload in payloads:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(daemon.socket)
            try:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                while s.recv(65536):
                    pass
            except OSError:
                pass  # the daemon may hang up on us: that is fine
    # A connection left open half-way, then the daemon still serves.
    half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    half.connect(daemon.socket)
    half.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00")
    try:
        assert daemon.proc.poll() is None
        assert client.status().pid == daemon.proc.pid
        assert client.list_tools()
    finally:
        half.close()
