"""The project's fake Messages API (tests/data/oracle/fake_api.py, the oracle's, kept as it
is) with one thing more: a turn of the script may hold `{"text": "..."}`, which the
model then says (streamed) before that turn's tool calls.

    python tests/support/fake_messages.py --script S.json --record R.jsonl --dump-dir D

Everything else -- the turns chosen from the tool_use ids in the conversation, the
tool_results recorded, every request body dumped -- is the oracle's own.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script too, so it finds the oracle by its own path, not through `tests`.
ORACLE = Path(__file__).resolve().parents[1] / "data" / "oracle" / "fake_api.py"


def _oracle() -> Any:
    spec = importlib.util.spec_from_file_location("fake_api", ORACLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class FakeAPI:
    """A running fake: its URL, and what it was sent."""

    url: str
    record: Path
    dumps: Path

    def results(self) -> list[dict[str, Any]]:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return [r for r in map(json.loads, lines) if r.get("kind") == "tool_result"]

    def requests(self) -> list[dict[str, Any]]:
        """The main-loop request bodies, in order."""
        return [json.loads(p.read_text()) for p in sorted(self.dumps.glob("req_*_main.json"))]


@contextmanager
def running(script: list[list[dict[str, Any]]], where: Path) -> Iterator[FakeAPI]:
    where.mkdir(parents=True, exist_ok=True)
    (where / "script.json").write_text(json.dumps(script))
    dumps = where / "requests"
    dumps.mkdir(exist_ok=True)
    record = where / "record.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--script",
            str(where / "script.json"),
            "--record",
            str(record),
            "--dump-dir",
            str(dumps),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield FakeAPI(f"http://127.0.0.1:{int(line.split()[1])}", record, dumps)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    oracle = _oracle()

    class State(oracle.State):  # type: ignore[name-defined,misc]
        def __init__(self, turns: list[list[dict[str, Any]]], *args: Any) -> None:
            self.texts = {
                i: "".join(b["text"] for b in turn if "text" in b and "name" not in b)
                for i, turn in enumerate(turns)
            }
            kept = [[b for b in turn if "name" in b or "sleep" in b] for turn in turns]
            super().__init__(kept, *args)

    class Handler(oracle.Handler):  # type: ignore[name-defined,misc]
        def _main_turn(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
            blocks, stop = super()._main_turn(body)
            if stop == "tool_use" and blocks:
                turn = self.state.turn_of_id[blocks[0]["id"]]
                if text := self.state.texts.get(turn):
                    blocks = [{"type": "text", "text": text}, *blocks]
            return blocks, stop

    oracle.State = State
    oracle.Handler = Handler
    oracle.main()


if __name__ == "__main__":
    main()
