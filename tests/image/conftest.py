"""The image tests run under `make test-image` only (AGENTD_IMAGE_TESTS=1), which
builds the image first and runs them in one process: make test's workers each mount
in a namespace of their own, where podman's mounts would be seen by none of the
others' podman calls."""

from __future__ import annotations

import os

import pytest

from tests.image import pod


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    mine = [item for item in items if str(item.path).startswith(here)]
    if not mine:
        return
    if os.environ.get("AGENTD_IMAGE_TESTS") != "1":
        reason = "the image tests run under `make test-image` (it builds the image)"
    elif not pod.image_exists():
        reason = f"no image {pod.IMAGE}: `make image` builds it"
    else:
        return
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=reason))
