"""The installed daemon holds every package the source tree has: setuptools lists them by
hand (sandbox/ installs as agentd_sandbox), and a folder missing from the list only shows
when an installed daemon fails to import."""

import tomllib

from tests.support.data import ROOT


def test_every_source_package_is_listed_for_install() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "agentd").rglob("__init__.py")
    } | {
        ".".join(("agentd_sandbox", *init.parent.relative_to(ROOT / "sandbox").parts))
        for init in (ROOT / "sandbox").rglob("__init__.py")
    }
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages"
    assert "agentd_sandbox" in listed and config["package-dir"]["agentd_sandbox"] == "sandbox"
