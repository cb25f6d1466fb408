"""A fake OpenAI Responses API for Codex, offline: the first request whose tools hold
`--tool` (a function, or one inside a namespace as Codex sends an MCP server's tools)
is answered with one call of it (`--arguments`); every other request with "Done.".
Every request body goes to `--record` (JSON Lines).

    python tests/support/fake_responses.py --tool Bash --arguments '{"command": "id -u"}' \\
        --record R.jsonl        # prints "PORT n" once it listens
"""

from __future__ import annotations

import argparse
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _find(tools: list[Any], name: str) -> dict[str, str] | None:
    """The call's name (and namespace) for the tool called `name` in the request."""
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "function" and tool.get("name") == name:
            return {"name": name}
        if tool.get("type") == "namespace":
            inner = [t.get("name") for t in tool.get("tools", []) if isinstance(t, dict)]
            if name in inner:
                return {"name": name, "namespace": tool["name"]}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    args: argparse.Namespace
    lock = threading.Lock()

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # model lists and the like: nothing
        self._reply(200, b'{"data": [], "models": []}', "application/json")

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(size) or b"{}")
        except ValueError:
            body = {}
        with self.lock, open(self.args.record, "a") as f:
            f.write(json.dumps({"path": self.path, "body": body}) + "\n")
        inputs = [i for i in body.get("input", []) if isinstance(i, dict)]
        answered = any(i.get("type") == "function_call_output" for i in inputs)
        call = None if answered else _find(body.get("tools") or [], self.args.tool)
        rid = f"resp_{uuid.uuid4().hex[:12]}"
        if call:
            item = {"type": "function_call", "id": "fc_1", "call_id": "call_fake_1",
                    "arguments": self.args.arguments, "status": "completed", **call}  # fmt: skip
        else:
            text = {"type": "output_text", "text": "Done.", "annotations": []}
            item = {"type": "message", "id": "msg_1", "role": "assistant",
                    "status": "completed", "content": [text]}  # fmt: skip
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 15}  # fmt: skip
        events = [
            _sse("response.created", {"response": {"id": rid}}),
            _sse("response.output_item.added", {"output_index": 0, "item": item}),
            _sse("response.output_item.done", {"output_index": 0, "item": item}),
            _sse("response.completed", {"response": {"id": rid, "status": "completed",
                                                     "output": [item], "usage": usage}}),
        ]  # fmt: skip
        self._reply(200, b"".join(events), "text/event-stream")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--arguments", required=True, help="the call's arguments, JSON")
    parser.add_argument("--record", required=True)
    Handler.args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
