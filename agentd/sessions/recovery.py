"""At start, the calls a crash left open are ended as interrupted.

A call is recorded as open (Store.call_opened) in the same commit as its start, and
closed with its end. Whatever is open when the daemon starts was running when the last
one died (kill -9, a power cut, an out-of-memory kill): its journal gets a
`call_finished` saying so, so an attached client, `agentctl agent --resume` and the
model see an end, not a call that seems to run forever.
"""

from __future__ import annotations

import logging
import time

from agentd.foundation.errors import SessionNotFound
from agentd.sessions.event_types import CallFinished, ResultPayload
from agentd.sessions.session import SessionManager

log = logging.getLogger(__name__)

INTERRUPTED_TEXT = (
    "This call was interrupted: agentd stopped (it crashed or was killed) before the "
    "call's end was recorded. It may have run in part, or to its end; what it changed, "
    "if anything, is unknown. Check the current state before running it again."
)


def interrupted_result(tool_use_id: str) -> ResultPayload:
    """The result payload of an interrupted call, as executor.result_payload shapes one."""
    return {
        "tool_use_id": tool_use_id,
        "content": [{"type": "text", "text": INTERRUPTED_TEXT}],
        "is_error": True,
        "data": {"interrupted": True, "reason": "agentd stopped before the call ended"},
    }


def end_interrupted_calls(sessions: SessionManager) -> int:
    """Journal an interrupted end for every call left open; how many there were."""
    store = sessions.store
    ended = 0
    now_ms = int(time.time() * 1000)
    for session_id, tool_use_id, name, started_ms in store.open_calls():
        try:
            events = sessions.log(session_id)
        except SessionNotFound:
            pass  # the session's rows are gone; only the marker row is left
        else:
            events.emit(
                CallFinished(
                    name=name,
                    duration_ms=max(0, now_ms - started_ms),
                    result=interrupted_result(tool_use_id),
                    interrupted=True,
                )
            )
            ended += 1
        store.call_closed(session_id, tool_use_id)
    store.flush()
    if ended:
        log.warning("ended %d call(s) a crash left open as interrupted", ended)
    return ended
