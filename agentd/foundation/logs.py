"""Where log lines go and what they look like: text or JSON, written off the event loop.

JSON lines are one object each (`time`, `level`, `logger`, `message`; a traceback is
part of `message`, escaped, so a record stays one line), for a log shipper's parsers. The
formatter is the standard library's plus json.dumps: a few lines, no dependency.
"""

from __future__ import annotations

import atexit
import json
import logging
import logging.handlers
import queue
import sys
from datetime import UTC, datetime
from typing import Any

from agentd.foundation.errors import InvalidRequest

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def check_level(level: str) -> str:
    """The level's canonical name, or a one-line error naming the choices."""
    name = level.upper() if isinstance(level, str) else ""
    if not name or not isinstance(logging.getLevelName(name), int):
        raise InvalidRequest(f"log_level must be DEBUG, INFO, WARNING or ERROR, got {level!r}")
    return name


def check_format(fmt: str) -> str:
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise InvalidRequest(f"log_format must be text or json, got {fmt!r}")
    return fmt


def setup(level: str, fmt: str) -> None:
    """Log records are queued and written to stderr by a thread of their own: a slow
    reader of stderr (journald, a full pipe) must never stall the event loop."""
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    stderr = logging.StreamHandler()
    stderr.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    listener = logging.handlers.QueueListener(records, stderr)
    listener.start()
    atexit.register(listener.stop)
    root = logging.getLogger()
    root.addHandler(logging.handlers.QueueHandler(records))
    root.setLevel(check_level(level))


def announce(text: str, fmt: str) -> None:
    """A line people and supervisors wait for, whatever the log level, in the log's format."""
    if fmt == "json":
        record = logging.LogRecord("agentd", logging.INFO, __file__, 0, text, None, None)
        text = JsonFormatter().format(record)
    print(text, file=sys.stderr, flush=True)


def set_level(level: str) -> None:
    logging.getLogger().setLevel(check_level(level))
