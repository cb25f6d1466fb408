"""A result over its tool's size budget goes to a file; the model gets a preview and the path."""

from __future__ import annotations

import re
from pathlib import Path

from agentd_client import Client


def test_large_result_is_saved_and_readable(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    line = "needle " + "y" * 440
    (workspace / "wide.txt").write_text("".join(f"{i} {line}\n" for i in range(300)))
    r = client.run_tool(sid, "Grep", {"pattern": "needle", "output_mode": "content"})
    assert not r.is_error, r.text
    assert r.text.startswith("<persisted-output>\nOutput too large (")
    assert len(r.text) < 5000
    path = re.search(r"Full output saved to: (\S+)", r.text).group(1)
    assert "wide.txt:1:0 needle" in r.text  # the preview is the start of the result
    # The session's own saved results are readable, even in default mode.
    full = client.run_tool(sid, "Read", {"file_path": path, "offset": 250, "limit": 1})
    assert not full.is_error, full.text
    assert full.text.startswith("250\twide.txt:250:249 needle")
