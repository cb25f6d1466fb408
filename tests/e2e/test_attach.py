"""Attach: many clients see one event log; replay after a seq; a slow client loses nothing
of the journal and slows nothing.

Progress events are live only (event_types.live_only): an attached client sees them as they
happen, a replay never contains them. They take no number of their own (they carry the
last journaled event's), so the numbers a person sees run without holes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from agentd_client import Client, Event
from agentd_client.v1 import agentd_pb2 as pb
from agentd_client.v1 import agentd_pb2_grpc as pb_grpc
from tests.support.daemon import DaemonProcess


def kind(e: Event) -> str:
    return e.WhichOneof("kind") or ""


class Follower:
    """Reads an attach stream in a thread until `until` is true of an event."""

    def __init__(
        self, client: Client, sid: str, after_seq: int, until: Callable[[Event], bool]
    ) -> None:
        self.stream = client.attach(sid, after_seq)
        self.events: list[Event] = []
        self.until = until
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for event in self.stream:
                self.events.append(event)
                if self.until(event):
                    break
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.error = exc
        finally:
            self.done.set()

    def wait(self, timeout: float = 30) -> list[Event]:
        finished = self.done.wait(timeout)
        self.stream.cancel()
        assert finished, f"stream did not reach its end in {timeout}s: {len(self.events)} events"
        assert self.error is None, self.error
        return self.events


def finished_call(tool_use_id: str) -> Callable[[Event], bool]:
    return lambda e: (
        kind(e) == "call_finished" and e.call_finished.result.tool_use_id == tool_use_id
    )


TODOS = [
    {"content": "Write code", "status": "in_progress", "activeForm": "Writing code"},
    {"content": "Run tests", "status": "pending", "activeForm": "Running tests"},
]


def test_two_clients_see_the_same_events(daemon: DaemonProcess, session_id: str) -> None:
    with Client(daemon.socket, timeout=60) as one, Client(daemon.socket, timeout=60) as two:
        # Both follow live once each has seen the first call finish.
        one.run_tool(session_id, "Glob", {"pattern": "*"}, tool_use_id="toolu_att_warm")
        last = "toolu_att_last"
        followers = [Follower(c, session_id, 0, finished_call(last)) for c in (one, two)]
        one.run_tool(session_id, "Bash", {"command": "echo hi"}, tool_use_id="toolu_att_bash")
        two.run_tool(session_id, "TodoWrite", {"todos": TODOS}, tool_use_id="toolu_att_todo")
        one.run_tool(session_id, "Glob", {"pattern": "*"}, tool_use_id=last)
        a, b = (f.wait() for f in followers)

    assert [(e.seq, kind(e)) for e in a] == [(e.seq, kind(e)) for e in b]
    assert [e.SerializeToString(deterministic=True) for e in a] == [
        e.SerializeToString(deterministic=True) for e in b
    ]
    seqs = [e.seq for e in a]
    assert seqs == sorted(seqs)
    numbered = [e.seq for e in a if kind(e) != "progress"]
    assert numbered == list(range(1, len(numbered) + 1)), "journaled numbers without holes"
    todos = [e for e in a if kind(e) == "todos_changed"]
    assert len(todos) == 1

    assert [MessageToDict(t) for t in todos[0].todos_changed.todos] == TODOS
    kinds = [kind(e) for e in a]
    assert kinds.count("call_started") == kinds.count("call_finished") == 4


def test_replay_after_seq_is_the_journal(client: Client, session_id: str) -> None:
    live = Follower(client, session_id, 0, finished_call("toolu_rp_3"))
    client.run_tool(session_id, "TodoWrite", {"todos": TODOS}, tool_use_id="toolu_rp_1")
    # Long enough to report progress (every PROGRESS_INTERVAL): live-only events.
    client.run_tool(
        session_id,
        "Bash",
        {"command": "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done"},
        tool_use_id="toolu_rp_2",
    )
    client.run_tool(session_id, "Glob", {"pattern": "*"}, tool_use_id="toolu_rp_3")
    events = live.wait()
    journaled = [(e.seq, kind(e)) for e in events if kind(e) != "progress"]
    assert any(kind(e) == "progress" for e in events), "the Bash call reported no progress"
    seqs = [s for s, _ in journaled]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"numbers skip: {seqs}"
    before = 0
    for e in events:
        if kind(e) == "progress":
            assert e.seq == before, "progress carries the journaled event before it"
        else:
            before = e.seq

    for after in (0, journaled[0][0], journaled[2][0], journaled[-2][0]):
        replay = Follower(client, session_id, after, lambda e: e.seq >= journaled[-1][0]).wait()
        assert [(e.seq, kind(e)) for e in replay] == [j for j in journaled if j[0] > after]


def test_replay_from_the_last_seq_then_follows_live(client: Client, session_id: str) -> None:
    client.run_tool(session_id, "Glob", {"pattern": "*"}, tool_use_id="toolu_rl_1")
    first = Follower(client, session_id, 0, finished_call("toolu_rl_1")).wait()
    last_seq = first[-1].seq
    follower = Follower(client, session_id, last_seq, finished_call("toolu_rl_2"))
    client.run_tool(session_id, "Glob", {"pattern": "*"}, tool_use_id="toolu_rl_2")
    events = follower.wait()
    assert events[0].seq == last_seq + 1
    calls = [kind(e) for e in events if kind(e).startswith("call_")]
    assert calls == ["call_started", "call_finished"]


def test_attach_unknown_session_is_not_found(client: Client) -> None:
    with pytest.raises(grpc.RpcError) as err:
        next(iter(client.attach("no-such-session")))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_slow_client_gets_a_gap_and_catches_up(daemon: DaemonProcess, session_id: str) -> None:
    """A client that does not read: the calls go on; when it reads, it gets a gap and then
    every journaled event it missed, in order, without a hole."""
    # The slow client's transport window stays at its initial 64 KiB (no BDP probing),
    # so what it does not read piles up in the daemon's queue for it, not in buffers.
    slow = grpc.insecure_channel(f"unix:{daemon.socket}", options=[("grpc.http2.bdp_probe", 0)])
    with Client(daemon.socket, timeout=120) as driver, slow:
        driver.run_tool(session_id, "Glob", {"pattern": "*"}, tool_use_id="toolu_slow_0")
        stream = pb_grpc.AgentdStub(slow).Attach(pb.AttachRequest(session_id=session_id))
        it = iter(stream)
        first = next(it)  # the stream is open at the daemon; now it stops reading
        assert kind(first) == "call_started"

        # Much output through Bash (progress events carry it) while nobody reads.
        big = driver.run_tool(
            session_id, "Bash", {"command": "seq 1 3000000"}, tool_use_id="toolu_slow_big"
        )
        assert not big.is_error, big.text[:500]
        assert "Preview (first 2KB):\n1\n2\n3\n" in big.text
        with open(big.data["persistedOutputPath"]) as saved:
            assert saved.read().endswith("\n2999999\n3000000\n")
        # Then more journaled events than a subscriber queue holds (1024), and than the
        # transport buffers: every TodoWrite journals call_started, todos_changed and
        # call_finished, each carrying the (large) list.
        filler = "x" * 2000
        last = ""
        for batch in range(8):
            calls = []
            for k in range(64):
                todos = [
                    {"content": f"{filler} {batch}.{k}", "status": "pending", "activeForm": "t"}
                ]
                calls.append(
                    {"name": "TodoWrite", "input": {"todos": todos}, "id": f"toolu_s_{batch}_{k}"}
                )
            results = driver.run_tools(session_id, calls)
            assert not any(r.is_error for r in results)
            last = calls[-1]["id"]
        assert driver.status().pid == daemon.proc.pid

        # Now read: a gap comes, then the journal from where the client was lost.
        timer = threading.Timer(60, stream.cancel)
        timer.start()
        events = [first]
        try:
            for event in it:
                events.append(event)
                if finished_call(last)(event):
                    break
        finally:
            timer.cancel()
            stream.cancel()

    gaps = [e for e in events if kind(e) == "gap"]
    assert gaps, "no gap event for a client that fell behind"
    assert gaps[0].gap.from_seq <= gaps[0].gap.to_seq
    real = [e for e in events if kind(e) != "gap"]
    seqs = [e.seq for e in real]
    assert seqs == sorted(seqs)
    numbered = [e.seq for e in real if kind(e) != "progress"]
    assert len(set(numbered)) == len(numbered)
    assert finished_call(last)(real[-1])

    # Nothing journaled is missing: compare with a fresh replay of the same range.
    with Client(daemon.socket) as fresh:
        replay = Follower(fresh, session_id, 0, finished_call(last)).wait()
    got = {e.seq for e in real if kind(e) != "progress"}
    want = {e.seq for e in replay if e.seq >= first.seq}
    assert want <= got, f"missing journaled seqs: {sorted(want - got)[:10]}"
    # Progress events are live only: the replay has none.
    assert not [e for e in replay if kind(e) == "progress"]
