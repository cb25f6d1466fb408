"""Where log lines go and what they look like: text or JSON, written off the event loop.

JSON lines are one object each (`time`, `level`, `logger`, `message`; a traceback is
part of `message`, escaped, so a record stays one line), for a log shipper's parsers. The
formatter is the standard library's plus json.dumps: a few lines, no dependency.

Every message is bounded and escaped before it is queued (BoundedQueueHandler), since
many carry what a client sent (a path, a name, an id): a 5 MB path made a 5 MB line,
and a newline in one could forge a line of its own. A message keeps its first
MAX_MESSAGE characters with control, format and line-separator characters escaped
(`\\n`, `\\x1b`, `\\u202e`); a traceback keeps its lines, each bounded and escaped.
"""

from __future__ import annotations

import atexit
import json
import logging
import logging.handlers
import queue
import re
import sys
from datetime import UTC, datetime
from typing import Any

from agentd.foundation.errors import InvalidRequest

FORMATS = ("text", "json")
# Characters of a message kept, and of each line of a traceback.
MAX_MESSAGE = 2000
# Lines of a traceback kept (its last ones: where it failed and why).
MAX_TRACEBACK_LINES = 60
# C0 and C1 controls, DEL, line and paragraph separators, bidi and other format marks.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` as one safe line of at most about `limit` characters."""
    cut = len(text) - limit
    if cut > 0:
        text = text[:limit]
    text = _UNSAFE.sub(_escape, text)
    if len(text) > limit:
        cut = max(cut, 0) + len(text) - limit
        text = text[:limit]
    return f"{text}… ({cut} more characters)" if cut > 0 else text


class BoundedQueueHandler(logging.handlers.QueueHandler):
    """Queues records with their message bounded and escaped (see the module docstring),
    formatted here once (the standard QueueHandler would format a 5 MB message whole)."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        try:
            message = bounded(record.getMessage())
        except Exception:  # a bad format string must not lose the record
            message = bounded(f"{record.msg!r} % {record.args!r}")
        if record.exc_info:
            trace = self.formatter.formatException(record.exc_info) if self.formatter else ""
            trace = trace or logging.Formatter().formatException(record.exc_info)
            lines = trace.splitlines()[-MAX_TRACEBACK_LINES:]
            message += "\n" + "\n".join(bounded(line) for line in lines)
        record = logging.makeLogRecord(record.__dict__)
        record.msg, record.args = message, None
        record.exc_info = record.exc_text = record.stack_info = None
        return record


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
    root.addHandler(BoundedQueueHandler(records))
    root.setLevel(check_level(level))


def announce(text: str, fmt: str) -> None:
    """A line people and supervisors wait for, whatever the log level, in the log's format."""
    if fmt == "json":
        record = logging.LogRecord("agentd", logging.INFO, __file__, 0, text, None, None)
        text = JsonFormatter().format(record)
    # One write, the newline in it, as the log's handler writes its lines: print() writes
    # the newline apart, and a record another thread logs meanwhile would land between.
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def set_level(level: str) -> None:
    logging.getLogger().setLevel(check_level(level))
