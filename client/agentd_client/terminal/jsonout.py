"""JSON for machines (every command's --json): exact, sorted keys. Apart from display.py
so the commands that never reach the daemon print it without loading protobuf."""

from __future__ import annotations

import json
from typing import Any


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def print_json_line(value: Any) -> None:
    print(json.dumps(value, sort_keys=True), flush=True)
