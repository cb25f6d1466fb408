"""Tool input: forgive the usual model slips, then check it against the schema.

Models send "true" for true and "30" for 30; the reference accepts those, so we
coerce them before validating. Everything else that does not fit the schema is
an InputError naming each parameter at fault, so the model can fix its call.

A call's input is checked first by a validator fastjsonschema compiles to Python code,
once per schema (~30x cheaper than walking the schema with jsonschema on every call);
only input it refuses goes through jsonschema, whose errors name the parameters. The
fast check is used only for schemas made of keywords both read alike (_FAST_KEYWORDS),
and anything it accepts jsonschema accepts too (tests/calls/test_validation.py checks the two
agree on every tool's schema).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import fastjsonschema
import jsonschema

from agentd.foundation.errors import InputError

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
    if error.validator == "enum" and isinstance(error.validator_value, list):
        options = ", ".join(json.dumps(v) for v in error.validator_value)
        return f"The parameter `{where}` must be one of {options}"
    return f"The parameter `{where or 'input'}` is invalid: {error.message}"


# Keywords fastjsonschema (drafts 4-7) and jsonschema (2020-12, formats not asserted)
# read alike. A schema using any other keyword is checked by jsonschema alone.
_FAST_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
        "maxLength", "minItems", "maxItems", "pattern", "description", "title",
        "default", "examples", "format",
    }
)  # fmt: skip
# Keywords whose value maps names to schemas (the names are not keywords).
_SCHEMA_MAPS = frozenset({"properties"})


def _fast_keywords_only(schema: Any) -> bool:
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key not in _FAST_KEYWORDS:
            return False
        if key in _SCHEMA_MAPS:
            if not isinstance(value, dict) or not all(map(_fast_keywords_only, value.values())):
                return False
        elif key in ("items", "additionalProperties") and not _fast_keywords_only(value):
            return False
    return True


def _fast_validator(schema: dict[str, Any]) -> Callable[[Any], Any] | None:
    """A compiled check of `schema`, or None when only jsonschema may judge it. Defaults
    are not filled in (the input is the caller's), formats are not asserted (as
    jsonschema's default)."""
    if not _fast_keywords_only(schema):
        return None
    try:
        return fastjsonschema.compile(
            schema, use_default=False, use_formats=False, detailed_exceptions=False
        )
    except Exception:  # a schema it cannot compile: jsonschema alone judges it
        return None


# id(schema) -> (schema, its JSON, validator, fast validator). Tool schemas are class
# constants, so the JSON text (the real cache key) is computed once per schema object, not
# once per call; the entry holds the schema itself, so its id cannot be reused while it
# is cached.
_Entry = tuple[dict[str, Any], str, jsonschema.protocols.Validator, Callable[[Any], Any] | None]
_by_identity: dict[int, _Entry] = {}


def _entry(schema: dict[str, Any]) -> _Entry:
    entry = _by_identity.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry
    text = json.dumps(schema, sort_keys=True)
    entry = (schema, text, _validator(text), _fast_validator(json.loads(text)))
    if len(_by_identity) >= 256:
        _by_identity.clear()
    _by_identity[id(schema)] = entry
    return entry


def _validator_for(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    return _entry(schema)[2]


def validate(tool_name: str, args: dict[str, Any], schema: dict[str, Any]) -> None:
    _, _, validator, fast = _entry(schema)
    if fast is not None:
        try:
            fast(args)
            return
        except fastjsonschema.JsonSchemaException:
            pass  # refused: jsonschema says why, below
        except Exception:  # the compiled check itself failed: jsonschema judges
            pass
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    issues = [_describe(e) for e in errors[:10]]
    noun = "issue" if len(issues) == 1 else "issues"
    raise InputError(
        f"InputValidationError: {tool_name} failed due to the following {noun}:\n"
        + "\n".join(issues)
    )
