"""The installed daemon holds every package and data file the source tree has: a folder
setuptools does not find, or a data file package-data does not name, only shows when an
installed daemon fails to import or to read it."""

import fnmatch
import tomllib

from setuptools import find_packages

from tests.support.data import ROOT


def _config() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_source_package_is_found_for_install() -> None:
    find = _config()["packages"]["find"]
    found = set(find_packages(str(ROOT), include=find["include"], exclude=find["exclude"]))
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("agentd", "agentd_sandbox")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk - found == set(), "setuptools would leave these out"
    assert not {p for p in found if p.startswith("agentd_client")}


def test_every_data_file_is_package_data() -> None:
    data = _config()["package-data"]
    missing = []
    for top in ("agentd", "agentd_sandbox"):
        for path in (ROOT / top).rglob("*"):
            if path.suffix not in (".toml", ".json") or "__pycache__" in path.parts:
                continue
            package = ".".join(path.parent.relative_to(ROOT).parts)
            if not any(fnmatch.fnmatch(path.name, p) for p in data.get(package, [])):
                missing.append(str(path.relative_to(ROOT)))
    assert missing == [], "add these to [tool.setuptools.package-data]"
