"""A search's page after fusion: fetched under the caller's visibility again, refilled when an
item vanished in between, its replacements checked in the same request.

The legs return ids and scores only, so an item can change (move board, be deleted, its board
lose the caller) between the legs and this fetch: such an item is skipped and the page refilled
from the next ranked ids, so a page is full whenever the ranked list holds enough, and the next
cursor continues after the last id it consumed (docs/decisions.md, "Paging").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from suli.backends.base import Hit, ItemIndex, PageQuery
from suli.cursor import Filled
from suli.models import Item, Result
from suli.visibility import Visibility


def fill(
    backend: ItemIndex,
    fetch: PageQuery,
    ranked: Sequence[str],
    limit: int,
    hits: dict[str, Hit],
) -> tuple[dict[str, Item], Filled]:
    """The page: the first `limit` of `ranked` the caller may still see, in order. An item
    that became invisible (or stopped passing the filters) between the legs and this
    fetch is skipped and the page refilled from the next ranked ids (another fetch, only
    then); `consumed` says how far into `ranked` the page reached, for the next cursor.
    The words' check (`fetch.words_of`) rides on the first fetch."""
    shown: dict[str, Item] = {}
    asked: set[str] = set()
    seen: set[str] = set()
    words: frozenset[str] | None = None
    pos = 0
    extra = fetch.replacements  # the direct references' replacements ride on the first
    check = fetch.words_of
    while len(shown) < limit and pos < len(ranked):
        batch = ranked[pos : pos + limit - len(shown)]
        pos += len(batch)
        reps = {h.superseded_by for i in batch if (h := hits.get(i)) and h.superseded_by}
        q = replace(
            fetch,
            ids=tuple(batch),
            replacements=tuple(dict.fromkeys((*extra, *sorted(reps)))),
            words_of=check,
        )
        extra, check = (), ()
        asked |= set(q.replacements)
        got = backend.page(q)
        seen |= got.replacements
        if q.words_of:
            words = got.word_matches
        for i in batch:
            if i in got.items:
                shown[i] = got.items[i]
    return shown, Filled(pos, frozenset(asked), frozenset(seen), words)


def named_replacements(
    backend: ItemIndex, vis: Visibility, results: list[Result], filled: Filled
) -> list[Result]:
    """Name a replacement only when the caller may see it (as Searcher._resolve_superseded), from what the page fetch checked; a replacement it did not
    check (the item changed between the legs and the fetch) is looked up now."""
    late = [r for r in results if r.superseded_by and r.superseded_by not in filled.asked]
    visible = set(filled.visible)
    if late:
        visible |= set(backend.get_many(vis, [r.superseded_by or "" for r in late]))
    return [
        r if not r.superseded_by or r.superseded_by in visible else replace(r, superseded_by=None)
        for r in results
    ]
