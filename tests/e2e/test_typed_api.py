"""The API as a non-Python client sees it: requests written as plain JSON, replies read
as plain JSON, and no JSON inside strings anywhere.

Requests are built with protobuf's JSON mapping (json_format.Parse, as any language's
protobuf library or grpcurl does) and sent on the raw stub; replies are turned back
into JSON with MessageToJson. Then the same with grpcurl itself, against the real
daemon through reflection.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from agentd_client import Client, DocumentBlock
from agentd_client.core import structs
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess
from tests.support.data import ORACLE, TOOL_SCHEMAS

PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63646060f80f0000040201005e5b2d9a0000000049454e44ae426082"
)
TODOS = [
    {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
    {"content": "Fix the bug", "status": "pending", "activeForm": "Fixing the bug"},
]


def _json(message: Any) -> Any:
    """A reply as a JSON client reads it."""
    return json.loads(json_format.MessageToJson(message, preserving_proto_field_name=True))


def _json_in_strings(value: Any, where: str = "") -> list[str]:
    """Where a string holds a JSON object or array (what this API must never send)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _json_in_strings(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _json_in_strings(v, f"{where}[{i}]")]
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            json.loads(value)
        except ValueError:
            return []
        return [where]
    return []


def _request(message_type: type, text: str) -> Any:
    return json_format.Parse(text, message_type())


def test_a_call_written_in_plain_json_answers_in_plain_json(
    client: Client, session_id: str, workspace: Path
) -> None:
    (workspace / "hello.txt").write_text("hi there\n")
    request = _request(
        pb.RunToolRequest,
        json.dumps(
            {
                "session_id": session_id,
                "call": {"tool_use_id": "toolu_json_1", "name": "Read",
                         "input": {"file_path": "hello.txt", "limit": 5}},
            }
        ),
    )  # fmt: skip
    reply = _json(client.stub.CallTool(request, timeout=30))
    assert reply["tool_use_id"] == "toolu_json_1"
    assert reply["content"][0]["type"] == "text"
    assert reply["content"][0]["text"].startswith("1\thi there")
    assert isinstance(reply["data"], dict) and reply["data"]["type"] == "text"
    assert reply["data"]["file"]["content"] == "hi there\n"
    assert isinstance(reply["data"]["file"]["numLines"], int | float)  # a number, not text
    assert _json_in_strings(reply) == []


def test_an_image_block_has_the_messages_api_shape(
    client: Client, session_id: str, workspace: Path
) -> None:
    (workspace / "p.png").write_bytes(PNG_1X1)
    request = _request(
        pb.RunToolRequest,
        json.dumps({"session_id": session_id,
                    "call": {"name": "Read", "input": {"file_path": "p.png"}}}),
    )  # fmt: skip
    reply = _json(client.stub.CallTool(request, timeout=30))
    image = reply["content"][0]
    assert set(image) == {"type", "source"} and image["type"] == "image"
    assert image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == PNG_1X1
    # The Python client's blocks are the same, bytes and all.
    r = client.run_tool(session_id, "Read", {"file_path": "p.png"})
    assert r.content_blocks() == [image]


def test_a_pdf_is_a_document_block_in_the_messages_api_shape(
    client: Client, session_id: str, workspace: Path
) -> None:
    """Read of a PDF sends the PDF itself, as the reference does: `{"type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": …}}` on the
    wire, and the same block from the Python client (tool_result and dict forms)."""
    subprocess.run(
        [sys.executable, ORACLE / "make_media.py", "pdf", workspace / "d.pdf", "2"], check=True
    )
    pdf = (workspace / "d.pdf").read_bytes()
    request = _request(
        pb.RunToolRequest,
        json.dumps({"session_id": session_id,
                    "call": {"name": "Read", "input": {"file_path": "d.pdf"}}}),
    )  # fmt: skip
    reply = _json(client.stub.CallTool(request, timeout=60))
    assert len(reply["content"]) == 2, reply
    head, document = reply["content"]
    assert head == {"type": "text", "text": f"PDF file read: {workspace}/d.pdf (856 bytes)"}
    assert set(document) == {"type", "source"} and document["type"] == "document"
    assert document["source"]["type"] == "base64"
    assert document["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(document["source"]["data"]) == pdf
    assert reply["data"]["file"]["numPages"] == 2
    r = client.run_tool(session_id, "Read", {"file_path": "d.pdf"})
    assert isinstance(r.content[1], DocumentBlock) and r.content[1].data == pdf
    assert r.content_blocks() == [head, document]
    assert r.to_tool_result_block()["content"] == [head, document]


def test_batches_schemas_events_status_and_classifications_are_plain_json(
    client: Client, session_id: str
) -> None:
    after = client.get_session(session_id).last_seq
    batch = _request(
        pb.RunToolsRequest,
        json.dumps({"session_id": session_id, "calls": [
            {"tool_use_id": "toolu_json_t", "name": "TodoWrite", "input": {"todos": TODOS}},
            {"tool_use_id": "toolu_json_g", "name": "Glob", "input": {"pattern": "*"}},
        ]}),
    )  # fmt: skip
    updates = [_json(u) for u in client.stub.RunTools(batch, timeout=30)]
    results = [u["result"] for u in updates if "result" in u]
    assert [r["tool_use_id"] for r in results] == ["toolu_json_t", "toolu_json_g"]
    assert not any(r.get("is_error") for r in results)

    stream = client.attach(session_id, after)
    events = []
    for e in stream:
        events.append(_json(e))
        if "call_finished" in events[-1] and events[-1]["call_finished"]["name"] == "Glob":
            break
    stream.cancel()
    started = [e["call_started"] for e in events if "call_started" in e]
    assert started[0]["input"] == {"todos": TODOS}
    assert started[1]["input"] == {"pattern": "*"}
    todos = next(e["todos_changed"]["todos"] for e in events if "todos_changed" in e)
    # Proto field active_form is activeForm in proto JSON, as TodoWrite writes it.
    as_todowrite = json.loads(json_format.MessageToJson(pb.TodosChanged(todos=[
        pb.Todo(content=t["content"], status=t["status"], active_form=t["active_form"])
        for t in todos
    ])))  # fmt: skip
    assert as_todowrite["todos"] == TODOS
    assert _json_in_strings(events) == []

    tools = _json(client.stub.ListTools(pb.ListToolsRequest(), timeout=30))["tools"]
    reference = {
        t["name"]: t["input_schema"] for t in json.loads(TOOL_SCHEMAS.read_text())["tools"]
    }
    read = next(t for t in tools if t["name"] == "Read")
    assert read["input_schema"] == reference["Read"]

    status = _json(client.stub.GetStatus(pb.GetStatusRequest(), timeout=30))
    assert isinstance(status["sandbox"], dict) and status["sandbox"]

    classified = _json(
        client.stub.Classify(_request(pb.ClassifyRequest, '{"command": "ls -la | wc -l"}'))
    )["classification"]
    assert classified["read_only"] is True
    assert [c["program"] for c in classified["commands"]] == ["ls", "wc"]
    assert _json_in_strings([tools, status, classified]) == []


def test_the_python_client_reads_the_same_values(client: Client, session_id: str) -> None:
    """Struct numbers are doubles on the wire; whole ones come back as ints."""
    schema = next(t for t in client.list_tools() if t["name"] == "Read")["input_schema"]
    reference = next(
        t["input_schema"]
        for t in json.loads(TOOL_SCHEMAS.read_text())["tools"]
        if t["name"] == "Read"
    )
    assert json.dumps(schema, sort_keys=True) == json.dumps(reference, sort_keys=True)
    # The required properties first, in the order the tool gives them.
    assert list(schema["properties"])[: len(reference["required"])] == reference["required"]
    assert client.classify("rm -rf x")["read_only"] is False


def _call(client: Client, session_id: str, call: pb.ToolUse) -> grpc.RpcError:
    request = pb.RunToolRequest(session_id=session_id, call=call)
    with pytest.raises(grpc.RpcError) as err:
        client.stub.CallTool(request, timeout=30)
    return err.value


def test_input_json_cannot_hold_is_refused_with_where_it_is(
    client: Client, session_id: str
) -> None:
    nan = pb.ToolUse(name="Read")
    structs.fill(nan.input, {"file_path": "x"})
    nan.input.fields["limit"].number_value = math.nan
    err = _call(client, session_id, nan)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "call.input.limit: nan is not a JSON number" in err.details()

    unset = pb.ToolUse(name="Read")
    unset.input.fields["file_path"].SetInParent()  # a Value with no kind
    err = _call(client, session_id, unset)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "call.input.file_path: a google.protobuf.Value with no kind set" in err.details()

    deep = pb.ToolUse(name="Glob", tool_use_id="toolu_deep")
    structs.fill(deep.input, {"pattern": "*", "x": [{"y": [1, 2]}]})
    deep.input.fields["x"].list_value.values[0].struct_value.fields["y"].list_value.values[
        1
    ].number_value = math.inf
    batch = pb.RunToolsRequest(session_id=session_id, calls=[pb.ToolUse(name="Glob"), deep])
    with pytest.raises(grpc.RpcError) as err:
        list(client.stub.RunTools(batch, timeout=30))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "calls[1].input.x[0].y[1]: inf is not a JSON number" in err.value.details()


def test_input_of_the_wrong_types_is_a_tool_error_the_model_can_fix(
    client: Client, session_id: str
) -> None:
    """Fitting the tool's schema is the tool's business: an is_error result, not an RPC
    error, so a model sees what to change."""
    request = _request(
        pb.RunToolRequest,
        json.dumps({"session_id": session_id,
                    "call": {"name": "Read", "input": {"file_path": ["x"], "limit": "ten"}}}),
    )  # fmt: skip
    reply = _json(client.stub.CallTool(request, timeout=30))
    assert reply["is_error"] is True
    assert "`file_path` type is expected as `string`" in reply["content"][0]["text"]


def _grpcurl() -> str:
    found = shutil.which("grpcurl") or shutil.which(
        "grpcurl", path=str(Path(sys.executable).parent)
    )
    if found is None:
        pytest.skip("grpcurl is not installed (the dev extra installs it on x86-64 Linux)")
    return found


def _grpcurl_call(daemon: DaemonProcess, method: str, body: dict[str, Any]) -> Any:
    r = subprocess.run(
        [_grpcurl(), "-plaintext", "-unix", "-d", json.dumps(body), daemon.socket,
         f"agentd.v1.Agentd/{method}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_grpcurl_with_plain_json_through_reflection(
    daemon: DaemonProcess, session_id: str, workspace: Path
) -> None:
    (workspace / "hello.txt").write_text("hi there\n")
    reply = _grpcurl_call(
        daemon,
        "CallTool",
        {"session_id": session_id, "call": {"name": "Read", "input": {"file_path": "hello.txt"}}},
    )
    assert reply["content"] == [{"type": "text", "text": reply["content"][0]["text"]}]
    assert reply["content"][0]["text"].startswith("1\thi there")
    assert reply["data"]["file"]["content"] == "hi there\n"
    assert _json_in_strings(reply) == []

    tools = _grpcurl_call(daemon, "ListTools", {})["tools"]
    bash = next(t for t in tools if t["name"] == "Bash")
    assert bash["input_schema"]["properties"]["command"]["type"] == "string"

    bad = subprocess.run(
        [_grpcurl(), "-plaintext", "-unix", "-d",
         json.dumps({"session_id": session_id, "call": {"name": "Read", "input": "x"}}),
         daemon.socket, "agentd.v1.Agentd/CallTool"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # A string is no JSON object: refused before anything is sent.
    assert bad.returncode != 0 and "bad StructValue" in bad.stderr, bad.stderr


def test_a_journal_written_before_the_typed_api_reads_the_same() -> None:
    """Events journaled with JSON text (input_json, data_json, widens_json) come out typed."""
    from agentd.api.wire import event_to_pb
    from agentd.sessions import journal
    from agentd.sessions.events import Event

    def event(kind: str, payload: dict[str, Any]) -> Any:
        body = journal.decode(kind, payload, journal.UNVERSIONED)
        assert body is not None
        return event_to_pb(Event(7, "s", 1, body))

    started = event(
        "call_started", {"tool_use_id": "t", "name": "Read", "input_json": '{"file_path": "a"}'}
    )
    assert structs.from_struct(started.call_started.input) == {"file_path": "a"}
    result = {"tool_use_id": "t", "is_error": False, "content": [{"type": "text", "text": "x"}]}
    finished = event(
        "call_finished",
        {"name": "Read", "duration_ms": 3, "result": {**result, "data_json": '{"n": 2}'}},
    )
    assert structs.from_value(finished.call_finished.result.data) == {"n": 2}
    none = event(
        "call_finished", {"name": "R", "duration_ms": 3, "result": {**result, "data_json": ""}}
    )
    assert not none.call_finished.result.HasField("data")
    ignored = event(
        "settings_ignored", {"path": "p", "sha256": "", "widens_json": "", "reason": "unreadable"}
    )
    assert not ignored.settings_ignored.HasField("widens")
    asked = event(
        "permission_requested",
        {"request_id": "r", "tool_use_id": "t", "tool_name": "Bash",
         "input_json": '{"command": "ls"}', "reasons": [], "suggested_rule": "", "expires_ms": 1,
         "rule_choices": []},
    )  # fmt: skip
    assert structs.from_struct(asked.permission_requested.input) == {"command": "ls"}


def test_input_nested_past_what_protobuf_parses_is_invalid_argument(
    daemon: DaemonProcess, session_id: str
) -> None:
    """A client with a deeper parser (Go's takes 10,000 levels) may send what the daemon's
    cannot read: a clear refusal, not a crash."""
    request = pb.RunToolRequest(session_id=session_id, call=pb.ToolUse(name="Read"))
    value = request.call.input.fields["file_path"]
    for _ in range(60):
        value = value.struct_value.fields["k"]
    value.string_value = "x"
    raw = request.SerializeToString()
    with (
        grpc.insecure_channel(f"unix:{daemon.socket}") as channel,
        pytest.raises(grpc.RpcError) as err,
    ):
        channel.unary_unary("/agentd.v1.Agentd/CallTool")(raw, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "could not be decoded" in err.value.details()
