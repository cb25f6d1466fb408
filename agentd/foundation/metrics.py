"""What the daemon counts for operators: Prometheus metrics, served on a local port.

The metrics live in a registry of their own (not prometheus_client's global one) so
that importing agentd in a test or a tool registers nothing. Label values come only
from fixed sets: a tool name the registry does not know is counted as "unknown", so a
client sending random names cannot grow the metrics without limit.

The HTTP server is prometheus_client's own, in a thread of its own: a slow scraper
never touches the event loop. Gauges of live state read it when scraped.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Mapping
from typing import Any

import grpc
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.exposition import generate_latest

from agentd import __version__
from agentd.foundation.errors import InvalidRequest

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)

# The process's own series, as every Prometheus client exports them: process_cpu_seconds,
# process_resident_memory_bytes, process_open_fds, process_start_time_seconds, ... and
# python_info; and which build this is, one series at 1 (agentd_build_info).
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
BUILD = Info(
    "agentd_build", "The running agentd's version, and what it runs on.", registry=REGISTRY
)
BUILD.info(
    {"version": __version__, "python": platform.python_version(), "grpcio": grpc.__version__}
)

_known_tools: dict[str, str] = {}
_served = 0
_readopted = 0

CALLS = Counter(
    "agentd_tool_calls",
    "Tool calls answered, by tool and outcome (ok, error).",
    ["tool", "outcome"],
    registry=REGISTRY,
)
CALL_SECONDS = Histogram(
    "agentd_tool_call_seconds",
    "Wall time of a tool call, from its start to its result, by tool.",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800),
    registry=REGISTRY,
)
SANDBOX_START_SECONDS = Histogram(
    "agentd_sandbox_start_seconds",
    "Time to start a sandboxed command (seccomp filter, bwrap spawn).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
    registry=REGISTRY,
)
PERMISSION_DECISIONS = Counter(
    "agentd_permission_decisions",
    "Permission decisions on tool calls, by behavior (allow, deny).",
    ["behavior"],
    registry=REGISTRY,
)
ASKS_ANSWERED = Counter(
    "agentd_permission_asks_answered",
    "Permission requests closed, by decision and by who closed them "
    "(person, timeout, cancelled, other).",
    ["decision", "by"],
    registry=REGISTRY,
)
TASKS_STARTED = Counter("agentd_tasks_started", "Background tasks started.", registry=REGISTRY)
TASKS_READOPTED = Counter(
    "agentd_tasks_readopted",
    "Background tasks that outlived a daemon and were taken over by this one.",
    registry=REGISTRY,
)
UNAUTHENTICATED = Counter(
    "agentd_unauthenticated_calls",
    "Calls on the TCP listener refused for a missing or wrong token (their bodies unread).",
    registry=REGISTRY,
)
RELOADS = Counter(
    "agentd_config_reloads", "SIGHUP reloads, by result (ok, error).", ["result"], registry=REGISTRY
)
LOOP_DELAY_SECONDS = Histogram(
    "agentd_event_loop_delay_seconds",
    "How late the event loop ran a timer (looplag.py): time it was held by one piece of work.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
LOOP_LONGEST_DELAY = Gauge(
    "agentd_event_loop_longest_delay_seconds",
    "The longest the event loop was held since the daemon started.",
    registry=REGISTRY,
)
STATE_DISK_FULL = Gauge(
    "agentd_state_disk_full",
    "1 while the state disk refuses writes (a write failed and no commit has succeeded).",
    registry=REGISTRY,
)
EVENTS_UNJOURNALED = Gauge(
    "agentd_events_unjournaled",
    "Events lost from the journal for want of space since start (refused or rolled back).",
    registry=REGISTRY,
)
STATE_DATABASE_PROBLEM = Gauge(
    "agentd_state_database_problem",
    "1 once the state database was found deleted, replaced or damaged while running.",
    registry=REGISTRY,
)
NETWORK_CONNECTIONS = Counter(
    "agentd_network_connections",
    "Connections through the sessions' proxies, by decision (allowed, refused, asked).",
    ["decision"],
    registry=REGISTRY,
)
NETWORK_BYTES = Counter(
    "agentd_network_bytes",
    "Bytes carried by the sessions' proxies, by direction (out: from the sandbox).",
    ["direction"],
    registry=REGISTRY,
)
NETWORK_OPEN = Gauge(
    "agentd_network_open_connections", "Proxied connections open now.", registry=REGISTRY
)
RUNNING_CALLS = Gauge("agentd_running_calls", "Tool calls running now.", registry=REGISTRY)
RUNNING_TASKS = Gauge("agentd_running_tasks", "Background tasks running now.", registry=REGISTRY)
OPEN_SESSIONS = Gauge("agentd_open_sessions", "Sessions open now.", registry=REGISTRY)
PENDING_ASKS = Gauge(
    "agentd_pending_permission_asks", "Permission requests waiting for a person.", registry=REGISTRY
)


def know_tools(names: Mapping[str, str]) -> None:
    """Every name a client may call a tool by, mapped to the tool's own name: only those
    appear as label values (aliases counted under the tool); anything else is "unknown"."""
    global _known_tools
    _known_tools = dict(names)
    _call_children.clear()


def _tool(name: str) -> str:
    return _known_tools.get(name, "unknown")


# (tool name as called, is_error) -> the labelled children a finished call counts in:
# looked up once, not per call (labels() costs more than inc()). Bounded by the tool
# names a client may send: any other name is "unknown" and shares one entry.
_call_children: dict[tuple[str, bool], tuple[Any, Any]] = {}


def call_finished(tool: str, is_error: bool, seconds: float) -> None:
    global _served
    _served += 1
    key = (tool if tool in _known_tools else "", is_error)
    children = _call_children.get(key)
    if children is None:
        name = _tool(tool)
        children = (
            CALLS.labels(name, "error" if is_error else "ok"),
            CALL_SECONDS.labels(name),
        )
        _call_children[key] = children
    children[0].inc()
    children[1].observe(seconds)


def calls_served() -> int:
    """Tool calls answered since start, for `agentctl status`."""
    return _served


def sandbox_started(seconds: float) -> None:
    SANDBOX_START_SECONDS.observe(seconds)


def permission_decided(behavior: str) -> None:
    PERMISSION_DECISIONS.labels(behavior if behavior in ("allow", "deny") else "other").inc()


def ask_answered(decision: str, decided_by: str) -> None:
    # A person's answer carries who they are ("alice@devbox on /dev/pts/3"); the daemon's
    # own endings are "timeout" and "cancelled". Labels stay few whatever clients send.
    by = decided_by if decided_by in ("timeout", "cancelled") else "person"
    ASKS_ANSWERED.labels(decision if decision in ("allow", "deny") else "other", by).inc()


def network_connection(decision: str) -> None:
    """A proxied connection decided: "allowed", "refused" or "asked"."""
    NETWORK_CONNECTIONS.labels(decision).inc()


def network_bytes(direction: str, count: int) -> None:
    NETWORK_BYTES.labels(direction).inc(count)


def task_started() -> None:
    TASKS_STARTED.inc()


def task_readopted() -> None:
    global _readopted
    _readopted += 1
    TASKS_READOPTED.inc()


def tasks_readopted() -> int:
    """Tasks taken over from a previous daemon since start, for `agentctl status`."""
    return _readopted


_longest_delay = 0.0


def unauthenticated_call() -> None:
    UNAUTHENTICATED.inc()


def loop_delay(seconds: float) -> None:
    global _longest_delay
    LOOP_DELAY_SECONDS.observe(seconds)
    if seconds > _longest_delay:
        _longest_delay = seconds
        LOOP_LONGEST_DELAY.set(seconds)


def watch(gauge: Gauge, read: Callable[[], float]) -> None:
    """`gauge` reads `read()` at each scrape; a failing reader reports -1, not an error."""

    def safe() -> float:
        try:
            return float(read())
        except Exception:  # a scrape must never fail because of one gauge
            return -1.0

    gauge.set_function(safe)


def exposition() -> bytes:
    return generate_latest(REGISTRY)


def parse_listen(value: str) -> tuple[str, int]:
    """`host:port` (`[::1]:9464` for IPv6) into its parts, or a one-line error."""
    host, sep, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidRequest(
            f"metrics_listen must look like 127.0.0.1:9464, got {value!r}; "
            "set it to a local address and port, or leave it empty to turn metrics off"
        )
    return host, int(port)


def serve(listen: str) -> Any:
    """Start the HTTP exporter on `listen`; returns its server (call .shutdown())."""
    host, port = parse_listen(listen)
    try:
        server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    except OSError as exc:
        raise InvalidRequest(f"cannot serve metrics on {listen}: {exc.strerror or exc}") from exc
    log.info("metrics on http://%s/metrics", listen)
    return server
