"""What the change tracker needs of the permissions floor's asker (a floor above it):
to know whether anyone can answer, and to ask a person to keep held changes."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Answered(Protocol):
    @property
    def decision(self) -> str: ...

    @property
    def decided_by(self) -> str: ...


class Asker(Protocol):
    """What the tracker needs of permissions.Asker (a floor above this one)."""

    def has_listeners(self, session_id: str) -> bool: ...

    async def ask(
        self,
        session_id: str,
        *,
        tool_use_id: str,
        tool_name: str,
        tool_input: dict[str, Any],
        reasons: list[str],
        cancelled: asyncio.Event | None = None,
    ) -> Answered: ...
