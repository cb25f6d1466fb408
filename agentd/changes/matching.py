"""Which of a root's code-bearing paths a run changed: by its events, matched by the
identity of the files as well as by their names, or (events lost or unavailable) by a
walk compared with the root's baseline. Pure functions of the baseline; the tracker
(service.py) runs them as the session's identity, on a thread."""

from __future__ import annotations

import os
from typing import Any

from agentd.changes import holding, known, walk
from agentd.changes.holding import Held
from agentd.changes.walk import Baseline
from agentd.sandboxing.codebearing import Table


def restated(baseline: Baseline, taken: Any, uid: int | None) -> set[str]:
    """Known code-bearing files that changed though the run's events do not name
    them: their stat moved, or a sandboxed process holds them open for writing."""
    prefix = baseline.root.rstrip("/") + "/"
    unsure = known.open_for_writing(uid)
    return {r for r in known.restated(baseline, unsure) if prefix + r not in taken.touched}


def by_events(baseline: Baseline, table: Table, taken: Any, restated: set[str]) -> list[Held]:
    """By the run's events, matched by identity as well as by name: the paths it
    touched, the known code-bearing files those are other names of (and those names
    themselves, as links), the known ones that changed with no other writer's event
    (`restated`), and the suspects no event explained."""
    root = baseline.root
    prefix = root.rstrip("/") + "/"
    touched = set(taken.touched)
    ids = known.by_identity(baseline)
    links: dict[str, str] = {}
    for path in taken.touched if ids else ():
        if not path.startswith(prefix) or (ident := known.identity_of(path)) is None:
            continue
        other = ids.get(ident)
        rel = path[len(prefix) :]
        if other is not None and other != rel:
            touched.add(prefix + other)
            links[rel] = other
    touched |= {prefix + rel for rel in restated}
    touched |= {prefix + rel for rel in baseline.suspects}
    return holding.find(baseline, table, touched, taken.moves, taken.existed_before, links)


def by_walk(baseline: Baseline, table: Table) -> tuple[list[Held], list[str]]:
    """Without events (or with some lost): a walk of the root, compared with its
    baseline, says which code-bearing files differ; and the code-bearing
    directories that are new (to remove if reverting empties them)."""
    now = walk.scan(baseline.root, table)
    new_dirs = [u for u in now.units if u not in baseline.units]
    new_dirs += [g for g in now.git_dirs if g not in baseline.git_dirs]
    touched = {
        os.path.join(baseline.root, rel)
        for rel in set(now.entries) | set(baseline.entries) | set(baseline.suspects)
        if not (now.entries.get(rel) and now.entries[rel].same(baseline.entries.get(rel)))
    }

    def existed(path: str) -> bool | None:
        return path[len(baseline.root) + 1 :] in baseline.entries

    return holding.find(baseline, table, touched, [], existed), new_dirs
