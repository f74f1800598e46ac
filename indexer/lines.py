"""Reading JSON lines: each non-blank line becomes an Item or a Rejection with its number.

No line stops the run: bytes that are not UTF-8, JSON the parser refuses, numbers of any size,
NaN and Infinity, over-long or over-deep lines and wrong types anywhere all end as a Rejection
with a reason (and the line's id when it has one), and the lines after it are read as usual.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from suli.errors import InvalidInput
from suli.files import open_private
from suli.models import Item
from suli.validate import check_structure, parse_item
from suli.vector_input import supplied_vector

# The longest line read: a maximal valid item (a 1M-character body, \u-escaped) fits; a
# longer one is rejected without being held in memory whole.
MAX_LINE_BYTES = 8 << 20
REJECT_TEXT_CHARS = 65_536  # what a rejects file keeps of a line too long to read whole
BOM = "\ufeff"
# Containers a line may nest (the item object is level 1): deeper lines are refused as a whole
# before validation, the same on every Python (json's own limit moved in 3.12). Below it, an
# over-deep field gets its own reason from validation (16 levels, see suli.validate).
MAX_LINE_DEPTH = 512
# An integer literal this long is beyond the float range (1.8e308 has 309 digits). It is read
# as an infinity, so the field it sits in refuses it with its own reason, rather than
# int() refusing the whole line past 4,300 digits (Python's guard against slow conversion).
MAX_INT_CHARS = 320


def _int(text: str) -> int | float:
    return float(text) if len(text) > MAX_INT_CHARS else int(text)


@dataclass
class Rejection:
    line: int
    id: str | None
    reason: str
    text: str | None = None  # the line as read (invalid UTF-8 replaced); None when not a line

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "id": self.id, "reason": self.reason, "text": self.text}


@dataclass(frozen=True)
class Supplied:
    """A vector an input line brings (`vector`, made by `vector_model`), not yet checked."""

    vector: Any
    model: Any

    def check(self, model: str, dimension: int) -> list[float] | str:
        """The vector at unit length, or why it cannot be used (the line is then rejected)."""
        try:
            return supplied_vector(self.vector, self.model, model, dimension)
        except InvalidInput as e:
            return e.message


def raw_lines(stream: IO[bytes] | IO[str]) -> Iterator[tuple[int, bytes | str, bool]]:
    """(line number, line, too long) for every line; a line over MAX_LINE_BYTES is cut there
    and the rest of it skipped in bounded reads, so memory stays bounded."""
    n = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        n += 1
        nl = b"\n" if isinstance(raw, bytes) else "\n"
        too_long = len(raw) > MAX_LINE_BYTES and not raw.endswith(nl)  # type: ignore[arg-type]
        if too_long:
            rest = raw
            while rest and not rest.endswith(nl):  # type: ignore[arg-type]
                rest = stream.readline(MAX_LINE_BYTES)
        yield n, raw, too_long


def _decode(n: int, raw: bytes | str) -> str | Rejection:
    """A line as text, or a Rejection naming the first byte that is not UTF-8."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        return Rejection(n, None, f"invalid UTF-8: byte 0x{raw[e.start]:02x} at byte {e.start + 1}",
                         text)  # fmt: skip


def json_error(e: json.JSONDecodeError, text: str) -> str:
    """Why a line is not JSON, with the 1-based column where it goes wrong; a line that stops
    mid-object (a cut or truncated line) says so rather than naming a column past its end."""
    msg = e.msg.removesuffix(" at")  # "Unterminated string starting at": the column follows
    if e.pos >= len(text):
        return f"invalid JSON: the line ends before the JSON does ({msg[0].lower()}{msg[1:]})"
    return f"invalid JSON: {msg} at column {e.colno}"


def _parse(n: int, text: str) -> Any:
    """The line's JSON value, or a Rejection saying why it is not JSON Suli reads."""
    try:
        # The line without its line break: json would place an error at the break on a
        # "line 2, column 1" that the file does not have.
        data = json.loads(text, parse_int=_int)
    except json.JSONDecodeError as e:
        return Rejection(n, None, json_error(e, text), text)
    except RecursionError:
        return Rejection(n, None, "invalid JSON: nested deeper than the parser allows", text)
    except ValueError as e:  # a literal the decoder cannot turn into a value
        return Rejection(n, None, f"invalid JSON: {e}", text)
    try:
        # json's own limit differs between Python versions (3.12+ parses far deeper):
        # one limit for every Python, before validation walks the structure.
        check_structure(data, MAX_LINE_DEPTH, None)
    except ValueError as e:
        return Rejection(n, None, f"invalid JSON: the line {e}", text)
    return data


def read_lines(
    stream: IO[bytes] | IO[str],
    texts: dict[int, str] | None = None,
    supplied: dict[int, Supplied] | None = None,
) -> Iterator[tuple[int, Item | Rejection]]:
    """Parse JSON lines: each non-blank line becomes an Item or a Rejection with its line number.

    Read as bytes and decoded line by line, so one bad line never stops the run: invalid
    UTF-8, JSON nested past the parser's limit and over-long lines are rejected like any
    other bad line. A byte-order mark starts line 1 of files some editors write: dropped
    there (elsewhere it is not a file's marker, and json refuses it). JSON error columns are
    json's (1-based characters of the line as an editor shows it, BOM not counted).
    texts: where the lines of valid items are kept until written (see index_items).
    supplied: where a line's own `vector` and `vector_model` go (checked by index_items).
    """
    for n, raw, too_long in raw_lines(stream):
        if too_long:
            cut = raw[:REJECT_TEXT_CHARS]
            shown = cut.decode("utf-8", "replace") if isinstance(cut, bytes) else cut
            yield n, Rejection(n, None, f"line longer than {MAX_LINE_BYTES} bytes", shown)
            continue
        line = _decode(n, raw)
        if isinstance(line, Rejection):
            yield n, line
            continue
        if n == 1:
            line = line.removeprefix(BOM)
        if not line.strip():
            continue
        text = line.rstrip("\r\n")
        data = _parse(n, text)
        if isinstance(data, Rejection):
            yield n, data
            continue
        item_id = (
            data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
        )
        own = None
        if isinstance(data, dict) and ("vector" in data or "vector_model" in data):
            own = Supplied(data.pop("vector", None), data.pop("vector_model", None))
        try:
            parsed = parse_item(data)
        except InvalidInput as e:
            yield n, Rejection(n, item_id, e.message, text)
            continue
        if texts is not None:
            texts[n] = text
        if own is not None and supplied is not None:
            supplied[n] = own
        yield n, parsed


def write_rejects(path: str, rejected: list[Rejection]) -> None:
    """The rejects file: one {line, id, reason, text} per line, the owner's only (the text is
    the item's own line, with whatever it holds)."""
    with open_private(path) as f:
        for r in rejected:
            f.write(json.dumps(r.to_json()) + "\n")
