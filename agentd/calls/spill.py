"""Results over a tool's size budget go to a file; the model gets a preview and the path."""

from __future__ import annotations

import os

from agentd.fs import reserve
from agentd.tools.base import TextBlock, ToolResult

PREVIEW_BYTES = 2000


def _size(n: int) -> str:
    return f"{n / 1024:.1f}KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f}MB"


def persist_if_large(
    result: ToolResult, budget: int, results_dir: str, tool_use_id: str
) -> ToolResult:
    """`result` itself when its text fits `budget` characters, else a preview pointing at a file."""
    text = result.text_content()
    if len(text) <= budget:
        return result
    os.makedirs(results_dir, mode=0o700, exist_ok=True)
    safe_id = "".join(c for c in tool_use_id if c.isalnum() or c in "-_") or "result"
    path = os.path.join(results_dir, f"{safe_id}.txt")
    data = text.encode()
    with open(path, "wb", buffering=0) as f, reserve.without():
        # What the session made never fills the state disk's reserve (fs/reserve.py).
        view = memoryview(data)
        while view:
            view = view[f.write(view) or 0 :]
    preview = data[:PREVIEW_BYTES].decode(errors="ignore")
    cut = preview.rfind("\n")
    if cut > PREVIEW_BYTES // 2:
        preview = preview[:cut]
    body = (
        "<persisted-output>\n"
        f"Output too large ({_size(len(data))}). Full output saved to: {path}\n"
        "Read that file (with offset and limit) to see the rest.\n\n"
        f"Preview (first {_size(len(preview.encode()))}):\n{preview}\n...\n</persisted-output>"
    )
    images = [b for b in result.content if not isinstance(b, TextBlock)]
    return ToolResult([TextBlock(body), *images], is_error=result.is_error, data=result.data)
