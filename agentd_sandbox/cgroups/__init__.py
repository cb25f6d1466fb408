"""Control groups for sandboxes: one group per owner's unit (a daemon's session) bounds
the processes, memory (tmpfs pages included) and CPU share of everything started in it,
on cgroup v1 or v2."""

from .group import JOIN_EXIT, Group, GroupLimits, Tree, join_prefix
from .hierarchy import CONTROLLERS, Hierarchy, detect

__all__ = [
    "CONTROLLERS",
    "JOIN_EXIT",
    "Group",
    "GroupLimits",
    "Hierarchy",
    "Tree",
    "detect",
    "join_prefix",
]
