"""No input line stops `suli index`: hostile lines between valid ones, generated.

Every hostile line is built to be invalid (its invalidity is decided here, from the item
format, not by asking the validator): numbers of any size, NaN and Infinity, deep or huge
arrays and wrong types, in any field or as the whole line. Each must end rejected with a
reason and its id when the line names one; every valid line must be indexed; the counts add up.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.pipeline import index_stream
from suli.backends.base import BulkOutcome
from suli.embedding import FakeEmbedder
from suli.models import Item

MODEL = FakeEmbedder()
DIM = MODEL.dimension

# JSON text of values no field of an item accepts, at any position (as the field's value, or
# inside a list or object under it): each is written as text, since Python's json cannot even
# write some of them (an int of 5,000 digits).
NON_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-2.5E+999"])
HUGE_INT = st.integers(min_value=310, max_value=6000).map(lambda k: "9" * k)
NEG_HUGE_INT = HUGE_INT.map(lambda s: "-" + s)
BAD_NUMBER = st.one_of(NON_FINITE, HUGE_INT, NEG_HUGE_INT)


def nest(depth: int, leaf: str) -> str:
    return "[" * depth + leaf + "]" * depth


# Containers deeper than the 16 levels a structured field may nest; some deeper than the
# 512 the whole line may nest (rejected before the item is read: no id then).
DEEP = st.builds(nest, st.integers(min_value=17, max_value=2000), st.sampled_from(["", "1", '"x"']))
# A number hidden inside a container, at a depth a field would otherwise accept.
BURIED = st.builds(
    lambda d, n, key: "{" + f'"{key}": ' + nest(d, n) + "}" if key else nest(d, n),
    st.integers(min_value=0, max_value=5),
    BAD_NUMBER,
    st.sampled_from(["", "k", "source"]),
)
HOSTILE_VALUE = st.one_of(BAD_NUMBER, DEEP, BURIED)

# Fields of an item with the JSON types each accepts (docs/items.md); any other type is wrong.
FIELD_TYPES: dict[str, set[str]] = {
    "id": {"str"},
    "workspace": {"str"},
    "title": {"str"},
    "body": {"str"},
    "kind": {"str"},
    "outcome": {"str", "null"},
    "board": {"str", "null"},
    "uploader": {"str", "null"},
    "agent": {"str", "null"},
    "superseded_by": {"str", "null"},
    "stations": {"list"},
    "references": {"list"},
    "tags": {"list"},
    "media_type": {"str"},
    "path": {"str"},
    "caption": {"str"},
    "provenance": {"object"},
    "created_at": {"str", "null"},
    "updated_at": {"str", "null"},
    "last_activity_at": {"str", "null"},
    "url": {"str"},
    "hidden": {"bool"},
}
SAMPLES = {
    "str": '"text"',
    "null": "null",
    "bool": "true",
    "int": "7",
    "float": "0.25",
    "list": '["a"]',
    "object": '{"a": 1}',
}
# A wrong type for a field: one of the samples whose JSON type the field does not accept
# (an int or a float is a "number" to every field here: none accepts either).
WRONG_TYPE = st.sampled_from(sorted(FIELD_TYPES)).flatmap(
    lambda f: st.tuples(
        st.just(f),
        st.sampled_from(
            [v for t, v in SAMPLES.items() if t not in FIELD_TYPES[f] and not (
                t in ("int", "float") and "number" in FIELD_TYPES[f])]
        ),
    )
)  # fmt: skip


def vector_text(values: Sequence[str]) -> str:
    return "[" + ",".join(values) + "]"


# Vectors a line may not bring: a bad number among fine ones, all zeros, the wrong length,
# not a list of numbers, or another model's.
BAD_VECTOR = st.one_of(
    st.builds(
        lambda k, bad: vector_text(["0.1"] * k + [bad] + ["0.1"] * (DIM - 1 - k)),
        st.integers(min_value=0, max_value=DIM - 1),
        BAD_NUMBER,
    ),
    st.just(vector_text(["0"] * DIM)),
    st.just(vector_text(["0.0"] * (DIM // 2) + ["-0.0"] * (DIM - DIM // 2))),
    st.integers(min_value=0, max_value=5000)
    .filter(lambda n: n != DIM)
    .map(lambda n: vector_text(["1"] * n)),
    st.just(vector_text(['"1"'] * DIM)),
    st.just(vector_text(["true"] * DIM)),
    st.just(vector_text(["[1]"] * DIM)),
    st.just("null"),
    st.just('{"0": 1}'),
)


@dataclass(frozen=True)
class Line:
    text: str
    valid: bool
    id: str | None  # the id the line names at its top level, when readable


def base(item_id: str) -> dict[str, str]:
    return {
        "id": json.dumps(item_id),
        "workspace": '"ws"',
        "title": json.dumps(f"title of {item_id}"),
    }


def render(fields: dict[str, str]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in fields.items()) + "}"


def depth(text: str) -> int:
    """How deep the line's containers nest (no generated string holds a bracket)."""
    level = most = 0
    for ch in text:
        if ch in "[{":
            level += 1
            most = max(most, level)
        elif ch in "]}":
            level -= 1
    return most


def readable(fields: dict[str, str], item_id: str, spoilt: str) -> Line:
    """An invalid line; its id is known when the id field is intact and the line nests no
    deeper than the 512 levels a line may (deeper lines are refused before they are read)."""
    text = render(fields)
    known = spoilt != "id" and depth(text) <= 512
    return Line(text, False, item_id if known else None)


@st.composite
def hostile(draw: st.DrawFn, item_id: str) -> Line:
    fields = base(item_id)
    how = draw(st.sampled_from(["value", "type", "vector", "model", "line"]))
    if how == "value":
        field = draw(st.sampled_from(sorted(FIELD_TYPES)))
        value = draw(HOSTILE_VALUE)
        fields[field] = value
        return readable(fields, item_id, field)
    if how == "type":
        field, value = draw(WRONG_TYPE)
        fields[field] = value
        return readable(fields, item_id, field)
    if how == "vector":
        fields["vector"] = draw(BAD_VECTOR)
        fields["vector_model"] = json.dumps(MODEL.name)
        return readable(fields, item_id, "vector")
    if how == "model":
        fields["vector"] = vector_text(["0.5"] * DIM)
        fields["vector_model"] = draw(
            st.one_of(HOSTILE_VALUE, st.sampled_from(['"other"', "null", "[]", '{"a": 1}', "1"]))
        )
        return readable(fields, item_id, "vector_model")
    whole = draw(st.one_of(HOSTILE_VALUE, st.sampled_from(['"item"', "[]", "12", "null", "{"])))
    return Line(whole, False, None)


@st.composite
def valid(draw: st.DrawFn, item_id: str) -> Line:
    fields = base(item_id)
    if draw(st.booleans()):  # a vector of its own, of any finite length but zero
        scale = draw(st.sampled_from(["1e-300", "0.001", "1", "1000", "1e300"]))
        k = draw(st.integers(min_value=0, max_value=DIM - 1))
        values = ["0.5"] * DIM
        values[k] = scale
        fields["vector"] = vector_text(values)
        fields["vector_model"] = json.dumps(MODEL.name)
    if draw(st.booleans()):
        fields["provenance"] = '{"n": 123456789012345678901234567890, "x": -1.5e300}'
    return Line(render(fields), True, item_id)


@st.composite
def files(draw: st.DrawFn) -> list[Line]:
    n = draw(st.integers(min_value=1, max_value=12))
    out = []
    for k in range(n):
        make = hostile if draw(st.booleans()) else valid
        out.append(draw(make(f"itm_{k}")))
    return out


class Store:
    """Keeps what it is given: the pipeline's writes, with each vector."""

    model = MODEL.name
    dimension = DIM

    def __init__(self) -> None:
        self.saved: dict[str, Sequence[float]] = {}

    def stored_hashes(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        return {}

    def upsert(self, items: Sequence[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
        for it, vec in items:
            assert vec is not None
            self.saved[it.id] = vec
        return BulkOutcome(indexed=tuple(it.id for it, _ in items))


@settings(
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,  # a fixed sequence of examples: the same run on every machine
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(files())
def test_every_line_ends_indexed_or_rejected_and_valid_lines_go_in(lines: list[Line]) -> None:
    data = "".join(line.text + "\n" for line in lines).encode()
    store = Store()
    summary = index_stream(io.BytesIO(data), store, MODEL, batch_size=5)  # type: ignore[arg-type]

    assert summary.stopped is None
    assert summary.read == len(lines)
    assert summary.indexed + len(summary.rejected) == summary.read
    got = {r.line: r for r in summary.rejected}
    assert len(got) == len(summary.rejected)  # each line reported once
    bad = {n for n, line in enumerate(lines, start=1) if not line.valid}
    assert set(got) == bad
    for n, r in got.items():
        assert r.reason and len(r.reason) < 500, r.reason
        assert r.text == lines[n - 1].text
        assert r.id == lines[n - 1].id, (r.reason, lines[n - 1].text[:200])
    assert set(store.saved) == {line.id for line in lines if line.valid}
    for vec in store.saved.values():
        assert math.isclose(math.fsum(x * x for x in vec), 1.0, rel_tol=1e-5)
