"""Offset JSON of the pylog connector: Spark's shapes, canonical order, round trips. Pure."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_log.offsets import (
    OffsetJsonError,
    dumps_offsets,
    from_offset_dict,
    parse_partition_list,
    parse_partition_offsets,
    to_offset_dict,
)


@pytest.mark.parametrize("text, expected", [
    ('{"t":{"0":23,"1":-1}}', {("t", 0): 23, ("t", 1): -1}),
    ('{"a":{"0":-2},"b":{"3":0}}', {("a", 0): -2, ("b", 3): 0}),
    ('{}', {}),
    ('{"t":{}}', {}),
])
def test_parse_partition_offsets(text, expected):
    assert parse_partition_offsets(text) == expected


@pytest.mark.parametrize("text, fragment", [
    ("earliest", "expected JSON"),
    ('["t"]', "JSON object"),
    ('{"t":[0,1]}', "must map partition numbers"),
    ('{"t":{"x":1}}', "not a partition number"),
    ('{"t":{"-1":1}}', "not a partition number"),
    ('{"t":{"0":"5"}}', "not an integer"),
    ('{"t":{"0":1.5}}', "not an integer"),
    ('{"t":{"0":true}}', "not an integer"),
    ('{"t":{"0":-3}}', "out of range"),
    ('{"":{"0":1}}', "non-empty"),
])
def test_parse_partition_offsets_rejects(text, fragment):
    with pytest.raises(OffsetJsonError, match=fragment):
        parse_partition_offsets(text)


def test_minimum_zero_rejects_sentinels():
    with pytest.raises(OffsetJsonError, match="out of range"):
        parse_partition_offsets('{"t":{"0":-1}}', minimum=0)


@pytest.mark.parametrize("text, expected", [
    ('{"b":[1,0],"a":[2]}', [("a", 2), ("b", 0), ("b", 1)]),
    ('{"t":[0,0]}', [("t", 0)]),
    ('{}', []),
])
def test_parse_partition_list(text, expected):
    assert parse_partition_list(text) == expected


@pytest.mark.parametrize("text", ['{"t":{"0":1}}', '{"t":["0"]}', '{"t":[-1]}', "[]", "x"])
def test_parse_partition_list_rejects(text):
    with pytest.raises(OffsetJsonError):
        parse_partition_list(text)


def test_canonical_order_is_by_topic_then_partition_number():
    offsets = {("b", 10): 1, ("b", 2): 2, ("a", 1): 3}
    assert dumps_offsets(offsets) == '{"a":{"1":3},"b":{"2":2,"10":1}}'
    assert list(to_offset_dict(offsets)["b"]) == ["2", "10"]


def test_same_offsets_in_any_order_give_the_same_json():
    a = {("t", 0): 1, ("t", 1): 2, ("u", 0): 3}
    b = dict(reversed(list(a.items())))
    assert json.dumps(to_offset_dict(a)) == json.dumps(to_offset_dict(b))


offset_maps = st.dictionaries(
    st.tuples(st.text(alphabet="abcxyz._-", min_size=1, max_size=5), st.integers(0, 1000)),
    st.integers(0, 2**63 - 1),
    max_size=20,
)


@given(offset_maps)
def test_round_trip_through_spark_json(offsets):
    """What Spark stores (json.dumps of our dict) and hands back (json.loads) is what we gave."""
    stored = json.dumps(to_offset_dict(offsets))
    assert from_offset_dict(json.loads(stored)) == offsets
    assert dumps_offsets(from_offset_dict(json.loads(stored))) == dumps_offsets(offsets)


def test_from_offset_dict_rejects_sentinels_and_garbage():
    assert from_offset_dict({}) == {}
    with pytest.raises(OffsetJsonError):
        from_offset_dict({"t": {"0": -1}})
    with pytest.raises(OffsetJsonError):
        from_offset_dict(["t"])
