"""Tool input: forgive the usual model slips, then check it against the schema.

Models send "true" for true and "30" for 30; the reference accepts those, so we
coerce them before validating. Everything else that does not fit the schema is
an InputError naming each parameter at fault, so the model can fix its call.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import jsonschema

from agentd.errors import InputError

_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_JSON_TYPES = {
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
    list: "array",
    dict: "object",
    type(None): "null",
}


def _coerce_value(value: Any, schema: dict[str, Any]) -> Any:
    if not isinstance(value, str):
        return value
    types = schema.get("type")
    types = set(types) if isinstance(types, list) else {types}
    if "boolean" in types and value in ("true", "false"):
        return value == "true"
    if types & {"number", "integer"} and _NUMBER.fullmatch(value.strip()):
        number = float(value)
        return int(number) if number.is_integer() and "." not in value else number
    if types & {"array", "object"} and value.strip()[:1] in "[{":
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(parsed, list | dict):
            return parsed
    return value


def coerce(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    return {
        key: _coerce_value(value, properties[key]) if key in properties else value
        for key, value in args.items()
    }


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = re.search(r"'([^']+)' is a required property", error.message)
        name = (
            f"{where}.{missing.group(1)}"
            if where and missing
            else (missing.group(1) if missing else where)
        )
        return f"The required parameter `{name}` is missing"
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        expected = "number" if expected == "integer" else expected  # as models know it
        got = _JSON_TYPES.get(type(error.instance), "value")
        return f"The parameter `{where}` type is expected as `{expected}` but provided as `{got}`"
    if error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        names = ", ".join(f"`{e}`" for e in extra) or "an unknown parameter"
        return f"An unexpected parameter {names} was provided"
    if error.validator == "enum":
        options = ", ".join(json.dumps(v) for v in error.validator_value)
        return f"The parameter `{where}` must be one of {options}"
    return f"The parameter `{where or 'input'}` is invalid: {error.message}"


# id(schema) -> (schema, its JSON, validator). Tool schemas are class constants, so the
# JSON text (the real cache key) is computed once per schema object, not once per call;
# the entry holds the schema itself, so its id cannot be reused while it is cached.
_by_identity: dict[int, tuple[dict[str, Any], str, jsonschema.protocols.Validator]] = {}


def _validator_for(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    entry = _by_identity.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[2]
    text = json.dumps(schema, sort_keys=True)
    validator = _validator(text)
    if len(_by_identity) >= 256:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, text, validator)
    return validator


def validate(tool_name: str, args: dict[str, Any], schema: dict[str, Any]) -> None:
    validator = _validator_for(schema)
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    issues = [_describe(e) for e in errors[:10]]
    noun = "issue" if len(issues) == 1 else "issues"
    raise InputError(
        f"InputValidationError: {tool_name} failed due to the following {noun}:\n"
        + "\n".join(issues)
    )
