"""No hidden wiring in the daemon: every part is built by the assembly (agentd/daemon.py)
and handed to what uses it, never reached through a module.

An import contract cannot see module state, so this reads agentd/ with `ast` for the
shapes a singleton takes: a `global` rebound in a function, an install()/current() pair,
a ContextVar carrying a parameter past the calls between, and a module-level instance of
one of agentd's own classes. What must stay module state is listed in ALLOWED, each
with its reason.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import agentd

ROOT = Path(agentd.__file__).parent
# What holds state of its own wherever it is made: made at module level, it is a part
# of the process no assembly made.
STATEFUL = frozenset(
    {
        "ThreadPoolExecutor",
        "ProcessPoolExecutor",
        "Lock",
        "RLock",
        "WeakKeyDictionary",
        "WeakValueDictionary",
    }
)

# (module, name): why it is module state, not a part handed down.
ALLOWED: dict[tuple[str, str], str] = {
    # Values, not parts: frozen, nothing in them changes.
    ("agentd.bashsec.classifier", "WALK"): "the classifier's walk: a frozen table of functions",
    ("agentd.tools.files.filestate", "UTF8"): "a frozen codec, a constant",
    # One SessionDirs per state dir, found from it: the base it names is recorded in
    # the state dir, so every part (and the next daemon) must agree on one object.
    ("agentd.sessions.dirs", "_all_lock"): "the cache of session dirs by state dir",
    # A log's rate limit belongs to the log it limits, which is the process's.
    ("agentd.api.decoding", "_log"): "the rate of one logger's lines, as logging is global",
    # Prometheus counts for the whole process; one registry is how the client library
    # exposes them, and every part counts into it.
    ("agentd.foundation.metrics", "_known_tools"): "the process's metrics (one registry)",
    ("agentd.foundation.metrics", "_served"): "the process's metrics (one registry)",
    ("agentd.foundation.metrics", "_readopted"): "the process's metrics (one registry)",
    ("agentd.foundation.metrics", "_longest_delay"): "the process's metrics (one registry)",
}


@dataclass(frozen=True, order=True)
class Found:
    module: str
    name: str
    shape: str

    def __str__(self) -> str:
        return f"{self.module}: {self.name} ({self.shape})"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _agentd_classes(tree: ast.Module) -> set[str]:
    """Names in this module that are classes of agentd: its own, and those it imports
    from agentd by name (a guess by capital letter, which is how agentd names them)."""
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentd"):
            names |= {(a.asname or a.name) for a in node.names if a.name[:1].isupper()}
    return names


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def singletons_in(path: Path, root: Path = ROOT) -> list[Found]:
    module = _module_name(path, root)
    tree = ast.parse(path.read_text(), str(path))
    found: list[Found] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found += [Found(module, name, "rebound through `global`") for name in node.names]
        if isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name == "ContextVar":
                found.append(Found(module, "ContextVar", "a parameter carried by context"))
        if isinstance(node, ast.ImportFrom) and node.module == "contextvars":
            found.append(Found(module, "contextvars", "a parameter carried by context"))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if {"install", "current"} <= functions:
        found.append(Found(module, "install/current", "a part installed in a module"))
    classes = _agentd_classes(tree) | STATEFUL
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        if not isinstance(value, ast.Call) or _called_name(value) not in classes:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found.append(Found(module, target.id, f"a module-level {_called_name(value)}"))
    return sorted(set(found))


def test_the_daemon_has_no_singletons() -> None:
    found = [
        f
        for path in sorted(ROOT.rglob("*.py"))
        for f in singletons_in(path)
        if (f.module, f.name) not in ALLOWED
    ]
    assert not found, (
        "module state found; build the part in agentd/daemon.py and hand it to what uses "
        "it (or add it to ALLOWED with its reason):\n" + "\n".join(map(str, found))
    )


def test_every_allowed_entry_is_still_there() -> None:
    """An entry whose state is gone goes from the list too: the list stays what is true."""
    present = {(f.module, f.name) for path in ROOT.rglob("*.py") for f in singletons_in(path)}
    assert set(ALLOWED) <= present, sorted(set(ALLOWED) - present)


def test_it_finds_each_shape(tmp_path: Path) -> None:
    """What the scan looks for, in a module that has each."""
    package = tmp_path / "agentd"
    package.mkdir()
    sample = package / "sample.py"
    sample.write_text(
        "from contextvars import ContextVar\n"
        "from agentd.runs.shim.client import Forkserver\n"
        "FLAG: ContextVar[bool] = ContextVar('flag')\n"
        "FORKSERVER = Forkserver()\n"
        "class Pool: ...\n"
        "POOL = Pool()\n"
        "_current = None\n"
        "def install(x):\n"
        "    global _current\n"
        "    _current = x\n"
        "def current():\n"
        "    return _current\n"
    )
    names = {f.name for f in singletons_in(sample, package)}
    assert names == {
        "ContextVar",
        "contextvars",
        "FORKSERVER",
        "POOL",
        "install/current",
        "_current",
    }
