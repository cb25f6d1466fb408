"""agentd/api/errors.py: each domain error ends an RPC with the status it always did, and
no module outside agentd/api names a gRPC status code."""

from __future__ import annotations

from pathlib import Path

import grpc

import agentd.daemon  # noqa: F401 - every module, so every error class is defined
from agentd.api.errors import status_of
from agentd.api.handlers.ports import TooMany
from agentd.api.handlers.task_io import NoInput, NotStarted
from agentd.foundation import errors
from agentd.network.ports import NotForwardable

ROOT = Path(__file__).parents[2]
Code = grpc.StatusCode

EXPECTED: dict[type[errors.AgentdError], grpc.StatusCode] = {
    errors.InvalidRequest: Code.INVALID_ARGUMENT,
    errors.NotFound: Code.NOT_FOUND,
    errors.SessionNotFound: Code.NOT_FOUND,
    errors.AlreadyExists: Code.ALREADY_EXISTS,
    errors.FailedPrecondition: Code.FAILED_PRECONDITION,
    errors.SessionClosed: Code.FAILED_PRECONDITION,
    errors.ConfigError: Code.FAILED_PRECONDITION,
    errors.Exhausted: Code.RESOURCE_EXHAUSTED,
    errors.StorageFull: Code.RESOURCE_EXHAUSTED,
    errors.Unavailable: Code.UNAVAILABLE,
    errors.StateDamaged: Code.FAILED_PRECONDITION,
    NotForwardable: Code.FAILED_PRECONDITION,
    TooMany: Code.RESOURCE_EXHAUSTED,
    NotStarted: Code.FAILED_PRECONDITION,
    NoInput: Code.FAILED_PRECONDITION,
}


def _subclasses(cls: type) -> set[type]:
    out = set(cls.__subclasses__())
    for sub in list(out):
        out |= _subclasses(sub)
    return out


def _instance(cls: type[errors.AgentdError]) -> errors.AgentdError:
    if cls in (errors.SessionNotFound, errors.SessionClosed):
        return cls("s1")  # type: ignore[call-arg]
    return cls("what to do next")


def test_each_error_ends_an_rpc_with_its_status() -> None:
    for cls, code in EXPECTED.items():
        assert status_of(_instance(cls)) == code, cls.__name__
    assert status_of(errors.AgentdError("x")) == Code.INTERNAL


def test_every_error_the_daemon_defines_has_a_status_of_its_own() -> None:
    defined = {c for c in _subclasses(errors.AgentdError) if c.__module__.startswith("agentd")}
    assert defined <= set(EXPECTED), defined - set(EXPECTED)


def test_only_the_api_names_grpc_status_codes() -> None:
    outside = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "agentd").rglob("*.py")
        if "api" not in path.relative_to(ROOT / "agentd").parts[:1]
        and "StatusCode" in path.read_text()
    ]
    assert outside == []
