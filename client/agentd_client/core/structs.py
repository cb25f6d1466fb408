"""Plain data <-> google.protobuf.Struct / Value, as the API carries JSON.

Tool inputs, schemas and results travel as Struct/Value so that in proto JSON they
are plain objects. Both ends convert through here. A Struct holds numbers as doubles;
read back, a whole number comes out as an int (a tool's `limit: 10` stays 10, and a
schema's `"minimum": 0` is printed as 0), so what goes in is what comes out. A
Struct keeps no key order (protobuf's map order even changes from one process to the
next), so its keys are read back sorted: the same content is the same text every time,
as prompt caching needs; `ordered_schema` gives a JSON schema's properties their order.

Nesting is bounded: protobuf parsers refuse a message nested past 100 levels (each
level of a JSON object costs three), so a part nested deeper than MAX_DEPTH goes as
its JSON text in a string. Without that, one deep value in a hostile file (a settings
file's `widens`, a tool's `data`) would make every replay of the session's journal
fail to parse. What JSON cannot hold never goes out: NaN and infinities are written as null (as
JavaScript's JSON.stringify writes them; a workspace's settings file, parsed by
Python, may hold them). Reading is strict: a NaN, an infinity or a Value with no
kind set is a ValueError naming where it is, which the daemon answers
INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

Struct = struct_pb2.Struct
Value = struct_pb2.Value

# Doubles hold every integer up to here exactly.
_EXACT = 2**53
# Levels of objects and arrays sent as such; deeper parts go as JSON text. An Event
# holding a Struct parses up to 32 levels of objects; this leaves room for envelopes.
MAX_DEPTH = 24


def _key(key: Any) -> str:
    """A mapping key as JSON writes it (json.dumps turns 1 into "1", True into "true")."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


class EncodedDict(dict[str, Any]):
    """A dict that carries its encodings, made elsewhere (a worker process, say): `wire`,
    its google.protobuf.Value; `json`, its json.dumps text; `levels`, how deep its objects
    and arrays nest (itself 1). Converting it is one parse in C, not a Value per item, and
    the daemon's journal copies its text (agentd.sessions.events).

    Both encodings are of the dict's own items, so it cannot change once made: every
    method that would change it raises TypeError. It stays a dict (json.dumps, isinstance
    and the C parts of protobuf take it as one); a copy (dict(d), copy.copy) is a plain,
    mutable dict, and copy.deepcopy and pickle give an EncodedDict of the same items."""

    __slots__ = ("wire", "json", "levels")

    def __init__(self, items: Mapping[str, Any], wire: bytes, json_text: str, levels: int) -> None:
        super().__init__(items)
        self.wire = wire
        self.json = json_text
        self.levels = levels

    def _frozen(self, *_: Any, **__: Any) -> Any:
        raise TypeError("an EncodedDict cannot change: its encodings are of its items")

    __setitem__ = __delitem__ = __ior__ = _frozen
    clear = pop = popitem = setdefault = update = _frozen

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> EncodedDict:
        import copy

        return EncodedDict(copy.deepcopy(dict(self), memo), self.wire, self.json, self.levels)

    def __reduce__(self) -> tuple[Any, ...]:
        return (EncodedDict, (dict(self), self.wire, self.json, self.levels))


def levels(value: Any) -> int:
    """How deep the objects and arrays in `value` nest (a scalar 0, `[]` 1, `[{}]` 2)."""
    if isinstance(value, Mapping):
        return 1 + max(map(levels, value.values()), default=0)
    if isinstance(value, list | tuple):
        return 1 + max(map(levels, value), default=0)
    return 0


def _set(target: Value, value: Any, depth: int) -> None:
    if type(value) is EncodedDict and depth + value.levels - 1 <= MAX_DEPTH:
        # Encoded at depth 1, it is the same Value at this depth: nothing in it nests
        # past MAX_DEPTH from here either.
        target.ParseFromString(value.wire)
    elif depth > MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        target.string_value = json.dumps(value, ensure_ascii=False, default=_unserializable)
    elif value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            raise ValueError(f"{value} is too large for a JSON number") from None
        if math.isfinite(number):
            target.number_value = number
        else:
            target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, Mapping):
        _fill(target.struct_value, value, depth)
    elif isinstance(value, list | tuple):
        items = target.list_value.values
        del items[:]  # make the list set even when it stays empty
        for item in value:
            _set(items.add(), item, depth + 1)
    else:
        _unserializable(value)


def _unserializable(value: Any) -> None:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _fill(target: Struct, value: Mapping[str, Any], depth: int) -> Struct:
    target.Clear()
    target.SetInParent()
    for key, item in value.items():
        _set(target.fields[_key(key)], item, depth + 1)
    return target


def fill(target: Struct, value: Mapping[str, Any]) -> Struct:
    """Set `target` (a Struct field, say) to `value`; returns it."""
    return _fill(target, value, 1)


def to_struct(value: Mapping[str, Any]) -> Struct:
    return fill(Struct(), value)


def to_value(value: Any) -> Value:
    out = Value()
    _set(out, value, 1)
    return out


def _number(n: float, where: str) -> int | float:
    if not math.isfinite(n):
        raise ValueError(f"{where}: {n} is not a JSON number")
    if n.is_integer() and abs(n) <= _EXACT:
        return int(n)
    return n


def from_value(value: Value, where: str = "value") -> Any:
    """The plain data a Value holds (dict, list, str, int, float, bool, None)."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return _number(value.number_value, where)
    if kind == "bool_value":
        return value.bool_value
    if kind == "null_value":
        return None
    if kind == "struct_value":
        return from_struct(value.struct_value, where)
    if kind == "list_value":
        return [from_value(v, f"{where}[{i}]") for i, v in enumerate(value.list_value.values)]
    raise ValueError(f"{where}: a google.protobuf.Value with no kind set")


def from_struct(struct: Struct, where: str = "value") -> dict[str, Any]:
    """The plain dict a Struct holds; ValueError (naming the place) if JSON cannot hold it."""
    fields = struct.fields
    return {key: from_value(fields[key], f"{where}.{key}") for key in sorted(fields)}


def ordered_schema(schema: Any) -> Any:
    """A JSON schema with each object's properties in a stable, meaningful order: the
    required ones as `required` lists them (the order the tool's author gave), then the
    rest by name. Models tend to write an input's keys in the schema's order."""
    if isinstance(schema, list):
        return [ordered_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: ordered_schema(value) for key, value in schema.items()}
    props = out.get("properties")
    if isinstance(props, dict):
        required = [r for r in out.get("required") or () if isinstance(r, str) and r in props]
        rest = sorted(k for k in props if k not in required)
        out["properties"] = {k: props[k] for k in dict.fromkeys([*required, *rest])}
    return out


def optional_struct(message: Any, field: str) -> dict[str, Any] | None:
    """A Struct field of `message` as a dict, or None when it is unset."""
    return from_struct(getattr(message, field), field) if message.HasField(field) else None
