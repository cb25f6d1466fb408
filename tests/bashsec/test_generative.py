"""Every place bash evaluates text as code, fed a payload by every route: never read-only.

The payload `a[$(touch p)]` runs `touch p` in all of these contexts (bash 5.2): as an
arithmetic value (the subscript is evaluated), as a prompt (@P), as a variable name
(indirection, -v, read/printf -v/declare targets, namerefs) and as shell code. A
smuggler puts it into the variable `v` by one route (quoting, here-strings, here-docs,
substitutions, arrays, indirection, builtins that assign); a context uses `v`.

Controls: where a context is safe with a number the classifier can see (`v=5`), that
combination must be read-only, so the test fails if the classifier simply refuses the
context.
"""

from __future__ import annotations

import pytest

from agentd.bashsec import classify_uncached

PAYLOAD = "a[$(touch p)]"

# How the payload reaches v. A smuggler ending in a newline is a here-doc.
SMUGGLERS: dict[str, str] = {
    "single quotes": f"v='{PAYLOAD}'",
    "double quotes": 'v="a[\\$(touch p)]"',
    "ANSI-C": f"v=$'{PAYLOAD}'",
    "ANSI-C escapes": "v=$'a[\\x24(touch p)]'",
    "concatenation": "v='a['\"\\$(touch p)\"']'",
    "here-string": f"read -r v <<< '{PAYLOAD}'",
    "here-doc": f"read -r v <<'EOF'\n{PAYLOAD}\nEOF\n",
    "file": "IFS= read -r v < f",
    "command substitution": "v=$(cat f)",
    "backquotes": "v=`cat f`",
    "$(<file)": "v=$(<f)",
    "nested substitution": f"v=$(printf %s \"$(printf %s '{PAYLOAD}')\")",
    "array": f"arr=('{PAYLOAD}'); v=${{arr[0]}}",
    "array element": f"arr[1]='{PAYLOAD}'; v=${{arr[1]}}",
    "indirection": f"w='{PAYLOAD}'; n=w; v=${{!n}}",
    "printf -v": f"printf -v v %s '{PAYLOAD}'",
    "mapfile": f"mapfile -t arr <<< '{PAYLOAD}'; v=${{arr[0]}}",
    "readarray": "readarray -t arr < f; v=${arr[0]}",
    "declare": f"declare v='{PAYLOAD}'",
    "declare quoted": f"declare 'v={PAYLOAD}'",
    "export": f"export v='{PAYLOAD}'",
    "local": f"f() {{ local v='{PAYLOAD}'; printf %s \"$v\"; }}; v=$(f)",
    "default assignment": f": ${{v:='{PAYLOAD}'}}",
    "for": f"for v in '{PAYLOAD}'; do :; done",
    "getopts": f"getopts a: o -a '{PAYLOAD}'; v=$OPTARG",
    "positional": f"set -- '{PAYLOAD}'; v=$1",
    "parameter default": f"v=${{u:-'{PAYLOAD}'}}",
    "case conversion": f"u='{PAYLOAD}'; v=${{u,,}}",
}

# (context, safe with v=5?) — each evaluates the value of v.
CONTEXTS: list[tuple[str, bool]] = [
    ("echo ${v@P}", False),
    ('printf %s "${v@P}"', False),
    ("echo $(( v ))", True),
    ("echo $(( $v ))", True),
    ('echo "$(( v + 1 ))"', True),
    ("echo $[v]", True),
    ("(( v ))", True),
    ("(( x = v * 2 ))", True),
    ("let v", True),
    ('let "y = $v"', False),  # a quoted run-time word: the classifier does not look inside
    ("let y=v+1", True),
    ("for ((i = v; i < 1; i++)); do :; done", True),
    ("[[ $v -eq 1 ]]", True),
    ("[[ 1 -ne v ]]", True),
    ('[[ "$v" -gt 0 ]] && echo y', True),
    ("[[ -v $v ]]", False),
    ('test -v "$v"', False),
    ('[ -v "$v" ]', False),
    ("echo ${b[v]}", True),
    ('echo "${b[$v]}"', True),
    ("b=(1); echo ${#b[v]}", True),
    ("b[$v]=1", True),
    ("b[v]=1", True),
    ("s=abc; echo ${s:v}", True),
    ("s=abc; echo ${s:0:v}", True),
    ("declare -i n; n=$v", True),
    ("declare -i n=$v", True),
    ("typeset -i n; n+=$v", True),
    ("echo ${!v}", False),
    ('declare "$v=1"', False),
    ('a=(1); typeset "$v"=1', False),
    ('read -r "$v" <<< 1', False),
    ('printf -v "$v" x', False),
    ('a=(1); unset "$v"', False),
    ("declare -n r=$v; echo $r", False),
    ('a=(1); g() { local "$v"=1; }; g', False),
    ("PS4=$v; set -x; :", False),
    ("export PS4=$v; set -x; :", False),
    ('read -r PS4 <<< "$v"; set -x; :', False),
    ('printf -v PS4 %s "$v"; set -x; :', False),
    ('PS4="$v" bash -xc :', False),
    ('BASH_ENV="$v" bash -c ls', False),
    ('trap "$v" EXIT', False),
    ('eval "$v"', False),
    ('bash -c "$v"', False),
    ('compgen -W "$v"', False),
    ('mapfile -C "$v" -c 1 arr < f', False),
]


def _join(setup: str, context: str) -> str:
    return setup + context if setup.endswith("\n") else f"{setup}; {context}"


COMBINATIONS = [
    (f"{context} <- {name}", _join(setup, context))
    for name, setup in SMUGGLERS.items()
    for context, _ in CONTEXTS
]


def test_combination_count() -> None:
    assert len(COMBINATIONS) == len(SMUGGLERS) * len(CONTEXTS) >= 1000


def test_no_combination_is_read_only() -> None:
    read_only = [cmd for _, cmd in COMBINATIONS if classify_uncached(cmd).read_only]
    assert not read_only, f"{len(read_only)} of {len(COMBINATIONS)} read-only: {read_only[:10]}"


def test_combinations_parse() -> None:
    """The verdicts come from reading the command, not from a parse failure."""
    failed = [cmd for _, cmd in COMBINATIONS if not classify_uncached(cmd).parse_ok]
    assert not failed, failed[:10]


@pytest.mark.parametrize(("context", "safe"), CONTEXTS, ids=[c for c, _ in CONTEXTS])
def test_control_with_a_visible_number(context: str, safe: bool) -> None:
    """v=5 makes an arithmetic context harmless, and the classifier sees it."""
    result = classify_uncached(f"v=5; {context}")
    assert result.read_only is safe, result.reasons
