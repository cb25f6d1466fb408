"""Tool input validation: the compiled fast check never accepts what jsonschema refuses."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from agentd.calls import validation
from agentd.foundation.errors import InputError
from agentd.tools import default_registry
from tests.e2e.test_fuzz_inputs import ODD_VALUES

TOOLS = sorted(default_registry().tools, key=lambda t: t.name)


def _inputs(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Inputs around the schema: every property alone with every odd value, pairs of
    properties, required ones missing, and an unknown key."""
    props = list(schema.get("properties", {}))
    out: list[dict[str, Any]] = [{}, {"no_such_parameter": 1}]
    for name in props:
        out.extend({name: v} for v in ODD_VALUES)
    for a, b in itertools.combinations(props, 2):
        out.extend({a: va, b: vb} for va, vb in zip(ODD_VALUES, reversed(ODD_VALUES), strict=True))
    required = schema.get("required", [])
    for value in ODD_VALUES:
        out.append({r: value for r in required})
        out.append({**{r: value for r in required}, "no_such_parameter": value})
    return out


def _jsonschema_errors(args: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    return [e.message for e in validation._validator_for(schema).iter_errors(args)]


def test_the_small_tools_get_the_fast_check() -> None:
    fast = {t.name for t in TOOLS if validation._entry(t.input_schema)[3] is not None}
    assert {"Read", "Write", "Edit", "Glob", "Grep"} <= fast, fast


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_validate_agrees_with_jsonschema(tool: Any) -> None:
    schema = tool.input_schema
    for args in _inputs(schema):
        before = copy.deepcopy(args)
        errors = _jsonschema_errors(args, schema)
        try:
            validation.validate(tool.name, args, schema)
            accepted = True
        except InputError:
            accepted = False
        assert accepted == (not errors), (tool.name, args, errors)
        assert args == before, "validation changed the input (a default filled in?)"


def test_a_schema_with_other_keywords_is_judged_by_jsonschema_alone() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
    }
    assert validation._entry(schema)[3] is None
    validation.validate("T", {"a": 1}, schema)
    with pytest.raises(InputError, match="`a` is invalid"):
        validation.validate("T", {"a": 1.5}, schema)


def test_refused_input_names_the_parameter() -> None:
    tool = default_registry().get("Read")
    assert tool is not None
    with pytest.raises(InputError, match="The required parameter `file_path` is missing"):
        validation.validate("Read", {}, tool.input_schema)
    with pytest.raises(InputError, match="`limit` type is expected as `number`"):
        validation.validate("Read", {"file_path": "x", "limit": "ten"}, tool.input_schema)
