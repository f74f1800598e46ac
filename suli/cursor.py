"""Paging cursors: an opaque, signed position in one principal's ranked list for one search.

A cursor is `base64url(payload).base64url(HMAC-SHA256(secret, payload))`. The payload binds the
principal id, a digest of the normalised search (words, filters, mode, regex) and the offset, so
a cursor made for another caller or another search, or edited by hand, is refused. It carries
no visibility: the page is always computed again under the caller's current visibility.

Past the fused candidates a cursor also carries where it continues (`after`): browse's
position (the last item's last activity and id) and, in text mode, where the text leg's window
starts (its offset `base` and the id of the hit before it). Never an engine score: BM25 moves
with every tenant's documents (a shared index's statistics, or an invisible board's), so a
score would let the caller count the documents holding its words; the backend finds the hit's
sort values again itself (LegQuery.text_after). A cursor's bytes depend only on what the
caller sees.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from suli.errors import InvalidInput
from suli.models import SearchRequest
from suli.settings import Settings

VERSION = 1
MAX_CURSOR_CHARS = 512


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """The bytes of text, which must be their one spelling: unpadded base64url with zero
    trailing bits. Without this check the decoder (which skips stray characters, and ignores
    padding and trailing bits) read many strings as one cursor, so one cursor had many
    spellings that all passed the signature."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical spelling")
    return data


@dataclass(frozen=True)
class Position:
    """Where a page starts: `offset` in the answer's list; `after`: what to continue after
    (browse: the last item's last activity and id; text mode: [the id of the text hit before
    the window]; None: the offset alone); `base`: the offset where `after`'s run starts."""

    offset: int
    after: list[Any] | None = None
    base: int = 0


# OpenSearch's `index.max_result_window`: a page found by number alone (from + size) must end
# within it; a cursor's sort values go further (search_after).
MAX_FROM = 10_000
TOO_DEEP = f"page: a page number reaches only the first {MAX_FROM:,} results; follow `next`"


@dataclass(frozen=True)
class Window:
    """The run of text-leg hits a text-mode page is ranked in: `size` hits from position
    `base`, after the hit whose id is `after[0]` (None: by offset alone)."""

    size: int
    base: int = 0
    after: list[Any] | None = None
    too_deep: bool = False  # by offset alone, past MAX_FROM


def text_window(req: SearchRequest, at: Position, depth: int) -> Window:
    """Text mode pages through every match in windows of about `depth` hits, each fused and
    weighted like the first; hybrid and vector answers are one window (their fused list).

    A window holds a whole number of pages (`depth` cut down to a multiple of the limit, at
    least one page), so no page straddles two windows and page numbers stay plain offsets. Fusion's order of a
    window's first hits does not depend on where it is cut: a cut at 99 instead of 100 only
    moves the 100th hit into the next window."""
    if req.mode != "text":
        return Window(depth)
    size = max(depth - depth % req.limit, req.limit)
    if at.after is not None:
        return Window(size, at.base, at.after)
    base = at.offset // size * size
    return Window(size, base, None, too_deep=base + size > MAX_FROM)


@dataclass(frozen=True)
class Filled:
    """How a page was filled: `consumed` ranked ids (shown or skipped as no longer visible),
    the replacements the fetch checked, the visible ones among them, and which of the
    PageQuery's `words_of` the words match (None: not checked)."""

    consumed: int
    asked: frozenset[str]
    visible: frozenset[str]
    word_matches: frozenset[str] | None = None


def browse_after(after: list[Any] | None) -> tuple[datetime | None, str] | None:
    """A browse cursor's sort values as the backends take them (last activity, id)."""
    if after is None:
        return None
    when, item_id = after
    return (datetime.fromisoformat(when) if when else None, str(item_id))


def search_digest(req: SearchRequest) -> str:
    """What makes two requests the same search: case and spacing of words do not count
    (both legs ignore them); limit, explain and the page position do not either."""
    filters = asdict(req.filters)
    shape: dict[str, Any] = {
        "q": " ".join(req.query.casefold().split()),
        "f": {k: sorted(v) if isinstance(v, tuple) else v for k, v in filters.items()},
        "m": req.mode,
        "r": req.regex,
    }
    raw = json.dumps(shape, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def make(secret: bytes, principal_id: str, req: SearchRequest, at: Position | int) -> str:
    if isinstance(at, int):
        at = Position(at)
    data: dict[str, Any] = {
        "v": VERSION,
        "p": principal_id,
        "s": search_digest(req),
        "o": at.offset,
    }
    if at.after is not None:
        data["a"], data["b"] = at.after, at.base
    payload = json.dumps(data, separators=(",", ":")).encode()
    sig = hmac.new(secret, payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(sig)}"


def read_position(secret: bytes, cursor: str, principal_id: str, req: SearchRequest) -> Position:
    """The position a cursor stands for; InvalidInput naming `cursor` unless it is this caller's
    cursor for this very search, unaltered."""
    bad = InvalidInput("cursor: not a cursor of this search (start again from page 1)", "cursor")
    if len(cursor) > MAX_CURSOR_CHARS or cursor.count(".") != 1:
        raise bad
    body, sig = cursor.split(".")
    try:
        payload, mac = _unb64(body), _unb64(sig)
    except (binascii.Error, ValueError):
        raise bad from None
    if not hmac.compare_digest(mac, hmac.new(secret, payload, hashlib.sha256).digest()):
        raise bad
    try:
        data = json.loads(payload)
    except ValueError:
        raise bad from None
    if (
        not isinstance(data, dict)
        or data.get("v") != VERSION
        or data.get("p") != principal_id
        or data.get("s") != search_digest(req)
        or not isinstance(data.get("o"), int)
        or data["o"] < 0
        or not isinstance(data.get("a", []), list)
        or not isinstance(data.get("b", 0), int)
    ):
        raise bad
    return Position(int(data["o"]), data.get("a"), int(data.get("b", 0)))


def secret_for(settings: Settings) -> bytes:
    """The configured secret, else the one kept in the home directory (made on first use)."""
    if settings.cursor_secret is not None:
        return settings.cursor_secret.get_secret_value().encode()
    return _stored_secret(settings.cursor_secret_path)


def _stored_secret(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    try:
        # link() never replaces: of two processes starting at once, one secret wins, whole.
        os.link(tmp, path)
    except FileExistsError:
        return bytes.fromhex(path.read_text().strip())
    finally:
        tmp.unlink()
    return bytes.fromhex(value)
