"""Validation of what a user stores: items, principals and board ACLs, and ids to look up.

Search parameters are parsed in suli.search_params; what answers show of stored values
(provenance, links) is checked again in suli.shown.

Every failure raises InvalidInput naming the field, so each edge reports it the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator
from pydantic.json_schema import JsonDict

from suli.errors import InvalidInput
from suli.models import (
    BoardAcl,
    Item,
    Principal,
    Station,
)
from suli.vector_input import finite

# Free-form structured fields (provenance): a document a few levels deep is all a source
# system needs; deeper ones broke serialization of every answer holding the item, so they
# are refused at the door, as are large ones (serialized UTF-8 JSON bytes).
MAX_STRUCT_DEPTH = 16
MAX_STRUCT_BYTES = 65_536
# An item's link is opened by browsers: only web links or an app-relative path.
URL_SCHEMES = ("http", "https")
MAX_ID_BYTES = 512  # OpenSearch's limit on a document id

Outcome = Literal[
    "approved", "completed", "in-progress", "superseded", "rejected", "failed", "abandoned"
]
Kind = Literal["artifact", "work-record"]
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"


def _first_error(e: ValidationError) -> InvalidInput:
    err = e.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or None
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    elif err["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")  # our own validators' messages read whole
    return InvalidInput(f"{field}: {msg}" if field else msg, field=field)


class _Strict(BaseModel):
    # Schemas are built on first use: `suli search` imports this module for its limits only.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, defer_build=True)


class StationIn(_Strict):
    id: str = Field(min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=200)


# JSON Schema for what the validators below check in code, so `suli schema item` accepts
# exactly what validation does (docs/items.md; tests/unit/test_item_schema.py).
_NON_BLANK: JsonDict = {"type": "string", "minLength": 1, "pattern": r"\S"}
_UTC_OFFSET: JsonDict = {"pattern": r"([Zz]|[+-][0-9]{2}:?[0-9]{2})$"}


class ItemIn(_Strict):
    """An item as sent by a producer (one JSON line)."""

    id: str = Field(pattern=_ID)
    workspace: str = Field(pattern=_ID)
    kind: Kind = "artifact"
    title: str = Field(min_length=1, max_length=1000, json_schema_extra={"pattern": r"\S"})
    body: str = Field(default="", max_length=1_000_000)
    outcome: Outcome | None = None
    board: str | None = Field(default=None, pattern=_ID)
    uploader: str | None = Field(default=None, pattern=_ID)
    agent: str | None = Field(default=None, pattern=_ID)
    stations: list[StationIn] = Field(default_factory=list, max_length=100)
    superseded_by: str | None = Field(default=None, pattern=_ID)
    references: list[str] = Field(
        default_factory=list,
        max_length=500,
        json_schema_extra={"items": {**_NON_BLANK, "maxLength": 2000}},
    )
    tags: list[str] = Field(
        default_factory=list,
        max_length=100,
        json_schema_extra={"items": {**_NON_BLANK, "maxLength": 100}},
    )
    media_type: str = Field(default="text/markdown", max_length=200)
    path: str = Field(default="", max_length=2000)
    caption: str = Field(default="", max_length=10_000)
    provenance: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = Field(default=None, json_schema_extra=_UTC_OFFSET)
    updated_at: datetime | None = Field(default=None, json_schema_extra=_UTC_OFFSET)
    last_activity_at: datetime | None = Field(default=None, json_schema_extra=_UTC_OFFSET)
    url: str = Field(default="", max_length=2000)
    hidden: StrictBool = False  # "yes" or 1 is refused, as the JSON Schema says

    @field_validator("created_at", "updated_at", "last_activity_at", mode="before")
    @classmethod
    def _text_dates(cls, v: Any) -> Any:
        # JSON has no date type: a number would be read as a Unix time, which the schema (and a
        # reader of the file) would not expect.
        if v is not None and not isinstance(v, str | datetime):
            raise ValueError("must be an RFC 3339 string (e.g. 2026-01-31T12:00:00Z)")
        return v

    @field_validator("created_at", "updated_at", "last_activity_at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        if v is None:
            return None
        if v.tzinfo is None:
            raise ValueError("must be RFC 3339 with a UTC offset (e.g. 2026-01-31T12:00:00Z)")
        return v.astimezone(UTC)

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        out = [t.strip() for t in v]
        if any(not t or len(t) > 100 for t in out):
            raise ValueError("tags must be non-empty strings of at most 100 characters")
        return out

    @field_validator("references")
    @classmethod
    def _refs(cls, v: list[str]) -> list[str]:
        if any(not r.strip() or len(r) > 2000 for r in v):
            raise ValueError("references must be non-empty ids or URLs")
        return [r.strip() for r in v]

    @field_validator("provenance", mode="before")
    @classmethod
    def _structure(cls, v: Any) -> Any:
        check_structure(v, MAX_STRUCT_DEPTH, MAX_STRUCT_BYTES)
        check_numbers(v)
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        check_url(v)
        return v

    def to_item(self) -> Item:
        if self.superseded_by == self.id:
            raise InvalidInput("superseded_by: an item cannot replace itself", "superseded_by")
        last = self.last_activity_at or self.updated_at or self.created_at
        return Item(
            id=self.id,
            workspace=self.workspace,
            kind=self.kind,
            title=self.title,
            body=self.body,
            outcome=self.outcome,
            board=self.board,
            uploader=None if self.board else self.uploader,
            agent=self.agent,
            stations=tuple(Station(s.id, s.name) for s in self.stations),
            superseded_by=self.superseded_by,
            references=tuple(dict.fromkeys(self.references)),
            tags=tuple(dict.fromkeys(self.tags)),
            media_type=self.media_type,
            path=self.path,
            caption=self.caption,
            provenance=self.provenance,
            created_at=self.created_at,
            updated_at=self.updated_at,
            last_activity_at=last,
            url=self.url,
            hidden=self.hidden,
        )


def check_structure(value: Any, max_depth: int, max_bytes: int | None) -> None:
    """Raise ValueError when value nests deeper than max_depth containers (the value itself
    is level 1) or its JSON is larger than max_bytes (None: depth only). Iterative: any depth
    is safe to check."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > max_depth:
            raise ValueError(f"nests deeper than {max_depth} levels (the limit)")
        stack.extend((child, depth + 1) for child in children)
    if max_bytes is None:
        return
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        return  # not JSON: the field's own type check says so
    if size > max_bytes:
        raise ValueError(f"is {size} bytes as JSON, more than the limit of {max_bytes}")


def check_numbers(value: Any) -> None:
    """Raise ValueError when value holds NaN, an infinity or a number beyond the float range:
    answers are strict JSON (allow_nan=False), so such a stored number would fail every
    answer holding the item, and most JSON readers turn a huge integer into an infinity."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        elif isinstance(node, int | float) and not isinstance(node, bool) and not finite(node):
            raise ValueError("numbers must be finite and within the float range")


def check_url(url: str) -> None:
    """Accept "" (no link), http(s) URLs with a host, and app-relative paths ("/items/1");
    refuse javascript:, data:, file: and every other scheme, and "//host" links."""
    if not url:
        return
    if any(ord(ch) < 0x21 for ch in url):  # browsers drop these, so "java\tscript:" runs
        raise ValueError("must not hold spaces or control characters")
    if url.startswith("/") and not url.startswith("//") and not url.startswith("/\\"):
        return
    scheme, sep, rest = url.partition(":")
    if sep and scheme.lower() in URL_SCHEMES and rest.startswith("//") and len(rest) > 2:
        return
    raise ValueError("must be an http(s) URL or a path starting with / (javascript:, data:, "
                     "and other schemes are refused)")  # fmt: skip


def item_json_schema() -> dict[str, Any]:
    """The JSON Schema of one item line, generated from ItemIn (what validation accepts)."""
    from pydantic import TypeAdapter

    schema = TypeAdapter(ItemIn).json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://suli.dev/schema/item.json",
        **schema,
        "title": "Suli item",
        "description": "One line of `suli index` input (JSON lines). See docs/items.md. "
        "Also checked in code: superseded_by differs from id.",
    }


def lookup_id(value: str, field: str = "item_id") -> str:
    """An id to look up, delete or relate to: refused when empty or blank (OpenSearch fails
    on an empty id and no item can have a blank one) or longer than any stored id can be."""
    if not value.strip():
        raise InvalidInput(f"{field}: must not be empty", field)
    if len(value.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise InvalidInput(f"{field}: at most {MAX_ID_BYTES} bytes", field)
    return value


def parse_item(data: Any) -> Item:
    """Validate one item (a dict decoded from JSON) or raise InvalidInput naming the field."""
    if not isinstance(data, Mapping):
        raise InvalidInput("an item must be a JSON object", field=None)
    try:
        return ItemIn.model_validate(data).to_item()
    except ValidationError as e:
        raise _first_error(e) from None


class PrincipalIn(_Strict):
    id: str = Field(pattern=_ID)
    workspace: str = Field(pattern=_ID)
    kind: Literal["person", "agent"] = "person"
    groups: list[str] = Field(default_factory=list, max_length=500)


class BoardAclIn(_Strict):
    board: str = Field(pattern=_ID)
    workspace: str = Field(pattern=_ID)
    name: str = Field(default="", max_length=200)
    members: list[str] = Field(default_factory=list, max_length=10_000)
    groups: list[str] = Field(default_factory=list, max_length=1000)


def parse_principal(data: Any) -> Principal:
    try:
        p = PrincipalIn.model_validate(data)
    except ValidationError as e:
        raise _first_error(e) from None
    return Principal(id=p.id, workspace=p.workspace, kind=p.kind, groups=tuple(p.groups))


def parse_acl(data: Any) -> BoardAcl:
    try:
        a = BoardAclIn.model_validate(data)
    except ValidationError as e:
        raise _first_error(e) from None
    return BoardAcl(a.board, a.workspace, a.name, tuple(a.members), tuple(a.groups))
