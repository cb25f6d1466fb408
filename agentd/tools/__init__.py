"""The tool registry: one line per tool module (a package's `tool`), each exporting `TOOL`."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # not at run time: the decoding worker imports this package, and no more
    from agentd.tools.base import Tool

TOOL_MODULES: tuple[str, ...] = (
    "read",
    "write",
    "edit",
    "multiedit",
    "notebook_edit",
    "glob",
    "grep",
    "ls",
    "todo_write",
    "bash.tool",
    "bash_output",
    "task_stop",
    "web_fetch.tool",
)


class Registry:
    """Tools by name and alias."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools
        self._by_name: dict[str, Tool] = {}
        for tool in tools:
            for name in (tool.name, *tool.aliases):
                self._by_name[name] = tool

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)


def default_registry() -> Registry:
    return Registry(
        [importlib.import_module(f"agentd.tools.{name}").TOOL() for name in TOOL_MODULES]
    )
