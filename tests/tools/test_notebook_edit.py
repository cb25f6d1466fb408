"""NotebookEdit: replace, insert and delete cells; the notebook stays valid."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

NB = {
    "cells": [
        {"cell_type": "markdown", "id": "c1", "metadata": {}, "source": ["# Title\n", "text"]},
        {
            "cell_type": "code",
            "id": "c2",
            "execution_count": 1,
            "metadata": {},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["3\n"]}],
            "source": ["print(1+2)"],
        },
    ],
    "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture
def nb(ws: Path) -> Path:
    path = ws / "nb.ipynb"
    path.write_text(json.dumps(NB, indent=1) + "\n")
    return path


def _sources(path: Path) -> list:
    return [c["source"] for c in json.loads(path.read_text())["cells"]]


async def test_notebook_read_edit(call, nb: Path) -> None:
    r = await call("NotebookEdit", {"notebook_path": str(nb), "cell_id": "c2", "new_source": "x"})
    assert r.is_error and "Read" in r.text
    await call("Read", {"file_path": str(nb)})
    r = await call(
        "NotebookEdit", {"notebook_path": str(nb), "cell_id": "c2", "new_source": "print(40+2)"}
    )
    assert not r.is_error and r.text == "Updated cell c2 with print(40+2)"
    assert r.data["old_source"] == "print(1+2)" and r.data["edit_mode"] == "replace"
    assert r.data["cell_type"] == "code" and r.data["language"] == "python"
    cell = json.loads(nb.read_text())["cells"][1]
    assert cell["execution_count"] is None and cell["outputs"] == []
    r = await call(
        "NotebookEdit",
        {
            "notebook_path": str(nb),
            "cell_id": "c1",
            "new_source": "## New",
            "cell_type": "markdown",
            "edit_mode": "insert",
        },
    )
    assert (
        not r.is_error and r.text.startswith("Inserted cell ") and r.text.endswith(" with ## New")
    )
    new_id = r.data["cell_id"]
    assert new_id not in ("c1", "c2")
    assert _sources(nb) == [["# Title\n", "text"], "## New", "print(40+2)"]
    assert json.loads(nb.read_text())["cells"][1]["id"] == new_id
    assert r.data["updated_file"] == nb.read_text()
    nbformat.validate(nbformat.reads(nb.read_text(), as_version=4))


async def test_notebook_insert_first_delete_and_index_ids(call, nb: Path) -> None:
    await call("Read", {"file_path": str(nb)})
    r = await call(
        "NotebookEdit",
        {
            "notebook_path": str(nb),
            "new_source": "first",
            "cell_type": "code",
            "edit_mode": "insert",
        },
    )
    assert not r.is_error and _sources(nb)[0] == "first"
    r = await call(
        "NotebookEdit", {"notebook_path": str(nb), "cell_id": "cell-1", "new_source": "m"}
    )
    assert not r.is_error and r.text == "Updated cell cell-1 with m"
    assert json.loads(nb.read_text())["cells"][1]["cell_type"] == "markdown"
    r = await call(
        "NotebookEdit",
        {"notebook_path": str(nb), "cell_id": "c2", "new_source": "", "edit_mode": "delete"},
    )
    assert not r.is_error and r.text == "Deleted cell c2"
    assert _sources(nb) == ["first", "m"]
    nbformat.validate(nbformat.reads(nb.read_text(), as_version=4))


async def test_notebook_errors(call, nb: Path) -> None:
    await call("Read", {"file_path": str(nb)})
    before = nb.read_text()
    r = await call("NotebookEdit", {"notebook_path": str(nb), "cell_id": "zz", "new_source": "q"})
    assert r.is_error and "<tool_use_error>" in r.text and "zz" in r.text
    r = await call(
        "NotebookEdit",
        {"notebook_path": str(nb), "cell_id": "c1", "new_source": "q", "edit_mode": "insert"},
    )
    assert r.is_error and "cell_type" in r.text
    r = await call("NotebookEdit", {"notebook_path": str(nb), "new_source": "q"})
    assert r.is_error and "cell_id" in r.text
    assert nb.read_text() == before


async def test_notebook_change_type_and_stale(call, nb: Path) -> None:
    await call("Read", {"file_path": str(nb)})
    r = await call(
        "NotebookEdit",
        {"notebook_path": str(nb), "cell_id": "c2", "new_source": "text", "cell_type": "markdown"},
    )
    assert not r.is_error
    cell = json.loads(nb.read_text())["cells"][1]
    assert cell["cell_type"] == "markdown" and "outputs" not in cell
    nbformat.validate(nbformat.reads(nb.read_text(), as_version=4))
    nb.write_text(nb.read_text().replace("text", "changed"))
    import os

    st = nb.stat()
    os.utime(nb, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    r = await call("NotebookEdit", {"notebook_path": str(nb), "cell_id": "c1", "new_source": "z"})
    assert r.is_error and "Read it again" in r.text


async def test_notebook_old_format_gets_no_ids(call, ws: Path) -> None:
    old = {
        "cells": [{"cell_type": "markdown", "metadata": {}, "source": "hi"}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    path = ws / "old.ipynb"
    path.write_text(json.dumps(old))
    await call("Read", {"file_path": str(path)})
    r = await call(
        "NotebookEdit",
        {
            "notebook_path": str(path),
            "cell_id": "cell-0",
            "new_source": "x",
            "cell_type": "code",
            "edit_mode": "insert",
        },
    )
    assert not r.is_error and r.data["cell_id"] == "cell-1"
    cells = json.loads(path.read_text())["cells"]
    assert all("id" not in c for c in cells)
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
