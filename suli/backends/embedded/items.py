"""The item index of the embedded store: both legs, the page, browse, lookups, facets, writes.

`ItemStore` is the embedded half of the `base.ItemIndex` protocol, over the `StoreFile` it is
given. Visibility arrives resolved (a `Visibility`, made from the directory by the core) and is
rendered into SQL (`sql.where`): the item index reads no ACL, principal or token.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from suli.backends.base import (
    FACET_CAP,
    KEEP_GONE,
    BrowseKey,
    BulkOutcome,
    Facets,
    Hit,
    LegQuery,
    LegResults,
    MatchSet,
    Page,
    PageQuery,
    TextFields,
)
from suli.backends.embedded import sql as q
from suli.backends.embedded import typos
from suli.backends.embedded.db import StoreFile
from suli.backends.embedded.vectors import Generation, IntArray, StoreCache
from suli.counting import disjunctive
from suli.embedding import embed_hash
from suli.errors import InvalidInput
from suli.models import Filters, Item
from suli.text import TYPO_WEIGHT
from suli.visibility import Visibility

# The prefix tier's scores against the others' (they stay below their lowest, see _text_leg).
PREFIX_WEIGHT = 0.5


def _rowids(joined: str | None) -> IntArray:
    """Rowids from a group_concat: one string parses ~5x faster than a Python row per item."""
    return np.fromstring(joined, dtype=np.int64, sep=",") if joined else np.empty(0, np.int64)


class ItemStore:
    """Items and vectors in the store file; the generation's caches (`StoreCache`) are this
    part's, shared by the threads of one backend."""

    def __init__(self, db: StoreFile) -> None:
        self.db = db
        self._cache = StoreCache(db.dimension)

    @property
    def dimension(self) -> int:
        return self.db.dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self.db.dimension = value

    @property
    def model(self) -> str:
        return self.db.model

    @model.setter
    def model(self, value: str) -> None:
        self.db.model = value

    def refresh(self) -> None:
        """API parity with OpenSearch: a committed write is already searchable."""

    # ---- search ------------------------------------------------------------------------

    def search(self, query: LegQuery) -> LegResults:
        if query.regex:
            q.compile_regex(query.regex)  # a bad pattern is the caller's error, not a failed leg
        text: tuple[Hit, ...] = ()
        vector: tuple[Hit, ...] = ()
        text_total: int | None = None
        errors: dict[str, str] = {}
        timings: dict[str, float] = {}
        words: frozenset[str] | None = None
        with self.db.tx(timeout_s=query.timeout_s) as c:
            if query.text is not None:
                t0 = time.perf_counter()
                tm = self._text_match(c, query.vis, query.text, query.text_fields)
                text = self._text_leg(c, query, tm)
                text_ms = (time.perf_counter() - t0) * 1000
            rowids: dict[int, str] | None = None
            visible: IntArray | None = None
            if query.vector is not None:
                t0 = time.perf_counter()
                try:
                    vector, rowids, visible = self._vector_leg(c, query, query.vector, timings)
                except ValueError as e:  # a malformed query vector fails this leg only
                    errors["vector"] = f"invalid query vector: {e}"
                timings["vector_took"] = round((time.perf_counter() - t0) * 1000, 3)
            if query.text is not None:
                t0 = time.perf_counter()
                text_total, words = self._totals(c, query, tm, text, rowids, visible)
                text_ms += (time.perf_counter() - t0) * 1000
                timings["text_took"] = round(text_ms, 3)
        return LegResults(text, vector, errors, timings, text_total, word_matches=words)

    def _text_match(
        self, c: sqlite3.Connection, vis: Visibility, text: str, flavour: TextFields
    ) -> typos.TextMatch:
        """The query's words and corrections (typos.text_match), found once per generation
        for one caller: the page fetch and facets reuse what the legs found, and the
        generation's Vocabulary what earlier queries read. Exact: the vocabulary and the
        items behind it change only with a write, which moves the generation on, and the
        keys hold the whole visibility (a changed ACL is a new key)."""
        make = typos.text_match  # read at the call: a patched one (bench.typos) keys apart
        gen = self._generation(c)
        return self._cache.text(
            gen, (make, vis, text, flavour), lambda: make(c, vis, text, flavour, gen.vocab)
        )

    def _totals(
        self,
        c: sqlite3.Connection,
        query: LegQuery,
        tm: typos.TextMatch,
        text: Sequence[Hit],
        rowids: dict[int, str] | None,
        visible: IntArray | None,
    ) -> tuple[int, frozenset[str] | None]:
        """The text leg's total, and the vector hits (`rowids`, None: no vector leg) the
        words match too, in any tier. A leg cut at depth counts every match and checks the
        vector hits it left out in the same pass; otherwise its hits are all its matches.
        `visible`: the rows passing the query's visibility and filters, when known."""
        in_text = {h.id for h in text}
        words = None if rowids is None else frozenset(in_text & set(rowids.values()))
        if not (len(text) >= query.depth or (query.text_offset and not text)):
            return query.text_offset + len(text), words
        rest = []
        if rowids is not None and not query.text_offset:
            rest = [r for r, i in rowids.items() if i not in in_text]
        total, found = self._count_text(c, query, tm, rest, visible)
        if rowids is not None:
            words = frozenset(in_text & set(rowids.values())) | {rowids[r] for r in found}
        return total, words

    def _count_text(
        self,
        c: sqlite3.Connection,
        query: LegQuery,
        tm: typos.TextMatch,
        among: Sequence[int],
        visible: IntArray | None = None,
    ) -> tuple[int, list[int]]:
        """All matches of the text leg (every tier) under its filters (the leg stops at
        depth), and which rows of `among` match. With the rows passing the filters known
        (`visible`, the vector leg's candidates of this snapshot), the match lists are
        intersected with them in numpy (at 100k items, 1-3 words: 4 ms against 10 in SQL)."""
        tiers = tm.tiers(query.text_fields)
        if not tiers:
            return 0, []
        if visible is not None:
            matched: IntArray | None = None
            for table, expr in tiers:
                sql = f"SELECT group_concat(rowid) FROM {table} WHERE {table} MATCH ?"
                got = _rowids(c.execute(sql, (expr,)).fetchone()[0])
                matched = got if matched is None else np.union1d(matched, got)
            assert matched is not None
            inside = matched[np.isin(matched, visible, assume_unique=True)]
            found = np.asarray(among, dtype=np.int64)
            return len(inside), found[np.isin(found, inside)].tolist()
        rows = tm.rows(query.text_fields)
        assert rows is not None
        sub, sparams = rows
        where, params = q.where(query.vis, query.filters, query.regex)
        which = "NULL"
        if among:
            marks = ", ".join("?" * len(among))
            which = f"group_concat(CASE WHEN i.rowid IN ({marks}) THEN i.rowid END)"
        # The matches drive (CROSS JOIN keeps them the outer loop): filtering every visible
        # item by membership in the match lists took 21 ms at 100k items (1-3 words), 10 so.
        row = c.execute(
            f"SELECT count(*), {which} FROM ({sub}) m CROSS JOIN items i ON i.rowid = m.rowid "
            f"WHERE {where}",
            [*among, *sparams, *params],
        ).fetchone()
        return int(row[0]), [int(r) for r in row[1].split(",")] if row[1] else []

    def _ranked(
        self,
        c: sqlite3.Connection,
        query: LegQuery,
        expr: str,
        limit: int,
        flavour: TextFields | None = None,
        unless: Sequence[tuple[str, str]] = (),
    ) -> list[tuple[int, float]]:
        """(rowid, -bm25) of the rows matching `expr` in the `flavour` table (the query's by
        default) under the query's filters, best first; `unless`: not the rows these (FTS
        table, expression) pairs match (the earlier tiers)."""
        table = q.FTS_TABLES[flavour or query.text_fields]
        where, params = q.where(query.vis, query.filters, query.regex)
        for other, not_expr in unless:
            where += f" AND f.rowid NOT IN (SELECT rowid FROM {other} WHERE {other} MATCH ?)"
            params.append(not_expr)
        # bm25() in ORDER BY runs SQLite's sorter, measured 2x faster than FTS5's own
        # `ORDER BY rank`. Every match is scored to rank them, so a later text-mode window
        # (its offset) costs what a keyset would.
        rows = c.execute(
            f"""SELECT f.rowid, {q.bm25_call(table)} AS s
                FROM {table} f JOIN items i ON i.rowid = f.rowid
                WHERE {table} MATCH ? AND {where} ORDER BY s, f.rowid LIMIT ?""",
            [expr, *params, limit],
        ).fetchall()
        return [(r, -float(s)) for r, s in rows]  # bm25() is negated: lower is better

    def _scored(
        self, c: sqlite3.Connection, query: LegQuery, tm: typos.TextMatch, limit: int
    ) -> list[tuple[int, float]]:
        """(rowid, score) of the rows the exact words or a correction match, best first: a
        row's BM25 for its exact words plus, for each corrected word it lacks, the BM25 of the
        corrections it holds (on the unstemmed table, without the title's extra term: as
        OpenSearch's fuzzy clause scores `content.plain`) times their similarity and
        TYPO_WEIGHT. FTS5's bm25() is a sum over the phrases of a query, so each part is
        scored alone and the parts add up."""
        table, plain = q.FTS_TABLES[query.text_fields], q.FTS_TABLES["plain"]
        parts: list[str] = []
        params: list[Any] = []
        if tm.exact is not None:
            bm25 = q.bm25_call(table)
            parts.append(f"SELECT rowid AS r, {bm25} AS s FROM {table} WHERE {table} MATCH ?")
            params.append(tm.exact)
        bm25 = q.bm25_call(plain, title=False)
        for word, groups in tm.corrected:
            for sim, expr in groups:
                parts.append(
                    f"SELECT rowid AS r, ? * {bm25} AS s FROM {plain} WHERE {plain} MATCH ? "
                    f"AND rowid NOT IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)"
                )
                params += [TYPO_WEIGHT * sim, expr, word]
        where, wparams = q.where(query.vis, query.filters, query.regex)
        rows = c.execute(
            f"SELECT m.r, sum(m.s) AS t FROM ({' UNION ALL '.join(parts)}) m "
            f"JOIN items i ON i.rowid = m.r WHERE {where} GROUP BY m.r ORDER BY t, m.r LIMIT ?",
            [*params, *wparams, limit],
        ).fetchall()
        return [(r, -float(s)) for r, s in rows]  # bm25() is negated: lower is better

    def _text_leg(
        self, c: sqlite3.Connection, query: LegQuery, tm: typos.TextMatch
    ) -> tuple[Hit, ...]:
        """The rows the exact words or a correction match (DESIGN 3.12: a correction counts as
        its word would, by its rarity, times TYPO_WEIGHT, and only where the word itself is
        absent), then those found only through the last word's prefix. The window from
        `text_offset` of that order, with only the fields fusion reads."""
        want = query.text_offset + query.depth
        if tm.corrected:
            ranked = self._scored(c, query, tm, want)
        else:
            ranked = self._ranked(c, query, tm.exact, want) if tm.exact else []
        if tm.prefix is not None and len(ranked) < want:
            earlier = tm.tiers(query.text_fields)[:-1]  # the exact words, the corrections
            tier = self._ranked(c, query, tm.prefix, want - len(ranked), "plain", earlier)
            if tier:
                # Scaled under the lowest score so far, order kept: the tier's scores say it
                # ranks lower wherever a leg's scores are compared.
                floor = min((s for _, s in ranked), default=1.0)
                scale = min(PREFIX_WEIGHT, PREFIX_WEIGHT * floor / max(s for _, s in tier))
                ranked += [(r, s * scale) for r, s in tier]
        window = ranked[query.text_offset : want]
        if not window:
            return ()
        marks = ", ".join("?" * len(window))
        fields = {
            rowid: (item_id, outcome, replaced)
            for rowid, item_id, outcome, replaced in c.execute(
                f"SELECT rowid, id, outcome, superseded_by FROM items WHERE rowid IN ({marks})",
                [r for r, _ in window],
            )
        }
        hits = []
        for rowid, score in window:
            item_id, outcome, replaced = fields[rowid]
            hits.append(Hit(item_id, score, outcome, replaced))
        return tuple(hits)

    def page(self, query: PageQuery) -> Page:
        """The page's rows under visibility and filters (read again, in a transaction of its
        own) and the visible replacements; the core makes the snippets (suli.snippets)."""
        if query.regex:
            q.compile_regex(query.regex)
        where, params = q.where(query.vis, query.filters, query.regex)
        items: dict[int, Item] = {}
        with self.db.tx() as c:
            ids = list(dict.fromkeys(query.ids))
            for chunk in range(0, len(ids), 500):
                part = ids[chunk : chunk + 500]
                marks = ", ".join("?" * len(part))
                for row in c.execute(
                    f"SELECT {q.SELECT_ITEM} FROM items i WHERE {where} AND i.id IN ({marks})",
                    [*params, *part],
                ):
                    items[row[0]] = q.row_item(row)
            seen: set[str] = set()
            if query.replacements:
                vwhere, vparams = q.where(query.vis, Filters(), hidden_ok=True)
                reps = list(dict.fromkeys(query.replacements))
                marks = ", ".join("?" * len(reps))
                seen = {r for (r,) in c.execute(
                    f"SELECT i.id FROM items i WHERE {vwhere} AND i.id IN ({marks})",
                    [*vparams, *reps],
                )}  # fmt: skip
        return Page({it.id: it for it in items.values()}, frozenset(seen))

    def _generation(self, c: sqlite3.Connection) -> Generation:
        """This process's state for the snapshot `c` reads."""
        gen = c.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]
        return self._cache.generation(int(gen))

    def _vector_leg(
        self,
        c: sqlite3.Connection,
        query: LegQuery,
        vec: Sequence[float],
        timings: dict[str, float],
    ) -> tuple[tuple[Hit, ...], dict[int, str], IntArray]:
        """The hits, their rowids (rowid -> item id) and every row passing the query's
        visibility and filters (the candidates)."""
        qv = np.asarray(vec, dtype=np.float32)
        if qv.shape != (self.dimension,) or not np.all(np.isfinite(qv)):
            raise ValueError(f"expected {self.dimension} finite numbers")
        t0 = time.perf_counter()
        gen = self._generation(c)
        m = self._cache.matrix(
            gen,
            lambda: c.execute("SELECT rowid, vector FROM vectors ORDER BY rowid").fetchall(),
            lambda since: q.vector_changes(c, since),
        )
        timings["vector_matrix"] = round((time.perf_counter() - t0) * 1000, 3)
        # Visibility and filters pick the candidate rows in SQL first: exact filtered k-NN.
        where, params = q.where(query.vis, query.filters, query.regex)

        def find() -> IntArray:
            sql = f"SELECT group_concat(i.rowid) FROM items i WHERE {where}"
            return _rowids(c.execute(sql, params).fetchone()[0])

        cand, pos = self._cache.candidates(gen, (where, *params), m, find)
        if not len(cand):
            return (), {}, cand
        rowids, scores = m.top(cand, pos, qv, query.depth)
        rows = self._lean_rows(c, [int(r) for r in rowids])
        hits = []
        for r, score in zip(rowids, scores, strict=True):
            item_id, outcome, replaced = rows[int(r)]
            hits.append(Hit(item_id, float(score), outcome, replaced))
        return tuple(hits), {int(r): rows[int(r)][0] for r in rowids}, cand

    @staticmethod
    def _lean_rows(
        c: sqlite3.Connection, rowids: Sequence[int]
    ) -> dict[int, tuple[str, str | None, str | None]]:
        """(id, outcome, superseded_by) by rowid: what fusion reads, no text."""
        out: dict[int, tuple[str, str | None, str | None]] = {}
        for chunk in range(0, len(rowids), 500):
            part = rowids[chunk : chunk + 500]
            marks = ", ".join("?" * len(part))
            for rowid, *rest in c.execute(
                "SELECT i.rowid, i.id, i.outcome, i.superseded_by FROM items i "
                f"WHERE i.rowid IN ({marks})",
                part,
            ):
                out[rowid] = (rest[0], rest[1], rest[2])
        return out

    # ---- reads -------------------------------------------------------------------------

    def browse(
        self,
        vis: Visibility,
        filters: Filters,
        limit: int,
        timeout_s: float | None = None,
        regex: str | None = None,
        *,
        offset: int = 0,
        after: BrowseKey | None = None,
    ) -> tuple[list[Item], int]:
        if regex:
            q.compile_regex(regex)
        where, params = q.where(vis, filters, regex)
        page_where, page_params = where, list(params)
        if after is not None:  # keyset: the rows after `after` in browse order
            page_where, page_params = q.after_where(where, page_params, after)
            offset = 0
        with self.db.tx(timeout_s=timeout_s) as c:
            rows = c.execute(
                f"""SELECT {q.SELECT_ITEM} FROM items i WHERE {page_where}
                    ORDER BY i.last_ts DESC, i.id LIMIT ? OFFSET ?""",
                [*page_params, limit, offset],
            ).fetchall()
            total = c.execute(f"SELECT count(*) FROM items i WHERE {where}", params).fetchone()[0]
        return [q.row_item(r) for r in rows], int(total)

    def _by_ids(self, vis: Visibility, ids: Sequence[str], columns: str) -> list[tuple[Any, ...]]:
        """Rows of the visible items among ids; hidden ones included (a direct lookup names them)."""
        where, params = q.where(vis, Filters(), hidden_ok=True)
        unique = list(dict.fromkeys(ids))
        out: list[tuple[Any, ...]] = []
        with self.db.tx() as c:
            for chunk in range(0, len(unique), 500):
                part = unique[chunk : chunk + 500]
                marks = ", ".join("?" * len(part))
                out += c.execute(
                    f"SELECT {columns} FROM items i WHERE {where} AND i.id IN ({marks})",
                    [*params, *part],
                ).fetchall()
        return out

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        if not ids:
            return {}
        items = (q.row_item(r) for r in self._by_ids(vis, ids, q.SELECT_ITEM))
        return {it.id: it for it in items}

    def vectors(self, vis: Visibility, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        rows = self._by_ids(
            vis, ids, "i.id, (SELECT vector FROM vectors v WHERE v.rowid = i.rowid)"
        )
        return {r[0]: np.frombuffer(r[1], dtype=np.float32).tolist() for r in rows}

    def facets(
        self,
        vis: Visibility,
        filters: Filters,
        match: MatchSet | None = None,
        cap: int = FACET_CAP,
        timeout_s: float | None = None,
    ) -> Facets:
        with self.db.tx(timeout_s=timeout_s) as c:
            cond = None
            if match is not None and match.text is not None and not match.every:
                tm = self._text_match(c, vis, match.text, match.text_fields)
                cond = tm.condition(match.text_fields)
            gen = self._generation(c)

            def count(f: Filters, m: MatchSet | None) -> Facets:
                where, params = q.where(vis, f, m.regex if m else None)
                if m is not None:
                    where, params = q.match_where(where, params, m, cond)
                return self._cache.facets(
                    gen, (where, cap, *params), lambda: q.count_facets(c, where, params, cap)
                )

            # disjunctive() copies the lists: the cached ones are shared by later calls.
            return disjunctive(filters, cap, match, count)

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        where, params = q.where(vis, Filters())
        with self.db.tx() as c:
            rows = c.execute(
                f"""SELECT {q.SELECT_ITEM} FROM items i WHERE {where}
                    AND i.rowid IN (SELECT item FROM item_refs WHERE ref = ?)
                    ORDER BY i.last_ts DESC, i.id LIMIT ?""",
                [*params, item_id, limit],
            ).fetchall()
        return [q.row_item(r) for r in rows]

    def count(self) -> int:
        with self.db.tx() as c:
            return int(c.execute("SELECT count(*) FROM items").fetchone()[0])

    # ---- writes ------------------------------------------------------------------------

    def upsert(self, items: Sequence[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
        rows: list[tuple[Item, bytes | None]] = []
        rejected: dict[str, str] = {}
        for item, vec in items:
            if vec is None:  # keep the stored vector (its embed hash matched)
                rows.append((item, None))
                continue
            if len(vec) != self.dimension:
                raise InvalidInput(
                    f"vector: expected {self.dimension} dimensions, got {len(vec)}", "vector"
                )
            arr = np.asarray(vec, dtype=np.float32)
            if not np.all(np.isfinite(arr)):
                rejected[item.id] = "invalid vector: NaN or infinite values"
                continue
            rows.append((item, arr.tobytes()))
        if not rows:
            return BulkOutcome(rejected=rejected)
        with self.db.tx(write=True) as c:
            # Every write moves the generation on: each process's caches of the file expire.
            gen = q.next_generation(c)
            written: list[str] = []
            for item, blob in rows:
                ehash = embed_hash(self.model, item.embed_text())
                if blob is None and q.stored_hashes(c, [(item.workspace, item.id)]) != {
                    (item.workspace, item.id): ehash
                }:
                    rejected[item.id] = KEEP_GONE
                    continue
                q.write_item(c, item, blob, gen, ehash)
                written.append(item.id)
        return BulkOutcome(indexed=tuple(written), rejected=rejected)

    def stored_hashes(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        with self.db.tx() as c:
            return q.stored_hashes(c, list(dict.fromkeys(keys)))

    def delete(self, workspace: str, ids: Sequence[str]) -> BulkOutcome:
        unique = list(dict.fromkeys(ids))
        with self.db.tx(write=True) as c:
            gen = q.next_generation(c)
            found = {i: q.delete_item(c, workspace, i, gen) for i in unique}
            q.trim_deletes(c, gen)
        return BulkOutcome(
            indexed=tuple(i for i in unique if found[i]),
            missing=tuple(i for i in unique if not found[i]),
        )

    def all_items(self) -> Iterator[Item]:
        last = ("", "")
        # Pages by (workspace, id), unique since ids are per workspace: no transaction is held
        # open while the caller writes.
        while True:
            with self.db.tx() as c:
                rows = c.execute(
                    f"SELECT {q.SELECT_ITEM} FROM items i WHERE (i.workspace, i.id) > (?, ?) "
                    "ORDER BY i.workspace, i.id LIMIT 500",
                    last,
                ).fetchall()
            if not rows:
                return
            items = [q.row_item(r) for r in rows]
            yield from items
            last = (items[-1].workspace, items[-1].id)

    # ---- operations --------------------------------------------------------------------

    def ping(self) -> dict[str, object]:
        return {"backend": "embedded", "path": str(self.db.path), "items": self.count()}

    def close(self) -> None:
        self.db.close()
        self._cache.clear()
