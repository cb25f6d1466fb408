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
import contextlib
import logging
import os
import secrets
from collections.abc import Callable
from typing import Any

from agentd.changes import codebearing, fanotify, files, holding, walk
from agentd.changes.holding import Held
from agentd.changes.tracked import Tracked
from agentd.changes.walk import Baseline
from agentd.foundation.config import Config
from agentd.foundation.privdir import ensure_private_dir
from agentd.fs.identity import FsIdentity, call_as
from agentd.permissions.asker import Asker
from agentd.sessions.session import Session

log = logging.getLogger(__name__)

# The tool_name of the PermissionRequested that asks a person to keep held changes.
KEEP_PROMPT = "KeepChanges"
EVENTS, SCAN = "events", "scan"
# Held changes listed one by one in a request's input (all are counted, and decided).
PROMPT_ITEMS = 100
_Key = tuple[str, FsIdentity | None]


def events_work() -> str:
    """ "" when fanotify can follow runs here, else why not."""
    if os.geteuid() != 0:
        return "the daemon is not root (fanotify filesystem marks need CAP_SYS_ADMIN)"
    try:
        os.close(fanotify.open_group())
    except OSError as exc:
        return str(exc)
    return ""


class ChangeTracker:
    def __init__(self, config: Config, asker: Asker) -> None:
        self._dir = os.path.join(config.state_dir, "changes")
        self._asker = asker
        self._check = config.changes_check_seconds
        self._table = codebearing.table()
        self._baselines: dict[_Key, Baseline] = {}
        self._locks: dict[_Key, asyncio.Lock] = {}
        self._active: dict[str, Tracked] = {}
        self._followers: set[asyncio.Future[Any]] = set()
        why_not = events_work() if config.changes_tracking != SCAN else "configured"
        self.mode = EVENTS if not why_not else SCAN
        if config.changes_tracking == EVENTS and why_not:
            log.warning("changes_tracking = events, but %s: scanning instead", why_not)
        elif why_not and config.changes_tracking == "auto":
            log.info("change tracking scans the workspace after each call: %s", why_not)

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
        for root in roots:
            await self._refresh(root, identity)
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
        key = (root, identity)
        async with self._lock(key):
            skip = await self._touched_by_others(root)
            old = self._baselines.get(key)
            if old is None:
                fresh = await asyncio.to_thread(call_as, identity, walk.scan, root, self._table)
            else:
                fresh = await asyncio.to_thread(
                    call_as, identity, walk.rescan, old, self._table, skip
                )
            self._baselines[key] = fresh

    async def _touched_by_others(self, root: str) -> set[str]:
        """Paths below `root` that runs still going have touched (relative)."""
        out: set[str] = set()
        prefix = root.rstrip("/") + "/"
        for other in list(self._active.values()):
            if root not in other.roots:
                continue
            if other.events:
                await asyncio.to_thread(other.collect)
            out |= {p[len(prefix) :] for p in other.changes.paths() if p.startswith(prefix)}
        return out

    def _lock(self, key: _Key) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    # ---- after (or while) a run
    async def hold(self, tracked: Tracked, *, final: bool = True) -> list[Held]:
        """Revert the code-bearing changes the run made since the last hold; they are
        returned, with what the run wrote, for `decide`. `final`: the run has ended, so
        its log must end with the reader's end mark (a reader killed before it drained
        may have missed events: then the roots are scanned)."""
        if tracked.events:
            await asyncio.to_thread(tracked.collect)
        touched = tracked.changes.take_touched()
        moves = tracked.take_moves()
        whole = tracked.changes.complete and (tracked.changes.ended or not final)
        by_events = tracked.events and whole
        held: list[Held] = []
        for root in tracked.roots:
            key = (root, tracked.identity)
            async with self._lock(key):
                baseline = self._baselines.get(key)
                if baseline is None:
                    continue
                made = [p[len(root) + 1 :] for p in tracked.changes.made_dirs() if p != root]
                if by_events:
                    items = await asyncio.to_thread(
                        call_as,
                        tracked.identity,
                        holding.find,
                        baseline,
                        self._table,
                        touched,
                        moves,
                        tracked.changes.existed_before,
                    )
                else:
                    items, new_dirs = await asyncio.to_thread(
                        call_as, tracked.identity, self._scan_changes, baseline
                    )
                    made += new_dirs
                await asyncio.to_thread(
                    call_as, tracked.identity, self._revert, baseline, items, made
                )
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

    def _scan_changes(self, baseline: Baseline) -> tuple[list[Held], list[str]]:
        """Without events (or with some lost): a walk of the root, compared with its
        baseline, says which code-bearing files differ; and the code-bearing
        directories that are new (to remove if reverting empties them)."""
        now = walk.scan(baseline.root, self._table)
        new_dirs = [u for u in now.units if u not in baseline.units]
        new_dirs += [g for g in now.git_dirs if g not in baseline.git_dirs]
        touched = {
            os.path.join(baseline.root, rel)
            for rel in set(now.entries) | set(baseline.entries)
            if not (now.entries.get(rel) and now.entries[rel].same(baseline.entries.get(rel)))
        }

        def existed(path: str) -> bool | None:
            return path[len(baseline.root) + 1 :] in baseline.entries

        return holding.find(baseline, self._table, touched, [], existed), new_dirs

    def _revert(self, baseline: Baseline, items: list[Held], made: list[str]) -> None:
        for item in items:
            try:
                holding.revert(item)
            except OSError as exc:
                item.note = f"it could not be put back ({exc.strerror or exc})"
                if item.change != holding.DELETED and item.change != holding.MOVED:
                    # What cannot be restored (a full disk) at least does not stay.
                    with contextlib.suppress(OSError):
                        files.remove(item.root, item.rel)
                        item.note += "; removed instead"
        # Directories the run made that only held what was reverted go too (a new
        # .vscode/, .git/hooks/, and their parents the run made), nothing else it made.
        made_set = set(made)
        empty: set[str] = {
            rel
            for rel in made
            if os.path.basename(rel) == ".git"
            or holding.code_bearing(baseline, self._table, rel, is_dir=True)
            or holding.code_bearing(baseline, self._table, f"{rel}/x")  # hooks/, units
        }
        for item in items:
            parent = os.path.dirname(item.moved_to or item.rel)
            while parent in made_set:
                empty.add(parent)
                parent = os.path.dirname(parent)
        holding.remove_made_dirs(baseline.root, sorted(empty))

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
        refused = ""
        if session.permission_mode == "dontAsk":
            refused = "the session is in dontAsk mode, where what needs a person is refused"
        elif not self._asker.has_listeners(session.id):
            refused = f"nobody was attached to session {session.id} to approve them"
        else:
            answer = await self._asker.ask(
                session.id,
                tool_use_id=tool_use_id,
                tool_name=KEEP_PROMPT,
                tool_input=_prompt_input(items, made_by),
                reasons=_prompt_reasons(items, made_by),
                suggested_rule="",
                cancelled=cancelled,
            )
            if answer.decision != "allow":
                refused = {
                    "timeout": "nobody answered in time",
                    "cancelled": "the call was cancelled while waiting",
                }.get(answer.decided_by, f"{answer.decided_by} refused them")
        if refused:
            return _notice(items, made_by, f"They stay reverted: {refused}.")
        failed = await asyncio.to_thread(call_as, tracked.identity, self._reapply, items)
        verdict = "A person approved them: they are in place now, as the command wrote them."
        if failed:
            verdict += " Except: " + "; ".join(failed) + "."
        return _notice(items, made_by, verdict)

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

    def close(self, tracked: Tracked, *, keep_log: bool = False) -> None:
        self._active.pop(tracked.id, None)
        tracked.close(keep_log=keep_log)

    # ---- background tasks
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
        """Follow again a task a previous daemon left running: its reader has gone on
        writing its log. What the task touched before now is not known good, so it is
        left out of the baseline this daemon builds: a file it made is held, one it
        changed is held as changed from an unknown content."""
        path = os.path.join(self._dir, f"{task_id}.log")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return  # started by a daemon without events: nothing to read
        roots = [os.path.realpath(r) for r in session.workspace_roots]
        tracked = Tracked(task_id, session.id, roots, identity, log_path=path, log=fd)
        tracked.events = True
        await asyncio.to_thread(tracked.collect)
        for root in roots:
            await self._refresh(root, identity)
            baseline = self._baselines[(root, identity)]
            prefix = root.rstrip("/") + "/"
            for touched in tracked.changes.paths():
                if touched.startswith(prefix):
                    baseline.forget(touched[len(prefix) :])
        self._active[tracked.id] = tracked
        self._follow_future(session, tracked, done, made_by, tool_use_id, notify)

    def sweep(self, keep: set[str]) -> None:
        """Remove change logs of runs no one follows (a previous daemon's)."""
        try:
            names = os.listdir(self._dir)
        except OSError:
            return
        for name in names:
            if name.endswith(".log") and name.removesuffix(".log") not in keep:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self._dir, name))

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
        """Check a background task every changes_check_seconds while it runs and once at
        its end; a person is asked without holding the task up, and the model told
        through `notify(session_id, text)`."""
        if tracked.log_path:
            with contextlib.suppress(OSError):
                renamed = os.path.join(self._dir, f"{task_id}.log")
                os.rename(tracked.log_path, renamed)
                tracked.log_path = renamed
        self._follow_future(session, tracked, done, made_by, tool_use_id, notify)

    def _follow_future(
        self,
        session: Session,
        tracked: Tracked,
        done: asyncio.Future[Any],
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        future = asyncio.ensure_future(
            self._follow(session, tracked, done, made_by, tool_use_id, notify)
        )
        self._followers.add(future)
        future.add_done_callback(self._followers.discard)

    async def _follow(
        self,
        session: Session,
        tracked: Tracked,
        done: asyncio.Future[Any],
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        try:
            while True:
                ended = done.done()
                if not ended:
                    await asyncio.wait({done}, timeout=self._check)
                    ended = done.done()
                items = await self.hold(tracked, final=ended)
                if items:
                    decided = asyncio.ensure_future(
                        self._decide_later(session, tracked, items, made_by, tool_use_id, notify)
                    )
                    self._followers.add(decided)
                    decided.add_done_callback(self._followers.discard)
                if ended:
                    break
        except asyncio.CancelledError:
            # The daemon is stopping and the task lives on: its log stays for the next.
            self.close(tracked, keep_log=True)
            raise
        except Exception:
            log.exception("following the changes of task run %s failed", tracked.id)
        self.close(tracked)

    async def _decide_later(
        self,
        session: Session,
        tracked: Tracked,
        items: list[Held],
        made_by: str,
        tool_use_id: str,
        notify: Callable[[str, str], None],
    ) -> None:
        text = await self.decide(session, tracked, items, made_by=made_by, tool_use_id=tool_use_id)
        notify(session.id, text)


def made_by(command: str) -> str:
    """How a held change names the Bash command that made it."""
    shown = command if len(command) <= 160 else command[:157] + "..."
    return f"the Bash command `{shown}`"


def _prompt_input(items: list[Held], made_by: str) -> dict[str, Any]:
    first = items[0].path
    more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
    return {
        "file_path": first + more,
        "made_by": made_by,
        "changes": [
            {"path": i.path, "change": i.change, "reason": i.reason, "note": i.note}
            | ({"moved_to": os.path.join(i.root, i.moved_to)} if i.moved_to else {})
            for i in items[:PROMPT_ITEMS]
        ],
        "count": len(items),
        "diff": holding.diff(items),
    }


def _prompt_reasons(items: list[Held], made_by: str) -> list[str]:
    lines = [
        f"keep these changes? {made_by} changed files that make code run later, outside "
        "the sandbox, as you; they were reverted, and are applied exactly as shown only "
        "if you say yes:"
    ]
    groups: dict[tuple[str, str, str], list[Held]] = {}
    for item in items:
        key = (os.path.dirname(item.rel), item.change, item.reason)
        groups.setdefault(key if not item.note else (item.rel, "", ""), []).append(item)
    for members in groups.values():
        first = members[0]
        tool = first.reason.split(":", 1)[0]
        if len(members) > 3:
            where = os.path.dirname(first.rel) or "."
            lines.append(f"{where}/: {len(members)} files {first.change}, read by {tool}")
            continue
        for item in members:
            note = f" ({item.note})" if item.note else ""
            lines.append(f"{item.describe()}, read by {tool}{note}")
    return lines


def _notice(items: list[Held], made_by: str, verdict: str) -> str:
    listed = "\n".join(
        f"  - {i.path} ({'moved to ' + i.moved_to if i.moved_to else i.change}): "
        f"{i.reason}" + (f" [{i.note}]" if i.note else "")
        for i in items
    )
    return (
        f"agentd held {len(items)} change(s) {made_by} made to files that make code run "
        "later outside the sandbox (git configs and hooks, editor and agent settings, "
        f"package-manager and shell configuration). They were reverted at once:\n{listed}\n"
        f"{verdict} Do not try to make these changes another way; if one is needed, ask "
        "the user to make or approve it."
    )
