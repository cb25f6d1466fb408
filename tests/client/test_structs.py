"""agentd_client.core.structs: plain data <-> Struct/Value, what goes in comes out."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agentd_client.core import structs
from agentd_client.v1 import agentd_pb2 as pb

DATA = {
    "s": "text",
    "n": 30,
    "f": 1.5,
    "neg": -7,
    "t": True,
    "none": None,
    "list": [1, "two", [3.25], {"k": False}],
    "empty": {},
    "nothing": [],
    "nested": {"a": {"b": {"c": [None]}}},
}


def test_round_trip_keeps_types_whole_numbers_as_ints() -> None:
    back = structs.from_struct(structs.to_struct(DATA))
    assert back == DATA
    assert type(back["n"]) is int and type(back["f"]) is float and type(back["t"]) is bool
    wire = structs.Struct.FromString(structs.to_struct(DATA).SerializeToString())
    assert structs.from_struct(wire) == DATA
    assert structs.from_value(structs.to_value([1, {"x": None}])) == [1, {"x": None}]


def test_keys_come_back_sorted_whatever_the_map_order() -> None:
    keys = ["zeta", "alpha", "mid", "beta"]
    back = structs.from_struct(structs.to_struct({k: 1 for k in keys}))
    assert list(back) == sorted(keys)


def test_keys_and_values_as_json_writes_them() -> None:
    back = structs.from_struct(structs.to_struct({2: "a", True: "b", "t": (1, 2)}))
    assert back == {"2": "a", "true": "b", "t": [1, 2]}
    with pytest.raises(TypeError, match="not JSON serializable"):
        structs.to_struct({"x": object()})
    with pytest.raises(TypeError, match="keys must be"):
        structs.to_struct({(1, 2): "x"})


def test_what_json_cannot_hold_goes_out_as_null() -> None:
    out = structs.to_struct({"nan": math.nan, "inf": [math.inf, -math.inf], "ok": 1.0})
    assert structs.from_struct(out) == {"nan": None, "inf": [None, None], "ok": 1}


def test_numbers_beyond_exact_doubles_stay_floats() -> None:
    big = float(2**60)
    assert type(structs.from_value(structs.to_value(big))) is float
    with pytest.raises(ValueError, match="too large for a JSON number"):
        structs.to_value(10**400)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_what_json_cannot_hold_is_refused_with_its_place(bad: float) -> None:
    s = structs.to_struct({"a": [0, {"b": 1}]})
    s.fields["a"].list_value.values[1].struct_value.fields["b"].number_value = bad
    with pytest.raises(ValueError, match=r"^input\.a\[1\]\.b: .* is not a JSON number$"):
        structs.from_struct(s, "input")


def test_a_value_with_nothing_set_is_refused() -> None:
    s = structs.Struct()
    s.fields["x"].SetInParent()
    with pytest.raises(ValueError, match=r"^in\.x: a google.protobuf.Value with no kind set$"):
        structs.from_struct(s, "in")


def test_fill_replaces_what_was_there_and_sets_an_empty_struct() -> None:
    holder = structs.Value()
    target = holder.struct_value
    structs.fill(target, {"old": 1})
    structs.fill(target, {})
    assert holder.HasField("struct_value") and structs.from_struct(target) == {}


def test_ordered_schema_puts_required_first_in_their_order_then_the_rest_by_name() -> None:
    schema = {
        "type": "object",
        "properties": {
            "zz": {"type": "string"},
            "old_string": {"type": "string"},
            "file_path": {"type": "string"},
            "aa": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"y": {}, "x": {}, "b": {}},
                    "required": ["y"],
                },
            },
        },
        "required": ["file_path", "old_string", "missing"],
    }
    out = structs.ordered_schema(schema)
    assert out == schema
    assert list(out["properties"]) == ["file_path", "old_string", "aa", "zz"]
    assert list(out["properties"]["aa"]["items"]["properties"]) == ["y", "b", "x"]


def _nested(depth: int) -> Any:
    """`depth` levels of objects and arrays, alternating, around a 1."""
    value: Any = 1
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def _down(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = value["a"] if isinstance(value, dict) else value[0]
    return value


@pytest.mark.parametrize("depth", [structs.MAX_DEPTH - 1, structs.MAX_DEPTH + 1, 500])
def test_deep_values_still_parse_deeper_parts_go_as_json_text(depth: int) -> None:
    """A hostile file's deep nesting must not make the events that carry it unparsable."""
    value = {"a": _nested(depth - 1)}
    finished, asked = pb.Event(), pb.Event()
    finished.call_finished.result.data.CopyFrom(structs.to_value(value))
    structs.fill(asked.permission_requested.input, value)
    finished = pb.Event.FromString(finished.SerializeToString())
    asked = pb.Event.FromString(asked.SerializeToString())
    for back in (
        structs.from_value(finished.call_finished.result.data),
        structs.from_struct(asked.permission_requested.input),
    ):
        if depth <= structs.MAX_DEPTH:
            assert back == value
        else:  # objects and arrays down to MAX_DEPTH, then the rest as its JSON text
            rest = _down(back, structs.MAX_DEPTH)
            assert isinstance(rest, str)
            assert json.loads(rest) == _down(value, structs.MAX_DEPTH)


def _encoded() -> structs.EncodedDict:
    items = {"filePath": "a", "patch": [{"lines": ["-x", "+y"]}]}
    wire = structs.to_value(items).SerializeToString()
    return structs.EncodedDict(items, wire, json.dumps(items), structs.levels(items))


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.__setitem__("filePath", "b"),
        lambda d: d.__delitem__("filePath"),
        lambda d: d.update(x=1),
        lambda d: d.pop("filePath"),
        lambda d: d.popitem(),
        lambda d: d.setdefault("x", 1),
        lambda d: d.clear(),
        lambda d: d.__ior__({"x": 1}),
    ],
)
def test_an_encoded_dict_cannot_change(change: Any) -> None:
    d = _encoded()
    with pytest.raises(TypeError, match="cannot change"):
        change(d)
    assert json.loads(d.json) == d and structs.from_value(structs.to_value(d)) == d


def test_an_encoded_dict_is_a_dict_its_copies_keep_or_drop_the_encodings() -> None:
    import copy
    import pickle

    d = _encoded()
    assert isinstance(d, dict) and json.dumps(d) == d.json
    plain = copy.copy(d)
    assert type(plain) is dict and plain == d
    plain["x"] = 1  # a copy is the caller's to change
    for again in (copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert type(again) is structs.EncodedDict and again == d
        assert (again.wire, again.json, again.levels) == (d.wire, d.json, d.levels)
