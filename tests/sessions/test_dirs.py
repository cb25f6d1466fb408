"""Session directories under a base the daemon made itself (agentd/sessions/dirs.py): an
unguessable name, taken up again only while it is still the daemon's own."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from agentd.sessions.dirs import SessionDirs

SID = "0123456789abcdef0123456789abcdef"


def _mode(path: str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_base_is_made_once_and_taken_up_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    first = SessionDirs(str(state))
    base = first.base()
    try:
        assert os.path.dirname(base) == "/tmp" and _mode(base) == 0o711
        assert Path(base, ".owner").read_text().strip() == str(state)
        out = first.output_dir(SID, None)
        assert out == os.path.join(base, SID, "output")
        # The next daemon of this state dir finds the same base.
        assert SessionDirs(str(state)).base() == base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_base_no_longer_ours_is_not_taken_up(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    base = SessionDirs(str(state)).base()
    made: list[str] = [base]
    try:
        os.chmod(base, 0o777)  # someone widened it: it is not trusted any more
        again = SessionDirs(str(state)).base()
        made.append(again)
        assert again != base and _mode(again) == 0o711
        # Its record swapped for a link to another base: not taken up either.
        shutil.rmtree(again)
        os.symlink(base, again)
        third = SessionDirs(str(state)).base()
        made.append(third)
        assert third not in (base, again) and not os.path.islink(third)
    finally:
        for path in made:
            if os.path.islink(path):
                os.unlink(path)
            else:
                shutil.rmtree(path, ignore_errors=True)


def test_an_emptied_base_goes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    dirs = SessionDirs(str(state))
    base = dirs.base()
    dirs.tmp_dir(SID, None)
    assert not dirs.remove_base() and os.path.isdir(base)  # a session's dir is still there
    dirs.remove_session(SID)
    assert dirs.remove_base() and not os.path.exists(base)


def test_the_same_object_notices_its_base_changed(tmp_path: Path) -> None:
    """A base checked once is not opened again on every call (each tool call asks for
    it), yet a change of it is seen at the next call: widened, or replaced by another
    directory at the same name that holds no .owner naming us."""
    state = tmp_path / "state"
    state.mkdir()
    dirs = SessionDirs(str(state))
    base = dirs.base()
    made: list[str] = [base]
    try:
        assert dirs.base() == base
        os.chmod(base, 0o777)
        again = dirs.base()
        made.append(again)
        assert again != base and _mode(again) == 0o711
        # Gone, and a directory like it made at its name (0711, ours, no .owner).
        shutil.rmtree(again)
        os.mkdir(again, 0o711)
        os.chmod(again, 0o711)
        third = dirs.base()
        made.append(third)
        assert third != again and Path(third, ".owner").read_text().strip() == str(state)
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
