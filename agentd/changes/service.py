"""The change tracker: what every writing run changed, and its code-bearing changes held
for a person (`services["changes"]`).

    tracked = await tracker.begin(session, identity)   # before the run: baseline fresh,
                                                        # group + log for its shim
    ... the shim's reader writes the run's changes to the log ...
    held = await tracker.hold(session, tracked)         # after (or while) it runs: revert
    text = await tracker.decide(session, tracked, held, made_by=…, tool_use_id=…)
                                                        # ask; re-apply on a yes
    tracker.close(tracked)                               # or follow(…) for a task

`tracked.changes` is the run's change set (added, changed, deleted paths): the base of
checkpoints ("what did call X change").
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Callable
from typing import Any

from agentd.changes import (
    fanotify,
    holding,
    known,
    matching,
    persist,
    prompt,
    resolve,
    walk,
)
from agentd.changes.asker import Asker
from agentd.changes.captures import Captures
from agentd.changes.checkpoints import Checkpoints
from agentd.changes.files import Entry
from agentd.changes.following import TaskFollowing
from agentd.changes.holding import Held
from agentd.changes.host import HostWatch
from agentd.changes.readchanged import Recorded
from agentd.changes.review import Reviews
from agentd.changes.tracked import Tracked
from agentd.changes.walk import Baseline
from agentd.foundation.config import Config
from agentd.foundation.privdir import ensure_private_dir
from agentd.fs.identity import FsIdentity, call_as
from agentd.sandboxing import codebearing
from agentd.sessions.session import Session

log = logging.getLogger(__name__)

# The tool_name of the PermissionRequested that asks a person to keep held changes.
KEEP_PROMPT = "KeepChanges"
EVENTS, SCAN = "events", "scan"
_Key = tuple[str, FsIdentity | None]


def events_work() -> str:
    """ "" when fanotify can follow runs here, else why not: the daemon must be root with
    CAP_SYS_ADMIN (filesystem marks, each run's pid namespace) and CAP_DAC_READ_SEARCH
    (directory handles back to paths)."""
    if os.geteuid() != 0:
        return "the daemon is not root (fanotify filesystem marks need CAP_SYS_ADMIN)"
    try:
        os.close(fanotify.open_group())
    except OSError as exc:
        return f"{exc} (CAP_SYS_ADMIN, and fanotify_init allowed)"
    if why := resolve.handles_work("/"):
        return f"{why} (CAP_DAC_READ_SEARCH, and open_by_handle_at allowed)"
    return ""


class ChangeTracker:
    def __init__(self, config: Config, asker: Asker) -> None:
        self._dir = os.path.join(config.state_dir, "changes")
        self._saved_dir = os.path.join(self._dir, "baselines")
        self._saved: dict[_Key, str] = {}  # the signature of each baseline as saved
        self._loaded: set[_Key] = set()  # keys whose first walk was compared with a saved one
        self._asker = asker
        self._check = config.changes_check_seconds
        self._log_cap = config.changes_log_bytes
        self._table = codebearing.table()
        self._baselines: dict[_Key, Baseline] = {}
        self._locks: dict[_Key, asyncio.Lock] = {}
        self._active: dict[str, Tracked] = {}
        self._followers: set[asyncio.Future[Any]] = set()
        why_not = events_work() if config.changes_tracking != SCAN else "configured"
        self.mode = EVENTS if not why_not else SCAN
        journal = config.db_path
        unwatched = (journal, journal + "-wal", journal + "-shm")
        # Listed names anyone makes between two looks (events mode; a scan walks anyway).
        self._host = HostWatch(unwatched) if self.mode == EVENTS else None
        self._pending: dict[_Key, set[str]] = {}
        self._stale: set[_Key] = set()
        self._why_not = why_not if config.changes_tracking != SCAN else ""
        self._asked_events = config.changes_tracking == EVENTS
        # Where each writing call's checkpoint goes (set by the assembly; None: nowhere).
        self.checkpoints: Checkpoints | None = None
        # Review mode's change sets (set with the checkpoints; None: no review mode).
        self.reviews: Reviews | None = None
        self._tasks = TaskFollowing(self)
        # Each root's pre-images no other source has, taken at its first writing command.
        self.captures = Captures(config)

    def announce(self) -> None:
        """Say in the daemon's log how calls are followed (once it starts serving)."""
        if self.mode == EVENTS:
            log.info("what calls change is followed by fanotify events")
        elif self._asked_events:
            log.warning("changes_tracking = events, but %s: scanning instead", self._why_not)
        elif self._why_not:
            log.info(
                "what calls change is found by a walk at their start and end: %s", self._why_not
            )
        else:
            log.info("what calls change is found by a walk at their start and end (configured)")

    # ---- before a run
    def prepare(self, session: Session, identity: FsIdentity | None) -> None:
        """Build the baselines of a new session's roots in the background, so that its
        first writing call does not wait for the walk (it waits only for what is left)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        for root in {os.path.realpath(r) for r in session.workspace_roots}:
            if (root, identity) in self._baselines:
                continue
            future = asyncio.ensure_future(self._refresh(root, identity))
            self._followers.add(future)
            future.add_done_callback(self._prepared)

    def _prepared(self, future: asyncio.Future[Any]) -> None:
        self._followers.discard(future)
        if not future.cancelled() and (exc := future.exception()) is not None:
            log.warning("cannot index a workspace's code-bearing files: %s", exc)

    async def begin(self, session: Session, identity: FsIdentity | None) -> Tracked:
        """Follow a run about to start: the roots' baselines fresh, its group and log."""
        roots = [os.path.realpath(r) for r in session.workspace_roots]
        tracked = Tracked(secrets.token_hex(8), session.id, roots, identity)
        tracked.log_cap = self._log_cap
        for root in roots:
            await self._refresh(root, identity)
            await self._capture(root, identity)
        if self.mode == EVENTS:
            try:
                self._open_log(tracked)
            except OSError as exc:
                log.warning("cannot follow run %s by events (%s): it is scanned", tracked.id, exc)
                tracked.close()
                tracked = Tracked(tracked.id, session.id, roots, identity)
        self._active[tracked.id] = tracked
        return tracked

    def _open_log(self, tracked: Tracked) -> None:
        ensure_private_dir(self._dir, "change logs")
        tracked.log_path = os.path.join(self._dir, f"{tracked.id}.log")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        tracked.log = os.open(tracked.log_path, flags, 0o600)
        tracked.group = fanotify.open_group()
        marked: set[int] = set()
        for root in tracked.roots:
            fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                dev = os.fstat(fd).st_dev
                if dev not in marked:
                    fanotify.mark_filesystem(tracked.group, fd)
                    marked.add(dev)
            finally:
                os.close(fd)

    async def _refresh(self, root: str, identity: FsIdentity | None) -> None:
        """Make the baseline of (`root`, `identity`) current: the first time, and when
        the host watch lost events, or in scan mode, by a walk of the whole tree; else by
        a look at what it knows and at the listed names that appeared meanwhile.

        What differs from the last known good with no event explaining it (a write
        through a mapping, events lost, a daemon restart) is not adopted: it stays a
        suspect, held at the next hold (known.py)."""
        key = (root, identity)
        await self._host_news(root)
        async with self._lock(key):
            skip = await self._touched_by_others(root)
            old = self._baselines.get(key)
            also = self._pending.pop(key, set())
            if (captured := self.captures.get(key)) is not None:
                if key in self._stale:  # what changed is not known: taken again
                    await self.captures.drop(key)
                else:  # changed outside the agent's running commands since
                    captured.forget(also - skip)
            uid = identity.uid if identity is not None else None
            if old is None or key in self._stale or self.mode == SCAN:
                stale = key in self._stale
                self._stale.discard(key)
                fresh = await asyncio.to_thread(call_as, identity, walk.scan, root, self._table)
                for rel in skip:  # what a running command touched is not known good
                    fresh.forget(rel)
                    if old is not None and rel in old.entries:
                        fresh.record(rel, old.entries[rel], old.reasons[rel])
                if old is None:
                    saved = await asyncio.to_thread(persist.load, self._saved_path(key), root)
                    if saved is not None:
                        self._loaded.add(key)
                        known.settle(saved, fresh, set(), skip, known.WHILE_AWAY, new_too=True)
                elif stale:
                    known.settle(old, fresh, also, skip, known.UNSEEN, new_too=True)
                elif old.suspects:
                    fresh.suspects.update(old.suspects)
            else:
                unsure = frozenset(
                    await asyncio.to_thread(known.open_for_writing, uid) if old.entries else ()
                )
                fresh = await asyncio.to_thread(
                    call_as, identity, walk.rescan, old, self._table, skip, also, unsure
                )
                known.settle(old, fresh, also, skip, known.UNSEEN, new_too=False)
            self._baselines[key] = fresh
            if self._host is not None:
                self._host.learn({os.path.basename(rel) for rel in fresh.entries})
            await self._save(key, fresh)

    async def _capture(self, root: str, identity: FsIdentity | None) -> None:
        """What no other source would give as a pre-image, copied once per root and
        identity before its first writing command (captures.py)."""
        if self.checkpoints is None or self._host is None:
            return
        key = (root, identity)
        await self.captures.take(key, self._host, self._lock(key))

    async def reap(self, session: Session) -> None:
        """A session is reaped: the captures of its roots go (the next writing command
        on one takes it again)."""
        await self.captures.reap({os.path.realpath(r) for r in session.workspace_roots})

    def _saved_path(self, key: _Key) -> str:
        root, identity = key
        who = "" if identity is None else f"{identity.uid}:{identity.gid}:{identity.groups}"
        return persist.path_for(self._saved_dir, root, who)

    async def _save(self, key: _Key, baseline: Baseline) -> None:
        """Keep the root's known good in the state when it changed (persist.py)."""
        sig = persist.signature(baseline)
        if self._saved.get(key) == sig:
            return
        try:
            await asyncio.to_thread(self._write_saved, key, baseline)
        except Exception as exc:  # noqa: BLE001 - a state dir gone wrong: say it, go on
            log.warning("cannot keep the known-good files of %s in the state: %s", key[0], exc)
            return
        self._saved[key] = sig

    def _write_saved(self, key: _Key, baseline: Baseline) -> None:
        ensure_private_dir(self._dir, "change logs")
        ensure_private_dir(self._saved_dir, "known-good files")
        persist.save(self._saved_path(key), baseline)

    async def _host_news(self, root: str) -> None:
        """What the host watch saw since the last look, handed to each baseline it
        concerns; lost events make the baselines of the roots that lost them walk again."""
        if self._host is None:
            return
        self._host.watch(root)  # before any walk of it: what happens after is seen
        await self._host.sync()
        roots = sorted({r for r, _ in self._baselines} | {root})
        paths, missed = await asyncio.to_thread(self._host.take, roots)
        stale = {key for key in self._baselines if key[0] in missed}
        if stale:
            log.info(
                "file events were lost: %d workspace(s) are walked again, and every "
                "code-bearing difference no event explains is held",
                len({root for root, _ in stale}),
            )
            self._stale |= stale
        for path in paths:
            for key in self._baselines:
                prefix = key[0].rstrip("/") + "/"
                if path.startswith(prefix):
                    self._pending.setdefault(key, set()).add(path[len(prefix) :])

    async def _touched_by_others(self, root: str, but: str = "") -> set[str]:
        """Paths below `root` that runs still going (but run `but`) have touched
        (relative)."""
        out: set[str] = set()
        prefix = root.rstrip("/") + "/"
        for other in list(self._active.values()):
            if root not in other.roots or other.id == but:
                continue
            paths = await asyncio.to_thread(other.touched_paths)
            out |= {p[len(prefix) :] for p in paths if p.startswith(prefix)}
        return out

    def _lock(self, key: _Key) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    # ---- checkpoints
    def running(self, session_id: str) -> list[str]:
        """The runs of a session still followed (commands and tasks that may write)."""
        return [t.id for t in self._active.values() if t.session_id == session_id]

    async def known_before(
        self, tracked: Tracked, into: dict[str, Entry] | None = None
    ) -> dict[str, Entry]:
        """The known good content of the paths the run touched so far (its pre-images
        where no checkpoint has them), taken before a hold can change what is known;
        what `into` holds already stays."""
        out = into if into is not None else {}
        if self.checkpoints is None:
            return out
        paths = await asyncio.to_thread(tracked.touched_paths)
        for root in tracked.roots:
            baseline = self._baselines.get((root, tracked.identity))
            if baseline is None or not baseline.entries:
                continue
            prefix = root.rstrip("/") + "/"
            for path in paths:
                if not path.startswith(prefix) or path in out:
                    continue
                if (entry := baseline.entries.get(path[len(prefix) :])) is not None:
                    out[path] = entry
        return out

    async def checkpoint(
        self,
        session: Session,
        tracked: Tracked,
        known: dict[str, Entry],
        *,
        tool_use_id: str,
        tool_name: str,
        action: str = "call",
    ) -> Recorded:
        """Record what the run changed (checkpoints.py); a failure is logged, never the
        call's."""
        if self.checkpoints is None or not tracked.events:
            return Recorded(kept=False)
        try:
            captured = {
                root: got
                for root in tracked.roots
                if (got := self.captures.get((root, tracked.identity))) is not None
            }
            row = await self.checkpoints.record_run(
                session,
                tracked,
                known,
                tool_use_id=tool_use_id,
                tool_name=tool_name,
                action=action,
                captured=captured,
            )
        except OSError as exc:  # the workspace or the state disk, not a bug: one line
            log.warning("session %s: no checkpoint of call %s: %s", session.id, tool_use_id, exc)
        except Exception:
            log.exception("session %s: the checkpoint of call %s failed", session.id, tool_use_id)
        else:
            return Recorded(kept=True, row=row)
        return Recorded(kept=False)

    # ---- after (or while) a run
    async def hold(self, tracked: Tracked, *, final: bool = True) -> list[Held]:
        """Revert the code-bearing changes the run made since the last hold; they are
        returned, with what the run wrote, for `decide`. `final`: the run has ended, so
        its log must end with the reader's end mark (a reader killed before it drained
        may have missed events: then the roots are scanned)."""
        taken = await asyncio.to_thread(tracked.take)
        by_events = tracked.events and taken.complete and (taken.ended or not final)
        if tracked.events and not taken.complete:
            log.info("run %s lost file events: its workspaces are walked", tracked.id)
        held: list[Held] = []
        uid = tracked.identity.uid if tracked.identity is not None else None
        for root in tracked.roots:
            key = (root, tracked.identity)
            others: set[str] = set()
            restated: set[str] = set()
            baseline = self._baselines.get(key)
            if by_events and baseline is not None and baseline.entries:
                restated = await asyncio.to_thread(
                    call_as, tracked.identity, matching.restated, baseline, taken, uid
                )
            if restated:  # who else wrote meanwhile: the person (host watch), other runs
                await self._host_news(root)
                others = await self._touched_by_others(root, but=tracked.id)
            async with self._lock(key):
                baseline = self._baselines.get(key)
                if baseline is None:
                    continue
                made = [p[len(root) + 1 :] for p in taken.made_dirs if p.startswith(root + "/")]
                if by_events:
                    others |= self._pending.get(key, set())
                    restated -= others
                    items = await asyncio.to_thread(
                        call_as,
                        tracked.identity,
                        matching.by_events,
                        baseline,
                        self._table,
                        taken,
                        restated,
                    )
                else:
                    items, new_dirs = await asyncio.to_thread(
                        call_as, tracked.identity, matching.by_walk, baseline, self._table
                    )
                    made += new_dirs
                await asyncio.to_thread(
                    call_as,
                    tracked.identity,
                    holding.revert_all,
                    baseline,
                    self._table,
                    items,
                    made,
                )
                for item in items:  # said after the revert: a note there means "not put back"
                    if unseen := baseline.suspects.get(item.rel):
                        item.note = f"{item.note}; {unseen}" if item.note else unseen
                baseline.suspects.clear()
            held += items
        for item in held:
            log.warning(
                "session %s: held %s made by run %s: %s",
                tracked.session_id,
                item.describe(),
                tracked.id,
                item.note or "reverted",
            )
        return held

    async def decide(
        self,
        session: Session,
        tracked: Tracked,
        items: list[Held],
        *,
        made_by: str,
        tool_use_id: str,
        cancelled: asyncio.Event | None = None,
    ) -> str:
        """Ask a person whether to keep `items` (reverted by `hold`); re-apply them on a
        yes. The text tells the model what happened."""
        if not items:
            return ""
        refused = await self.ask_person(
            session,
            tool_use_id=tool_use_id,
            tool_name=KEEP_PROMPT,
            tool_input=prompt.prompt_input(items, made_by),
            reasons=prompt.prompt_reasons(items, made_by),
            cancelled=cancelled,
        )
        if refused:
            return prompt.notice(items, made_by, f"They stay reverted: {refused}.")
        failed = await asyncio.to_thread(call_as, tracked.identity, self._reapply, items)
        for key, baseline in list(self._baselines.items()):
            if any(item.root == key[0] for item in items):
                await self._save(key, baseline)
        verdict = "A person approved them: they are in place now, as the command wrote them."
        if failed:
            verdict += " Except: " + "; ".join(failed) + "."
        return prompt.notice(items, made_by, verdict)

    async def ask_person(
        self,
        session: Session,
        *,
        tool_use_id: str,
        tool_name: str,
        tool_input: dict[str, Any],
        reasons: list[str],
        cancelled: asyncio.Event | None = None,
    ) -> str:
        """Ask the session's attached terminals about a change that makes code run later
        (held changes, a restore of such files): "" when a person allowed it, else why
        not (nobody to ask is a no, never a yes)."""
        if session.permission_mode == "dontAsk":
            return "the session is in dontAsk mode, where what needs a person is refused"
        if not self._asker.has_listeners(session.id):
            return f"nobody was attached to session {session.label} to approve them"
        answer = await self._asker.ask(
            session.id,
            tool_use_id=tool_use_id,
            tool_name=tool_name,
            tool_input=tool_input,
            reasons=reasons,
            cancelled=cancelled,
        )
        if answer.decision == "allow":
            return ""
        return {
            "timeout": "nobody answered in time",
            "cancelled": "the call was cancelled while waiting",
        }.get(answer.decided_by, f"{answer.decided_by} refused them")

    def _reapply(self, items: list[Held]) -> list[str]:
        failed: list[str] = []
        for item in items:
            if not item.reappliable:
                failed.append(f"{item.rel} cannot be applied ({item.note or 'not kept'})")
                continue
            baseline = next(
                (b for (root, _), b in self._baselines.items() if root == item.root), None
            )
            try:
                if baseline is not None:
                    holding.reapply(item, baseline, self._table)
            except (OSError, ValueError) as exc:
                failed.append(f"{item.rel} could not be applied ({exc})")
        return failed

    def stop(self) -> None:
        """The daemon stops: the host watch with it (runs and tasks end on their own)."""
        if self._host is not None:
            self._host.stop()

    def close(self, tracked: Tracked, *, keep_log: bool = False) -> None:
        self._active.pop(tracked.id, None)
        tracked.close(keep_log=keep_log)

    # ---- background tasks (following.py)
    async def readopt(
        self,
        session: Session,
        identity: FsIdentity | None,
        done: asyncio.Future[Any],
        *,
        task_id: str,
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        """Follow again a task a previous daemon left running (following.py)."""
        await self._tasks.readopt(
            session,
            identity,
            done,
            task_id=task_id,
            made_by=made_by,
            tool_use_id=tool_use_id,
            notify=notify,
        )

    def sweep(self, keep: set[str]) -> None:
        """Remove change logs of runs no one follows (a previous daemon's)."""
        self._tasks.sweep(keep)

    def follow(
        self,
        session: Session,
        tracked: Tracked,
        done: asyncio.Future[Any],
        *,
        task_id: str,
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        """Check a background task while it runs and at its end (following.py)."""
        self._tasks.follow(
            session,
            tracked,
            done,
            task_id=task_id,
            made_by=made_by,
            tool_use_id=tool_use_id,
            notify=notify,
        )
