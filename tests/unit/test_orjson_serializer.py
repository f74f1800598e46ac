"""The client's orjson serializer writes and reads the same JSON as opensearch-py's own."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

from suli.backends.opensearch.client import SERIALIZER, OrjsonSerializer, make_client
from suli.settings import Settings

STDLIB = JSONSerializer()

# Text with everything JSON escapes or UTF-8 spells in several bytes (no lone surrogates: those
# cannot reach a body, Python refuses to encode them as UTF-8).
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=40,
)


def same_value(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit (-0.0 is not 0.0), ints not floats."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=1500, deadline=None)
@given(JSONISH)
def test_dumps_is_the_same_json(data: Any) -> None:
    assume(not isinstance(data, str))  # a str is a body already written: both pass it on
    ours, theirs = SERIALIZER.dumps(data), STDLIB.dumps(data)
    assert isinstance(ours, str)
    assert same_value(json.loads(ours), json.loads(theirs))
    # Reading back through either parser gives the same value as well.
    assert same_value(SERIALIZER.loads(theirs), STDLIB.loads(theirs))


@settings(max_examples=1500, deadline=None)
@given(st.recursive(TEXT | st.integers(-(2**63), 2**63) | st.booleans() | st.none(),
                    lambda inner: st.lists(inner, max_size=5)
                    | st.dictionaries(TEXT, inner, max_size=5), max_leaves=40))  # fmt: skip
def test_without_floats_the_text_is_identical(data: Any) -> None:
    """Non-ASCII text as UTF-8, escapes, spacing, key order: character for character."""
    assert SERIALIZER.dumps(data) == STDLIB.dumps(data)


def test_fixed_cases() -> None:
    aware = dt.datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=dt.UTC)
    body = {
        "title": 'Zürich — 東京 ✓ "quoted" \\ \n\t \u2028 \x00',
        "naive": dt.datetime(2026, 3, 1, 12, 30),
        "aware": aware,
        "offset": aware.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30))),
        "date": dt.date(2026, 3, 1),
        "uuid": uuid.UUID(int=7),
        "decimal": Decimal("1.25"),
        "np": [np.float32(0.1), np.int64(3), np.bool_(True), np.array([0.5, 0.25], np.float32)],
        "floats": [0.1, -0.0, 1e300, 5e-324, 0.30000000000000004, 2.5],
        7: "int key",
        "big": 2**64 + 1,  # past orjson's integers: the stdlib writes it
    }
    ours = SERIALIZER.dumps(body)
    assert ours == STDLIB.dumps(body)
    assert "東京" in ours and "0.10000000149011612" in ours  # UTF-8 kept; float32 as float64


def test_float_exponents_differ_only_in_spelling() -> None:
    for value in (1e-7, 1.5e-05, 1e16, 1.2345678901234568e17):
        ours, theirs = SERIALIZER.dumps([value]), STDLIB.dumps([value])
        assert json.loads(ours)[0].hex() == json.loads(theirs)[0].hex() == value.hex()


def test_loads_answers_orjson_refuses() -> None:
    """NaN: parsed by the stdlib as before rather than failing."""
    assert math.isnan(SERIALIZER.loads('{"a": NaN}')["a"])
    assert math.isinf(SERIALIZER.loads("[1e400]")[0])


def test_integers_of_the_engine_read_exactly() -> None:
    """OpenSearch's numbers are Java longs and unsigned longs: read as the same ints. Past
    that range orjson reads a float (the one reading that differs from the stdlib's)."""
    for n in (-(2**63), -1, 0, 2**53 + 1, 2**63 - 1, 2**64 - 1):
        got = SERIALIZER.loads(f'{{"n": {n}}}')["n"]
        assert type(got) is int and got == n
    assert SERIALIZER.loads(f"[{2**64}]") == [float(2**64)]
    with pytest.raises(SerializationError):
        SERIALIZER.loads("{not json")


def test_refusals_are_the_clients_errors() -> None:
    with pytest.raises(SerializationError):
        SERIALIZER.dumps({"x": object()})
    assert SERIALIZER.dumps('{"already": "text"}') == '{"already": "text"}'


def test_the_client_uses_it() -> None:
    client = make_client(Settings(backend="opensearch", opensearch_url="http://127.0.0.1:9"))
    try:
        assert client.transport.serializer is SERIALIZER
        assert isinstance(client.transport.deserializer.default, OrjsonSerializer)
    finally:
        client.close()
