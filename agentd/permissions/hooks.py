"""PreToolUse and PostToolUse command hooks, speaking Claude Code's hook protocol.

A hook is a shell command from a workspace's settings whose exact content a person
trusted (trust.py). It runs inside the session's own sandbox, as any Bash call does:
as the session's sandbox uid, in a fresh pid namespace, with the workspace writable,
secrets hidden and the network as the session allows; never as the daemon's user.
Trusting a settings file trusts its text, not the files a hook command names
(`./scripts/check.sh`), which any sandboxed command may have rewritten since; run
outside, such a hook would hand that command the daemon's privileges. It runs in the
session's cwd, with $CLAUDE_PROJECT_DIR set, and the event as JSON on stdin (a pipe the
daemon owns):

    {session_id, transcript_path, cwd, hook_event_name, tool_name, tool_input,
     tool_use_id, permission_mode, [tool_response]}

and answers through its exit code and stdout:

    exit 0          fine; stdout may hold JSON (below)
    exit 2          block: for PreToolUse the call is denied with stderr as the reason;
                    for PostToolUse stderr is added to the result for the model
    other non-zero  a non-blocking error: logged, the call goes on
    timeout         the same as a non-blocking error (process group killed): a stuck
                    hook must not decide a call, and the normal rules still apply

JSON on stdout: `hookSpecificOutput: {hookEventName, permissionDecision: allow|deny|ask,
permissionDecisionReason, updatedInput}`; the older top-level `decision: approve|block`
with `reason`; `continue: false` with `stopReason` (treated as a deny); and for
PostToolUse `decision: block` + `reason` or `hookSpecificOutput.additionalContext`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentd.permissions.decision import Behavior
from agentd.permissions.settings import HookCommand, HookGroup
from agentd.runs import launch
from agentd_sandbox import PathGone, SandboxPolicy, SandboxUnavailable, spawn

# The sandbox a hook runs in: the session's policy, built when the hook runs.
PolicyFactory = Callable[[], SandboxPolicy]

log = logging.getLogger(__name__)

# Bytes kept of a hook's stdout and stderr; a chatty hook must not grow the daemon.
MAX_HOOK_OUTPUT = 256 * 1024


@dataclass(frozen=True, slots=True)
class HookRun:
    hook: HookCommand
    exit_code: int | None  # None: timed out or could not start
    stdout: str
    stderr: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class PreVerdict:
    """What the PreToolUse hooks said together; behavior None when none decided."""

    behavior: Behavior | None = None
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    hook: str = ""  # the command that decided, for the journal


def matching(groups: list[HookGroup], tool_name: str) -> list[HookCommand]:
    seen: set[str] = set()
    out: list[HookCommand] = []
    for group in groups:
        if group.matches(tool_name):
            for hook in group.hooks:
                # Claude Code runs an identical command once per event.
                if hook.command not in seen:
                    seen.add(hook.command)
                    out.append(hook)
    return out


async def _read_bounded(stream: asyncio.StreamReader | None) -> bytes:
    if stream is None:
        return b""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < MAX_HOOK_OUTPUT:
            kept.extend(chunk[: MAX_HOOK_OUTPUT - len(kept)])
    return bytes(kept)


def _write_all(fd: int, data: bytes) -> None:
    """Feed the hook's stdin; a hook that exits without reading ends it with EPIPE."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
    finally:
        os.close(fd)


async def run_hook(hook: HookCommand, payload: dict[str, Any], sandbox: PolicyFactory) -> HookRun:
    """Run one hook command in the session's sandbox with `payload` on stdin; kill the
    whole sandbox on timeout. A start whose sandbox failed before bash ran (a path bwrap
    was to mount vanished after the policy listed it) is started again, as a Bash call's
    is (agentd/runs/launch.py): otherwise a deny hook would be skipped as a failure."""
    return await launch.start(lambda: _run_once(hook, payload, sandbox), f"hook {hook.command!r}")


async def _run_once(
    hook: HookCommand, payload: dict[str, Any], sandbox: PolicyFactory
) -> tuple[HookRun, bool]:
    """The hook run once, and whether bash ran (else its sandbox never started)."""
    try:
        # On a thread: the policy walks the workspace and may make its namespace.
        policy = copy.deepcopy(await asyncio.to_thread(sandbox))
    except OSError as exc:
        return HookRun(hook, None, "", "", f"could not prepare its sandbox: {exc}"), True
    if hook.project_dir:
        policy.env = {**policy.env, "CLAUDE_PROJECT_DIR": hook.project_dir}
    if not (policy.cwd and os.path.isdir(policy.cwd)):
        policy.cwd = hook.project_dir or None
    policy.limits.wall_seconds = hook.timeout + 5  # a backstop; our own timeout comes first
    stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
    # bash marks that it runs (one byte on a pipe only the daemon reads) before the hook's
    # command, which cannot undo it: no byte means the sandbox never ran it.
    started_r, started_w = os.pipe2(os.O_CLOEXEC)
    # bash reads the command from its argument, stdin from the fd the daemon passed in.
    script = (
        f"exec 0<&{stdin_r} {stdin_r}<&-; printf x >&{started_w}; exec {started_w}>&-\n"
        f"{hook.command}"
    )
    try:
        proc = await spawn(policy, ["/bin/bash", "-c", script], pass_fds=(stdin_r, started_w))
    except PathGone as exc:
        # A path the policy named went before the start: planned again, as a Bash call is.
        os.close(stdin_w)
        os.close(started_r)
        return HookRun(hook, None, "", "", f"could not start in the sandbox: {exc}"), False
    except (SandboxUnavailable, OSError) as exc:
        os.close(stdin_w)
        os.close(started_r)
        return HookRun(hook, None, "", "", f"could not start in the sandbox: {exc}"), True
    finally:
        os.close(stdin_r)
        os.close(started_w)
    try:
        return await _talk(hook, payload, proc, stdin_w, started_r)
    finally:
        os.close(started_r)


async def _talk(
    hook: HookCommand, payload: dict[str, Any], proc: Any, stdin_w: int, started_r: int
) -> tuple[HookRun, bool]:
    feeding = asyncio.ensure_future(
        asyncio.to_thread(_write_all, stdin_w, json.dumps(payload).encode())
    )

    async def talk() -> tuple[bytes, bytes]:
        out, err = await asyncio.gather(_read_bounded(proc.stdout), _read_bounded(proc.stderr))
        await proc.wait()
        return out, err

    try:
        out, err = await asyncio.wait_for(talk(), hook.timeout)
    except (TimeoutError, asyncio.CancelledError) as exc:
        proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 5)
        if isinstance(exc, asyncio.CancelledError):
            raise
        return HookRun(hook, None, "", "", f"timed out after {hook.timeout:g}s (killed)"), True
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(feeding), 5)
    os.set_blocking(started_r, False)
    try:
        started = os.read(started_r, 1) == b"x"
    except BlockingIOError:  # pragma: no cover - every writer has exited by now
        started = True
    text = (out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
    return HookRun(hook, proc.returncode, *text), started


def _json_out(run: HookRun) -> dict[str, Any] | None:
    text = run.stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def _log_failure(run: HookRun, event: str) -> None:
    if run.error:
        log.warning("%s hook %r (%s): %s", event, run.hook.command, run.hook.source, run.error)
    elif run.exit_code not in (0, 2):
        log.warning(
            "%s hook %r (%s) failed with exit %s (non-blocking): %s",
            event,
            run.hook.command,
            run.hook.source,
            run.exit_code,
            run.stderr.strip()[:500],
        )


def pre_verdict(run: HookRun) -> PreVerdict:
    """One PreToolUse hook's answer."""
    _log_failure(run, "PreToolUse")
    if run.exit_code == 2:
        reason = run.stderr.strip() or "blocked by a PreToolUse hook"
        return PreVerdict(Behavior.DENY, reason, hook=run.hook.command)
    if run.exit_code != 0:
        return PreVerdict()
    body = _json_out(run)
    if body is None:
        return PreVerdict()
    if body.get("continue") is False:
        reason = str(body.get("stopReason") or "stopped by a PreToolUse hook")
        return PreVerdict(Behavior.DENY, reason, hook=run.hook.command)
    specific = body.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision"):
        said = specific.get("permissionDecision")
        reason = str(specific.get("permissionDecisionReason") or "")
        updated = specific.get("updatedInput")
        if said not in tuple(Behavior):
            log.warning("PreToolUse hook %r: unknown permissionDecision %r", run.hook.command, said)
            return PreVerdict()
        return PreVerdict(
            Behavior(said),
            reason,
            updated if isinstance(updated, dict) else None,
            hook=run.hook.command,
        )
    if isinstance(specific, dict) and isinstance(specific.get("updatedInput"), dict):
        return PreVerdict(None, "", specific["updatedInput"], hook=run.hook.command)
    legacy = body.get("decision")
    if legacy in ("approve", "block"):
        behavior = Behavior.ALLOW if legacy == "approve" else Behavior.DENY
        return PreVerdict(behavior, str(body.get("reason") or ""), hook=run.hook.command)
    return PreVerdict()


def combine(verdicts: list[PreVerdict]) -> PreVerdict:
    """Several hooks: a deny beats an ask beats an allow; the last updatedInput wins."""
    for behavior in (Behavior.DENY, Behavior.ASK, Behavior.ALLOW):
        for verdict in verdicts:
            if verdict.behavior == behavior:
                updated = next(
                    (v.updated_input for v in reversed(verdicts) if v.updated_input), None
                )
                return PreVerdict(behavior, verdict.reason, updated, verdict.hook)
    updated = next((v.updated_input for v in reversed(verdicts) if v.updated_input), None)
    return PreVerdict(updated_input=updated)


async def run_pre_hooks(
    groups: list[HookGroup], tool_name: str, payload: dict[str, Any], sandbox: PolicyFactory
) -> PreVerdict:
    hooks = matching(groups, tool_name)
    if not hooks:
        return PreVerdict()
    runs = await asyncio.gather(*(run_hook(h, payload, sandbox) for h in hooks))
    return combine([pre_verdict(r) for r in runs])


async def run_post_hooks(
    groups: list[HookGroup], tool_name: str, payload: dict[str, Any], sandbox: PolicyFactory
) -> list[str]:
    """Notes for the model from PostToolUse hooks (exit 2's stderr, block reasons, context)."""
    hooks = matching(groups, tool_name)
    if not hooks:
        return []
    notes: list[str] = []
    for run in await asyncio.gather(*(run_hook(h, payload, sandbox) for h in hooks)):
        _log_failure(run, "PostToolUse")
        if run.exit_code == 2:
            if text := run.stderr.strip():
                notes.append(text)
            continue
        body = _json_out(run) if run.exit_code == 0 else None
        if body is None:
            continue
        if body.get("decision") == "block" and body.get("reason"):
            notes.append(str(body["reason"]))
        specific = body.get("hookSpecificOutput")
        if isinstance(specific, dict) and specific.get("additionalContext"):
            notes.append(str(specific["additionalContext"]))
    return notes
