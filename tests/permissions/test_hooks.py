"""agentd/permissions/hooks.py through the engine: real subprocess hooks from settings files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd.tools.base import ToolResult

from .conftest import TOOLS, Env, write_hook


def hooks(event: str, command: str, matcher: str = "Bash", timeout: float = 10) -> dict[str, Any]:
    entry = {
        "matcher": matcher,
        "hooks": [{"type": "command", "command": command, "timeout": timeout}],
    }
    return {"hooks": {event: [entry]}}


def trusted(make_env: Callable[..., Env], tmp_path: Path) -> Env:
    """An env whose settings files are trusted as each test writes them (`settle`)."""
    return make_env()


def settle(env: Env, body: dict[str, Any], name: str = "settings.json") -> None:
    """Write a settings file and trust exactly that content, as a person would."""
    env.settings(body, name)
    env.trust(name)


async def test_pre_hook_gets_claude_codes_payload_and_allows(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = trusted(make_env, tmp_path)
    seen = env.ws / "seen.json"
    cmd = write_hook(
        env.ws,
        "allow.py",
        f"""
import os
open({str(seen)!r}, "w").write(json.dumps({{"event": event, "cwd": os.getcwd(),
    "project": os.environ.get("CLAUDE_PROJECT_DIR")}}))
print(json.dumps({{"hookSpecificOutput": {{"hookEventName": "PreToolUse",
    "permissionDecision": "allow", "permissionDecisionReason": "trusted build"}}}}))
""",
    )
    settle(env, hooks("PreToolUse", cmd))
    ctx = env.ctx()
    decision = await env.engine.decide(env.session, TOOLS["Bash"], {"command": "make"}, ctx)
    assert (decision.behavior, decision.decided_by) == ("allow", "hook")
    got = json.loads(seen.read_text())
    assert got["event"] == {
        "session_id": env.session.id,
        "transcript_path": "",
        "cwd": env.session.cwd,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
        "tool_use_id": ctx.tool_use_id,
        "permission_mode": "default",
    }
    assert got["cwd"] == env.session.cwd and got["project"] == str(env.ws)


async def test_pre_hook_deny_json_and_legacy_block(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = trusted(make_env, tmp_path)
    cmd = write_hook(
        env.ws,
        "deny.py",
        """
if "push" in event["tool_input"]["command"]:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "no pushes today"}}))
else:
    print(json.dumps({"decision": "block", "reason": "legacy says no"}))
""",
    )
    settle(env, hooks("PreToolUse", cmd))
    pushed = await env.bash("git push")
    assert (pushed.behavior, pushed.decided_by) == ("deny", "hook")
    assert "no pushes today" in pushed.reason
    assert "legacy says no" in (await env.bash("ls")).reason


async def test_pre_hook_exit_2_blocks_with_stderr(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = trusted(make_env, tmp_path)
    cmd = write_hook(env.ws, "exit2.py", "sys.stderr.write('use pnpm, not npm'); sys.exit(2)")
    settle(env, hooks("PreToolUse", cmd, matcher="Bash|Write"))
    decision = await env.bash("npm install")
    assert decision.behavior == "deny" and "use pnpm, not npm" in decision.reason
    # the matcher is a regex on the tool name: Read does not match
    assert (await env.decide("Read", {"file_path": "a"})).behavior == "allow"


async def test_pre_hook_ask_asks_even_for_read_only(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = trusted(make_env, tmp_path)
    cmd = write_hook(
        env.ws,
        "ask.py",
        """
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "ask", "permissionDecisionReason": "double-check"}}))
""",
    )
    settle(env, hooks("PreToolUse", cmd, matcher=""))
    decision = await env.bash("ls")
    assert decision.decided_by == "nobody-attached" and "double-check" in decision.reason


async def test_pre_hook_updated_input(make_env: Callable[..., Env], tmp_path: Path) -> None:
    env = trusted(make_env, tmp_path)
    cmd = write_hook(
        env.ws,
        "rewrite.py",
        """
cmd = event["tool_input"]["command"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "updatedInput": {"command": cmd.replace("npm", "pnpm")}}}))
""",
    )
    settle(env, hooks("PreToolUse", cmd))
    env.session.allow_rules.append("Bash(pnpm test:*)")
    decision = await env.bash("npm test")
    # the rewritten input went through the rules, and goes to the tool
    assert (decision.behavior, decision.decided_by) == ("allow", "rule")
    assert decision.updated_input == {"command": "pnpm test"}


async def test_pre_hook_failure_and_timeout_do_not_decide(
    make_env: Callable[..., Env], tmp_path: Path, caplog: Any
) -> None:
    env = trusted(make_env, tmp_path)
    crash = write_hook(env.ws, "crash.py", "sys.exit(1)")
    settle(env, hooks("PreToolUse", crash))
    assert (await env.bash("ls")).decided_by == "classifier"
    slow = write_hook(env.ws, "slow.py", "import time; time.sleep(30)")
    settle(env, hooks("PreToolUse", slow, timeout=0.5))
    decision = await env.bash("npm install")
    assert decision.decided_by == "nobody-attached"  # the normal rules decided
    assert (await env.bash("ls")).behavior == "allow"
    assert "timed out" in caplog.text and "exit 1" in caplog.text


async def test_untrusted_workspace_hooks_do_not_run(env: Env, tmp_path: Path) -> None:
    marker = env.ws / "ran"
    cmd = write_hook(env.ws, "evil.py", f"open({str(marker)!r}, 'w').write('x'); sys.exit(2)")
    env.settings(hooks("PreToolUse", cmd, matcher=""))
    env.settings(hooks("PostToolUse", cmd, matcher=""), "settings.local.json")
    args = {"command": "ls"}
    ctx = env.ctx()
    assert (await env.engine.decide(env.session, TOOLS["Bash"], args, ctx)).behavior == "allow"
    await env.engine.after_call(env.session, TOOLS["Bash"], args, ToolResult.text("ok"), ctx)
    assert not marker.exists()


async def test_post_hook_gets_response_and_exit_2_adds_a_note(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = trusted(make_env, tmp_path)
    seen = env.ws / "post.json"
    cmd = write_hook(
        env.ws,
        "post.py",
        f"""
open({str(seen)!r}, "w").write(json.dumps(event))
sys.stderr.write("lint: 2 errors in a.py")
sys.exit(2)
""",
    )
    settle(env, hooks("PostToolUse", cmd, matcher="Edit|Write"))
    result = ToolResult.text("edited", data={"filePath": "a.py"})
    ctx = env.ctx()
    # the hooks of a call are those of the settings it was decided under
    await env.engine.decide(env.session, TOOLS["Edit"], {"file_path": "a.py"}, ctx)
    await env.engine.after_call(env.session, TOOLS["Edit"], {"file_path": "a.py"}, result, ctx)
    event = json.loads(seen.read_text())
    assert event["hook_event_name"] == "PostToolUse"
    assert event["tool_response"] == {"filePath": "a.py"}
    assert "lint: 2 errors in a.py" in result.text_content()
    assert not result.is_error
