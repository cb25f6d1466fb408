"""Each tool's input TypedDict (agentd/tools/*, checked by mypy in every method that
reads it) says what the tool's JSON schema says: the same keys, the same required ones,
of the schema's types."""

from __future__ import annotations

import importlib
import typing
from typing import Any, NotRequired, get_type_hints

from agentd.tools import TOOL_MODULES

# JSON schema type -> what the TypedDict may say for it.
TYPES: dict[str, tuple[Any, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (float,),
    "array": (list,),
    "object": (dict,),
}


def _input_type(tool: Any) -> Any:
    return get_type_hints(type(tool).call)["args"]


def test_every_tool_has_an_input_typeddict_of_its_schema() -> None:
    tools = [importlib.import_module(f"agentd.tools.{m}").TOOL() for m in TOOL_MODULES]
    assert len(tools) >= 13
    for tool in tools:
        typed = _input_type(tool)
        assert typing.is_typeddict(typed), f"{tool.name}: call's args is {typed}"
        schema = tool.input_schema
        props = schema.get("properties", {})
        # Read from the evaluated hints: under `from __future__ import annotations`,
        # Python 3.11's __required_keys__ cannot see NotRequired.
        extras = get_type_hints(typed, include_extras=True)
        required = {k for k, h in extras.items() if typing.get_origin(h) is not NotRequired}
        assert required == set(schema.get("required", [])), tool.name
        assert set(extras) == set(props), tool.name
        hints = get_type_hints(typed)
        for key, spec in props.items():
            if "type" not in spec:
                continue
            origin = typing.get_origin(hints[key]) or hints[key]
            assert origin in TYPES[spec["type"]], f"{tool.name}.{key}: {hints[key]}"
