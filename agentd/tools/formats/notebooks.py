"""Read of a Jupyter notebook: cells and outputs (images as images), and the helpers
NotebookEdit shares."""

from __future__ import annotations

import base64
import json
from typing import Any

from agentd.foundation.errors import ToolError
from agentd.tools.base import ContentBlock, ImageBlock, TextBlock, ToolResult, reminder

MAX_OUTPUT_CHARS = 10_000


def render_notebook(file_path: str, notebook: dict[str, Any], max_chars: int) -> ToolResult:
    """Cells with their outputs, images among them, as the reference shows them."""
    language = notebook_language(notebook)
    blocks: list[ContentBlock] = []
    pending: list[str] = []
    cells_data: list[dict[str, Any]] = []
    for index, cell in enumerate(notebook.get("cells") or []):
        cell_type = cell.get("cell_type", "code")
        cell_id = cell.get("id") or f"cell-{index}"
        source = join_source(cell.get("source"))
        tags = ""
        if cell_type != "code":
            tags = f"<cell_type>{cell_type}</cell_type>"
        elif language != "python":
            tags = f"<language>{language}</language>"
        pending.append(f'<cell id="{cell_id}">{tags}{source}</cell id="{cell_id}">\n')
        entry: dict[str, Any] = {"cellType": cell_type, "source": source}
        if cell_type == "code" and cell.get("execution_count") is not None:
            entry["execution_count"] = cell["execution_count"]
        entry["cell_id"] = cell_id
        if cell_type == "code":
            entry["language"] = language
            outputs = []
            for output in cell.get("outputs") or []:
                out_text, image = _output(output)
                out_entry: dict[str, Any] = {
                    "output_type": output.get("output_type"),
                    "text": out_text,
                }
                if out_text:
                    pending.append(f"\n{out_text}\n")
                if image is not None:
                    media_type, b64 = image
                    out_entry["image"] = {"image_data": b64, "media_type": media_type}
                    if pending:
                        blocks.append(TextBlock("".join(pending)))
                        pending = []
                    blocks.append(ImageBlock(media_type, base64.b64decode(b64)))
                outputs.append(out_entry)
            entry["outputs"] = outputs
        cells_data.append(entry)
    if pending:
        blocks.append(TextBlock("".join(pending)))
    if not blocks:
        blocks.append(TextBlock(reminder("Note: this notebook has no cells.")))
    size = sum(len(b.text) for b in blocks if isinstance(b, TextBlock))
    if size > max_chars:
        raise ToolError(
            f"{file_path} has {size} characters of cells and outputs, more than "
            "one read returns. Look at parts of it with jq through Bash, e.g. "
            "`jq '.cells[:10]' notebook.ipynb`."
        )
    return ToolResult(
        blocks,
        data={"type": "notebook", "file": {"filePath": file_path, "cells": cells_data}},
    )


def notebook_language(notebook: dict[str, Any]) -> str:
    metadata = notebook.get("metadata") or {}
    return (
        (metadata.get("language_info") or {}).get("name")
        or (metadata.get("kernelspec") or {}).get("language")
        or "python"
    )


def join_source(source: Any) -> str:
    if isinstance(source, list):
        return "".join(str(part) for part in source)
    return source if isinstance(source, str) else ""


def _output(output: dict[str, Any]) -> tuple[str, tuple[str, str] | None]:
    """An output's text (bounded) and its image (media type, base64) if it has one."""
    kind = output.get("output_type")
    text = ""
    image = None
    if kind == "stream":
        text = join_source(output.get("text"))
    elif kind in ("execute_result", "display_data"):
        bundle = output.get("data") or {}
        text = join_source(bundle.get("text/plain"))
        for media_type in ("image/png", "image/jpeg"):
            if isinstance(bundle.get(media_type), str):
                image = (media_type, bundle[media_type].replace("\n", ""))
                break
    elif kind == "error":
        traceback = "\n".join(output.get("traceback") or [])
        text = f"{output.get('ename', '')}: {output.get('evalue', '')}\n{traceback}".rstrip()
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + "\n[output truncated: longer than 10000 characters]"
    return text, image


class NotANotebook(ValueError):
    """The file named as a notebook is not one; the message says why, for the model."""


def load_notebook(data: bytes) -> dict[str, Any]:
    """The notebook in `data`, or NotANotebook: JSON whose top-level "cells" is a list of
    objects, each with a string or list-of-strings "source" (what the reference accepts)."""
    try:
        notebook = json.loads(data)
    except ValueError as exc:
        raise NotANotebook(
            f"The notebook file is not valid JSON (it may be truncated, damaged or still "
            f"being written): {exc}."
        ) from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(_is_cell(c) for c in cells):
        raise NotANotebook(
            'The file is not a Jupyter notebook: its top-level "cells" must be a list of '
            'cell objects, each with a "source" that is a string or a list of strings.'
        )
    return notebook


def _is_cell(cell: object) -> bool:
    if not isinstance(cell, dict):
        return False
    source = cell.get("source")
    return isinstance(source, str) or (
        isinstance(source, list) and all(isinstance(line, str) for line in source)
    )
