"""The critical-rm guard resolves what bash resolves (issue 8 §4).

Every spelling below removes /, the home directory, the workspace root or a parent of it
(or may, once bash has expanded it): it asks a person in every mode, allow rules or not.
With nobody attached an ask is a deny by "nobody-attached".
"""

from __future__ import annotations

import pytest

from .conftest import Env

ASKED = "nobody-attached"

CRITICAL = [
    # tilde forms
    "rm -rf ~+",
    "rm -rf ~+/",
    "rm -rf -- ~+",
    "rm -rf ~-",
    "cd src && rm -rf ~-",
    "rm -rf ~root",
    # the cwd, however spelt
    "rm -rf $PWD",
    "rm -rf ${PWD}",
    'rm -rf "$PWD"',
    'rm -rf "${PWD}/"',
    'rm -rf "$(pwd)"',
    "rm -rf $(pwd)",
    "rm -rf `pwd`",
    "rm -rf $(pwd -P)",
    'rm -rf "$(builtin pwd)"',
    "rm -rf $OLDPWD",
    "rm -rf .",
    "rm -rf ./",
    "rm -rf ./.",
    "rm -rf src/..",
    "rm -rf ..",
    "rm -rf ../ws",
    "cd src; rm -rf ..",
    "cd .. && rm -rf ws",
    "cd {parent} && rm -rf *",
    # globs and braces that can match a critical path or empty it
    "rm -rf *",
    "rm -rf ./*",
    "rm -rf .*",
    "rm -rf /*",
    "rm -rf /t*",
    "rm -rf /tm?",
    "rm -rf /[t]mp",
    "rm -rf {parent}/*",
    "rm -rf {ws_head}*",
    "rm -rf {/,x}",
    "rm -rf /{tmp,x}",
    "rm -rf {x,{ws}}",
    "rm -rf {ws}/{a,.}",
    # option spellings
    "rm -r {ws}",
    "rm -R -- {ws}",
    "rm --rec --fo {ws}",
    "rm --recursive=x {ws}",
    # find
    "find {ws} -delete",
    "find . -delete",
    "find -delete",
    "find . -exec rm -rf {} +",
    "find .. -execdir rm {} ;",
    "find ~ -delete",
    "find $PWD -type f -delete",
    "find . -name '*' -delete",
    "find . -name '*.pyc' -o -delete",
    "find . ! -name keep -delete",
    "find $(pwd) -exec sh -c 'rm -rf $0' {} ;",
    # what only the run knows
    "rm -rf $(git rev-parse --show-toplevel)",
    'rm -rf "$X"/',
    "rm -rf $DIR/..",
    "rm -rf $UNSET_VAR",
    "ls | xargs rm -rf",
    "cd $SOMEWHERE && rm -rf .",
    "rm -rf $X/ws",
]


@pytest.mark.parametrize("command", CRITICAL)
@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
async def test_critical_removal_asks(env: Env, command: str, mode: str) -> None:
    env.session.permission_mode = mode
    env.session.allow_rules += ["Bash(rm:*)", "Bash(find:*)", "Bash(cd:*)", "Bash"]
    (env.ws / "src").mkdir(exist_ok=True)
    command = (
        command.replace("{ws_head}", str(env.ws)[:-1])
        .replace("{ws}", str(env.ws))
        .replace("{parent}", str(env.ws.parent))
    )
    decision = await env.bash(command)
    assert (decision.behavior, decision.decided_by) == ("deny", ASKED), command
    assert "remove" in decision.reason or "delete" in decision.reason, decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "rm -rf ./node_modules /tmp/x",
        "rm -rf $OUT/build",
        'rm -rf "$(pwd)/build"',
        "rm -rf ~+/build",
        "rm -rf ${PWD}/dist/*",
        "rm -rf {a,b}/cache",
        "rm -f *.o",
        "rm x",
        "find . -name '*.pyc' -delete",
        "find / -name x -delete",
        "find build -delete",
        "find . -name '*.o' -exec rm {} +",
        "find . -type f -exec grep -l x {} +",
        "cd $SOMEWHERE && rm -rf out",
        "ls | xargs rm -f",
    ],
)
async def test_ordinary_removal_is_not_critical(env: Env, command: str) -> None:
    env.session.permission_mode = "bypassPermissions"
    decision = await env.bash(command)
    assert decision.behavior == "allow", (command, decision.reason)
