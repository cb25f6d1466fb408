"""NotebookEdit: replace, insert or delete one cell of a Jupyter notebook, atomically."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import secrets
from typing import Any, NotRequired, TypedDict

from agentd.foundation.errors import InputError, ToolError
from agentd.tools.base import FileAccess, Hints, Tool, ToolContext, ToolResult
from agentd.tools.files import filestate, recorded
from agentd.tools.formats.notebooks import join_source, notebook_language

_INDEX_ID = re.compile(r"^cell-(\d+)$")


def _find_cell(cells: list[dict[str, Any]], cell_id: str) -> int | None:
    """The index of the cell with this id; else of `cell-N` (N from 0), as Read names cells."""
    for index, cell in enumerate(cells):
        if cell.get("id") == cell_id:
            return index
    m = _INDEX_ID.match(cell_id)
    if m and int(m.group(1)) < len(cells):
        return int(m.group(1))
    return None


def _has_ids(notebook: dict[str, Any]) -> bool:
    """Cell ids exist from nbformat 4.5 on; an older notebook must not get any."""
    major = notebook.get("nbformat", 4)
    minor = notebook.get("nbformat_minor", 0)
    return (major, minor) >= (4, 5)


def _validation_error(notebook: dict[str, Any]) -> str | None:
    """Why nbformat finds the notebook invalid; None when it is valid."""
    import nbformat

    try:
        nbformat.validate(copy.deepcopy(notebook))
    except nbformat.ValidationError as exc:
        return str(exc.message)
    return None


class NotebookEditInput(TypedDict):
    notebook_path: str
    new_source: str
    cell_id: NotRequired[str]
    cell_type: NotRequired[str]
    edit_mode: NotRequired[str]


class NotebookEditTool(Tool[NotebookEditInput]):
    name = "NotebookEdit"
    hints = Hints()  # insert and delete are not idempotent
    description = (
        "Change one cell of a Jupyter notebook (.ipynb). notebook_path may be absolute or "
        "relative to the working directory. Cells are named by their id as Read shows it "
        '(`<cell id="…">`; `cell-N` names the cell at index N, from 0).\n'
        "- edit_mode replace (default): new_source becomes the cell's source; a code cell's "
        "outputs and execution count are cleared. cell_type changes the cell's type.\n"
        "- edit_mode insert: a new cell (cell_type required) goes after cell_id, or first "
        "when cell_id is omitted.\n"
        "- edit_mode delete: the cell is removed (new_source is ignored).\n"
        "- The notebook must have been Read in this session first and not changed since."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "notebook_path": {"type": "string"},
            "cell_id": {"type": "string"},
            "new_source": {"type": "string"},
            "cell_type": {"type": "string", "enum": ["code", "markdown"]},
            "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"]},
        },
        "required": ["notebook_path", "new_source"],
        "additionalProperties": False,
    }

    def file_access(self, args: NotebookEditInput) -> FileAccess | None:
        return FileAccess("write", args["notebook_path"])

    async def validate_input(self, args: NotebookEditInput, ctx: ToolContext) -> None:
        mode = args.get("edit_mode") or "replace"
        if not args["notebook_path"].lower().endswith(".ipynb"):
            raise InputError(
                "notebook_path must be a Jupyter notebook (.ipynb); use Edit for other files."
            )
        if mode == "insert" and not args.get("cell_type"):
            raise InputError("cell_type is required to insert a cell: give code or markdown.")
        if mode in ("replace", "delete") and not args.get("cell_id"):
            raise InputError(f"cell_id is required to {mode} a cell.")

    async def call(self, args: NotebookEditInput, ctx: ToolContext) -> ToolResult:
        session = ctx.session
        mode = args.get("edit_mode") or "replace"
        loc = filestate.resolve(session, args["notebook_path"], ctx.roots("write"), ctx)
        try:
            current = await asyncio.to_thread(filestate.read_current, loc, filestate.MAX_EDIT_BYTES)
        except IsADirectoryError:
            raise InputError(f"{loc.path} is a directory, not a notebook.") from None
        if current is None:
            raise InputError(filestate.not_found(loc.path, session, loc.identity))
        filestate.require_read(session, loc.path)
        if filestate.is_modified(session, loc.path, current):
            raise InputError(filestate.MODIFIED)
        original = current.data.decode("utf-8", errors="replace")
        try:
            notebook = json.loads(original)
        except ValueError as exc:
            raise InputError(f"{loc.path} is not valid notebook JSON: {exc}.") from None
        cells = notebook.get("cells") if isinstance(notebook, dict) else None
        if not isinstance(cells, list):
            raise InputError(f"{loc.path} is not a notebook: it has no list of cells.")
        # A notebook that was already invalid may still be edited; a valid one stays valid.
        was_valid = _validation_error(notebook) is None
        language = notebook_language(notebook)
        cell_id = args.get("cell_id")
        new_source: str = args["new_source"]
        index = None
        if cell_id:
            index = _find_cell(cells, cell_id)
            if index is None:
                raise InputError(
                    f'No cell with id "{cell_id}" in the notebook. Read it to see the cell ids.'
                )
        data: dict[str, Any] = {"new_source": new_source}
        if mode == "insert":
            cell_type = args["cell_type"]
            new_cell: dict[str, Any] = {"cell_type": cell_type}
            if _has_ids(notebook):
                taken = {c.get("id") for c in cells}
                new_id = secrets.token_hex(4)
                while new_id in taken:
                    new_id = secrets.token_hex(4)
                new_cell["id"] = new_id
            new_cell["source"] = new_source
            new_cell["metadata"] = {}
            if cell_type == "code":
                new_cell["execution_count"] = None
                new_cell["outputs"] = []
            position = 0 if index is None else index + 1
            cells.insert(position, new_cell)
            shown_id = new_cell.get("id") or f"cell-{position}"
            text = f"Inserted cell {shown_id} with {new_source}"
        else:
            assert index is not None and cell_id is not None
            cell = cells[index]
            data["old_source"] = join_source(cell.get("source"))
            cell_type = cell.get("cell_type", "code")
            shown_id = cell_id
            if mode == "delete":
                del cells[index]
                text = f"Deleted cell {cell_id}"
            else:
                cell_type = args.get("cell_type") or cell_type
                cell["cell_type"] = cell_type
                cell["source"] = new_source
                if cell_type == "code":
                    cell["execution_count"] = None
                    cell["outputs"] = []
                else:
                    cell.pop("execution_count", None)
                    cell.pop("outputs", None)
                text = f"Updated cell {cell_id} with {new_source}"
        if was_valid and (problem := _validation_error(notebook)) is not None:
            raise ToolError(
                f"The edit would leave an invalid notebook, so it was not written: {problem}"
            )
        updated = json.dumps(notebook, indent=1, ensure_ascii=False)
        if original.endswith("\n"):
            updated += "\n"
        payload = updated.encode("utf-8")
        await recorded.write(ctx, self.name, loc, payload, current)
        filestate.remember_written(session, loc, payload)
        data.update(
            {
                "cell_type": cell_type,
                "language": language,
                "edit_mode": mode,
                "cell_id": shown_id,
                "error": "",
                "notebook_path": args["notebook_path"],
                "original_file": original,
                "updated_file": updated,
            }
        )
        return ToolResult.text(text, data)


TOOL = NotebookEditTool
