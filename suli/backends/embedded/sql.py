"""Pure SQL pieces of the embedded backend: schema, filters, FTS5 match expressions, rows <-> items."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Any

import re2

from suli.backends.base import FACET_CAP, BrowseKey, Facets, MatchSet, TextFields
from suli.errors import InvalidInput
from suli.models import Filters, Item, Station
from suli.text import ENGLISH_STOPWORDS, FIELD_WEIGHTS, words
from suli.visibility import Visibility

SCHEMA_VERSION = 3  # 3: items and board ACLs keyed by (workspace, id); see migrate_2_to_3
DELETES_KEPT = 10_000  # generations of deletions kept for incremental matrix refreshes
REGEX_MAX_MEM = 8 << 20  # RE2's budget for one compiled pattern; larger ones are refused
FTS_TABLES: dict[TextFields, str] = {"stemmed": "fts_stem", "plain": "fts_plain"}
# Same tokens as OpenSearch's fields: "english" (Porter stems) and "suli_plain" (every word);
# remove_diacritics 2 plays the part of asciifolding.
TOKENIZERS: dict[TextFields, str] = {
    "stemmed": "porter unicode61 remove_diacritics 2",
    "plain": "unicode61 remove_diacritics 2",
}
FTS_COLUMNS = ("title", "body", "caption", "path", "tags_text")


# FTS5's bm25() column weights of the word leg, in FTS_COLUMNS order. The title counts as the
# body does inside the row: OpenSearch's text leg (bodies.exact_match) scores the title
# unweighted inside its combined `content` field and boosts it apart, by bodies.TITLE_BOOST x
# BM25 over the title field alone; bm25_call adds the same kind of term (TITLE_BOOST). A title
# weight of 1.25 inside the row instead (the form before) parted the backends' word legs on
# 14 % of their NFCorpus top 10, the largest single cause (bench/agreement_text.py).
BM25_COLUMNS = tuple(
    1.0 if c == "title" else FIELD_WEIGHTS["tags" if c == "tags_text" else c] for c in FTS_COLUMNS
)
# The title-only term's weight: OpenSearch's 0.25 is over a field normalised by the titles'
# own length; FTS5 normalises the title-only bm25() by the whole row's, so the same words
# weigh less and a little more weight makes up for it. 0.3 was chosen on NFCorpus dev among
# 0.15-0.35 (`python -m bench.agreement`: hybrid top-10 agreement 92.1 %, nDCG@10 0.3295,
# against 92.0 % and 0.3288 at 0.25, and 90.1 % and 0.3297 with the title at 1.25 in the row).
TITLE_BOOST = 0.3
# bm25()'s weights that keep the title column alone.
TITLE_ONLY = tuple(1.0 if c == "title" else 0.0 for c in FTS_COLUMNS)
# The facets of opensearch_bodies.FACET_FIELDS, in the same order.
FACET_NAMES = ("kind", "outcome", "board", "agent", "station", "tag")
# The unstemmed table's distinct words and their document counts (what fts5vocab lists, which
# walks every posting to find them): kept by every writer in its own transaction
# (embedded_typos.sync_terms), valid for the generation in meta's 'terms_generation'; a file
# written by a Suli without it (or before it existed) is read through fts5vocab until a Suli
# with it opens the file again.
TERMS_TABLE = "suli_terms"

ITEM_COLUMNS = (
    "id", "workspace", "kind", "scope", "outcome", "board", "uploader", "agent", "title", "body",
    "caption", "path", "tags", "tags_text", "stations", "superseded_by", "refs", "media_type",
    "url", "provenance", "created_at", "updated_at", "last_activity_at", "last_ts", "hidden",
)  # fmt: skip


# An id is a key within its workspace: the same id in two workspaces is two items,
# and a board id two boards, so no workspace can overwrite, squat or probe another's ids.
ITEMS_TABLE = """CREATE TABLE IF NOT EXISTS {name} (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL, workspace TEXT NOT NULL, kind TEXT NOT NULL,
            scope TEXT NOT NULL, outcome TEXT, board TEXT, uploader TEXT, agent TEXT,
            title TEXT NOT NULL, body TEXT NOT NULL, caption TEXT NOT NULL, path TEXT NOT NULL,
            tags TEXT NOT NULL, tags_text TEXT NOT NULL, stations TEXT NOT NULL,
            superseded_by TEXT, refs TEXT NOT NULL, media_type TEXT NOT NULL, url TEXT NOT NULL,
            provenance TEXT NOT NULL, created_at TEXT, updated_at TEXT, last_activity_at TEXT,
            last_ts REAL, hidden INTEGER NOT NULL, UNIQUE (workspace, id))"""
ACLS_TABLE = """CREATE TABLE IF NOT EXISTS {name} (board TEXT NOT NULL, workspace TEXT NOT NULL,
            name TEXT NOT NULL, members TEXT NOT NULL, groups_ TEXT NOT NULL,
            PRIMARY KEY (workspace, board))"""


def schema(dimension: int) -> list[str]:
    """DDL of a fresh store; FTS tables index the items table as external content."""
    fts_cols = ", ".join(FTS_COLUMNS)
    new_vals = ", ".join(f"new.{c}" for c in FTS_COLUMNS)
    old_vals = ", ".join(f"old.{c}" for c in FTS_COLUMNS)
    ddl = [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ITEMS_TABLE.format(name="items"),
        # Vectors apart from the rows, so loading them all for the matrix cache reads no text;
        # `gen` (the write's generation) and the deletion log let a process that holds the
        # matrix of an older generation read only what changed since.
        f"""CREATE TABLE IF NOT EXISTS vectors (
            rowid INTEGER PRIMARY KEY, gen INTEGER NOT NULL,
            vector BLOB NOT NULL CHECK (length(vector) = {4 * dimension}))""",
        "CREATE INDEX IF NOT EXISTS vectors_gen ON vectors (gen)",
        """CREATE TABLE IF NOT EXISTS vector_deletes (
            rowid INTEGER NOT NULL, gen INTEGER NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS vector_deletes_gen ON vector_deletes (gen)",
        # Covers the visibility rule, so the candidate rows of a vector search are found
        # without reading item bodies.
        """CREATE INDEX IF NOT EXISTS items_vis
            ON items (workspace, scope, board, uploader, hidden, kind, outcome, agent, last_ts)""",
        "CREATE INDEX IF NOT EXISTS items_recent ON items (workspace, last_ts DESC, id)",
        "CREATE TABLE IF NOT EXISTS item_tags (item INTEGER NOT NULL, tag TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS item_tags_tag ON item_tags (tag, item)",
        "CREATE INDEX IF NOT EXISTS item_tags_item ON item_tags (item)",
        """CREATE TABLE IF NOT EXISTS item_stations
            (item INTEGER NOT NULL, station_id TEXT NOT NULL, name TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS item_stations_id ON item_stations (station_id, item)",
        "CREATE INDEX IF NOT EXISTS item_stations_name ON item_stations (name, item)",
        "CREATE INDEX IF NOT EXISTS item_stations_item ON item_stations (item)",
        "CREATE TABLE IF NOT EXISTS item_refs (item INTEGER NOT NULL, ref TEXT NOT NULL)",
        # The embed hash of each item's vector (suli.embedding.embed_hash); a store written
        # before it existed simply has none, so its first re-upsert embeds once more.
        "CREATE TABLE IF NOT EXISTS item_embed (item INTEGER PRIMARY KEY, hash TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS item_refs_ref ON item_refs (ref, item)",
        "CREATE INDEX IF NOT EXISTS item_refs_item ON item_refs (item)",
        ACLS_TABLE.format(name="acls"),
        f"""CREATE TABLE IF NOT EXISTS {TERMS_TABLE}
            (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS principals (id TEXT PRIMARY KEY, workspace TEXT NOT NULL,
            kind TEXT NOT NULL, groups_ TEXT NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, principal_id TEXT NOT NULL,
            admin INTEGER NOT NULL, created_at TEXT NOT NULL)""",
    ]
    for flavour, table in FTS_TABLES.items():
        ddl += [
            f"""CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5({fts_cols},
                content='items', content_rowid='rowid', tokenize='{TOKENIZERS[flavour]}')""",
            f"""CREATE TRIGGER IF NOT EXISTS {table}_ai AFTER INSERT ON items BEGIN
                INSERT INTO {table}(rowid, {fts_cols}) VALUES (new.rowid, {new_vals}); END""",
            f"""CREATE TRIGGER IF NOT EXISTS {table}_ad AFTER DELETE ON items BEGIN
                INSERT INTO {table}({table}, rowid, {fts_cols})
                VALUES ('delete', old.rowid, {old_vals}); END""",
            f"""CREATE TRIGGER IF NOT EXISTS {table}_au AFTER UPDATE OF {fts_cols} ON items BEGIN
                INSERT INTO {table}({table}, rowid, {fts_cols})
                VALUES ('delete', old.rowid, {old_vals});
                INSERT INTO {table}(rowid, {fts_cols}) VALUES (new.rowid, {new_vals}); END""",
        ]
    return ddl


def migrate_2_to_3(c: sqlite3.Connection) -> None:
    """Re-key a format-2 store (ids unique across workspaces) in place, inside the caller's
    write transaction. Rowids are kept, so the FTS tables, vectors and side tables stay valid;
    dropping a table fires no triggers, and `schema` recreates the triggers and indexes."""
    c.execute(ITEMS_TABLE.format(name="items_v3"))
    c.execute(f"INSERT INTO items_v3 (rowid, {', '.join(ITEM_COLUMNS)}) "
              f"SELECT rowid, {', '.join(ITEM_COLUMNS)} FROM items")  # fmt: skip
    c.execute("DROP TABLE items")
    c.execute("ALTER TABLE items_v3 RENAME TO items")
    c.execute(ACLS_TABLE.format(name="acls_v3"))
    c.execute("INSERT INTO acls_v3 SELECT board, workspace, name, members, groups_ FROM acls")
    c.execute("DROP TABLE acls")
    c.execute("ALTER TABLE acls_v3 RENAME TO acls")
    c.execute("UPDATE meta SET value = '3' WHERE key = 'schema'")


# ---- filters ----------------------------------------------------------------------------------


def _in(column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
    return f"{column} IN ({', '.join('?' * len(values))})", list(values)


def visibility_sql(vis: Visibility) -> tuple[str, list[Any]]:
    """DESIGN section 2 as one WHERE term: workspace AND (workspace-wide OR my board OR mine)."""
    ors = ["i.scope = 'workspace'"]
    params: list[Any] = [vis.workspace]
    if vis.boards:
        clause, ps = _in("i.board", sorted(vis.boards))
        ors.append(clause)
        params += ps
    ors.append("(i.scope = 'personal' AND i.uploader = ?)")
    params.append(vis.principal_id)
    return f"(i.workspace = ? AND ({' OR '.join(ors)}))", params


def day_start(d: date) -> float:
    """Epoch seconds of 00:00 UTC on d."""
    return datetime.combine(d, time(), tzinfo=UTC).timestamp()


def where(
    vis: Visibility, filters: Filters, regex: str | None = None, *, hidden_ok: bool = False
) -> tuple[str, list[Any]]:
    """Every filter of a request over the items table aliased `i`, visibility first."""
    sql, params = visibility_sql(vis)
    terms = [sql]
    for column, values in (
        ("i.kind", filters.kinds),
        ("i.outcome", filters.outcomes),
        ("i.board", filters.boards),
        ("i.agent", filters.agents),
    ):
        if values:
            clause, ps = _in(column, values)
            terms.append(clause)
            params += ps
    if filters.stations:
        by_id, ps1 = _in("station_id", filters.stations)
        by_name, ps2 = _in("name", filters.stations)
        terms.append(f"i.rowid IN (SELECT item FROM item_stations WHERE {by_id} OR {by_name})")
        params += ps1 + ps2
    if filters.tags:
        clause, ps = _in("tag", filters.tags)
        terms.append(f"i.rowid IN (SELECT item FROM item_tags WHERE {clause})")
        params += ps
    if filters.since:
        terms.append("i.last_ts >= ?")
        params.append(day_start(filters.since))
    if filters.until:  # inclusive: everything before the start of the next UTC day
        terms.append("i.last_ts < ?")
        params.append(day_start(filters.until + timedelta(days=1)))
    if not (filters.include_hidden or hidden_ok):
        terms.append("i.hidden = 0")
    if filters.exclude_ids:
        clause, ps = _in("i.id", filters.exclude_ids)
        terms.append(f"NOT {clause}")
        params += ps
    if regex:
        terms.append("suli_regex(?, i.title, i.body)")
        params.append(regex)
    return " AND ".join(terms), params


def after_where(where: str, params: list[Any], after: BrowseKey) -> tuple[str, list[Any]]:
    """WHERE narrowed to the rows after `after` in browse order (`last_ts DESC, id`; SQLite
    sorts NULL last when descending, as OpenSearch's `missing: _last`)."""
    when, item_id = after
    if when is None:
        return f"{where} AND i.last_ts IS NULL AND i.id > ?", [*params, item_id]
    ts = _ts(when)
    return (
        f"{where} AND (i.last_ts < ? OR (i.last_ts = ? AND i.id > ?) OR i.last_ts IS NULL)",
        [*params, ts, ts, item_id],
    )


# ---- regex ------------------------------------------------------------------------------------


def _re2_options() -> re2.Options:
    opts = re2.Options()
    opts.case_sensitive = False
    opts.dot_nl = True  # like Lucene's regexp on the whole field: `.` crosses lines
    opts.log_errors = False
    opts.max_mem = REGEX_MAX_MEM
    return opts


@lru_cache(maxsize=64)
def compile_regex(pattern: str) -> Any:
    """A linear-time RE2 pattern: case-insensitive, found anywhere, `^`/`$` anchor the field."""
    try:
        return re2.compile(pattern, _re2_options())
    except re2.error as e:
        detail = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidInput(f"regex: invalid or too complex pattern ({detail})", "regex") from None


def regex_sql(pattern: str, title: str | None, body: str | None) -> int:
    """SQL function suli_regex(pattern, title, body): does the pattern occur in either?"""
    rx = compile_regex(pattern)
    return int(bool(rx.search(title or "")) or bool(rx.search(body or "")))


# ---- full text --------------------------------------------------------------------------------


def match_expression(text: str, flavour: TextFields) -> str | None:
    """An FTS5 MATCH string of quoted words, OR-joined; None when no word is left.

    Words come from suli.text.words (\\w+ runs), so they hold no quote and no FTS5 syntax;
    quoting them anyway makes AND/OR/NEAR/* plain words.
    """
    ws = words(text)
    if flavour == "stemmed":
        ws = [w for w in ws if w not in ENGLISH_STOPWORDS]
    unique = list(dict.fromkeys(ws))
    if not unique:
        return None
    return " OR ".join(quote_word(w) for w in unique)


def quote_word(word: str) -> str:
    """One word as an FTS5 string: AND/OR/NEAR/* inside it are plain text."""
    return '"' + word.replace('"', '""') + '"'


def bm25_call(table: str, title: bool = True) -> str:
    """FTS5's bm25() with the column weights (BM25_COLUMNS), plus, with `title`, TITLE_BOOST x
    bm25() of the title column alone (negative: lower is better).

    FTS5 fixes k1 = 1.2 and b = 0.75, and scores the weighted column counts against the whole
    row's length (BM25F-like). OpenSearch's text leg adds BM25 over the title field to the
    combined field's; the second call is that field as FTS5 can score it: its term counts
    are the title's, its length and document counts the row's (FTS5 keeps no others).
    Against OpenSearch's word leg on NFCorpus dev it brings the top-10 agreement from
    86.1 % to 90.4 % (bench/agreement.py).
    """
    call = f"bm25({table}, {', '.join(f'{float(w):g}' for w in BM25_COLUMNS)})"
    if not title:
        return call
    only = f"bm25({table}, {', '.join(f'{w:g}' for w in TITLE_ONLY)})"
    return f"({call} + {float(TITLE_BOOST):g} * {only})"


# ---- rows <-> items ---------------------------------------------------------------------------


def _iso(d: datetime | None) -> str | None:
    if d is None:
        return None
    return (d if d.tzinfo else d.replace(tzinfo=UTC)).isoformat().replace("+00:00", "Z")


def _dt(v: str | None) -> datetime | None:
    return datetime.fromisoformat(v.replace("Z", "+00:00")) if v else None


def _ts(d: datetime | None) -> float | None:
    if d is None:
        return None
    return (d if d.tzinfo else d.replace(tzinfo=UTC)).timestamp()


def item_row(item: Item) -> tuple[Any, ...]:
    """Values for ITEM_COLUMNS; binaries keep no body (as in the OpenSearch document)."""
    return (
        item.id, item.workspace, item.kind, item.scope, item.outcome, item.board, item.uploader,
        item.agent, item.title, "" if item.is_binary else item.body, item.caption, item.path,
        json.dumps(list(item.tags)), "\n".join(item.tags),
        json.dumps([{"id": s.id, "name": s.name} for s in item.stations]),
        item.superseded_by, json.dumps(list(item.references)), item.media_type, item.url,
        json.dumps(item.provenance), _iso(item.created_at), _iso(item.updated_at),
        _iso(item.last_activity_at), _ts(item.last_activity_at), int(item.hidden),
    )  # fmt: skip


def _list(raw: str) -> list[Any]:
    return [] if raw == "[]" else json.loads(raw)  # most lists are empty: skip the parser


SELECT_ITEM = "i.rowid, " + ", ".join(f"i.{c}" for c in ITEM_COLUMNS if c != "tags_text")


def row_item(row: sqlite3.Row | tuple[Any, ...]) -> Item:
    """An Item from a row selected with SELECT_ITEM (first column: rowid)."""
    (
        _rowid, id_, workspace, kind, _scope, outcome, board, uploader, agent, title, body,
        caption, path, tags, stations, superseded_by, refs, media_type, url, provenance,
        created_at, updated_at, last_activity_at, _last_ts, hidden,
    ) = row  # fmt: skip
    return Item(
        id=id_,
        workspace=workspace,
        kind=kind,
        title=title,
        body=body,
        outcome=outcome,
        board=board,
        uploader=uploader,
        agent=agent,
        stations=tuple(Station(s["id"], s["name"]) for s in _list(stations)),
        superseded_by=superseded_by,
        references=tuple(_list(refs)),
        tags=tuple(_list(tags)),
        media_type=media_type,
        path=path,
        caption=caption,
        provenance={} if provenance == "{}" else json.loads(provenance),
        created_at=_dt(created_at),
        updated_at=_dt(updated_at),
        last_activity_at=_dt(last_activity_at),
        url=url,
        hidden=bool(hidden),
    )


# ---- facets and writes ------------------------------------------------------------------------


def match_where(
    where: str, params: list[Any], match: MatchSet, text: tuple[str, list[Any]] | None
) -> tuple[str, list[Any]]:
    """WHERE narrowed to the items a search matched (see MatchSet): `text`, the text leg's own
    match condition over `i` (every tier; None: no word part), or one of the kept
    meaning-only ids."""
    if match.every:
        return where, params
    ors: list[str] = []
    extra: list[Any] = []
    if text is not None:
        ors.append(text[0])
        extra += text[1]
    if match.ids:
        clause, ps = _in("i.id", match.ids)
        ors.append(clause)
        extra += ps
    if not ors:
        return f"{where} AND 0", params
    return f"{where} AND ({' OR '.join(ors)})", [*params, *extra]


def count_facets(
    c: sqlite3.Connection, where: str, params: list[Any], cap: int = FACET_CAP
) -> Facets:
    """Facet values and counts of the items passing WHERE (items aliased `i`), most first:
    up to `cap` per facet (`more` when there are others); cap 0 counts only."""
    if not cap:
        total = c.execute(f"SELECT count(*) FROM items i WHERE {where}", params).fetchone()[0]
        return Facets(total=int(total), values={})
    counts: dict[str, Counter[str]] = {name: Counter() for name in FACET_NAMES}
    # One pass over the visible rows for the one-valued fields: the distinct combinations
    # are few, and the covering index holds every column read.
    combos = c.execute(
        f"SELECT i.kind, i.outcome, i.board, i.agent, count(*) FROM items i WHERE {where} "
        "GROUP BY i.kind, i.outcome, i.board, i.agent",
        params,
    ).fetchall()
    for *values, n in combos:
        for name, v in zip(("kind", "outcome", "board", "agent"), values, strict=True):
            if v is not None:
                counts[name][v] += n
    # Many-valued fields: an item counts once per value, however often it repeats it.
    for name, sql in (
        ("station", "SELECT s.name, count(DISTINCT s.item) FROM item_stations s "
                    "JOIN items i ON i.rowid = s.item"),
        ("tag", "SELECT t.tag, count(DISTINCT t.item) FROM item_tags t "
                "JOIN items i ON i.rowid = t.item"),
    ):  # fmt: skip
        rows = c.execute(f"{sql} WHERE {where} GROUP BY 1", params).fetchall()
        counts[name].update(dict(rows))
    ordered = {
        name: sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
        for name, counter in counts.items()
    }
    return Facets(
        total=sum(n for *_, n in combos),
        values={name: vs[:cap] for name, vs in ordered.items()},
        more={name: len(vs) > cap for name, vs in ordered.items()},
    )


_UPSERT = (
    f"INSERT INTO items ({', '.join(ITEM_COLUMNS)}) VALUES ({', '.join('?' * len(ITEM_COLUMNS))}) "
    f"ON CONFLICT (workspace, id) DO UPDATE SET "
    f"{', '.join(f'{c} = excluded.{c}' for c in ITEM_COLUMNS if c not in ('id', 'workspace'))} "
    "RETURNING rowid"
)
_SIDE_TABLES = ("item_tags", "item_stations", "item_refs", "item_embed")


def next_generation(c: sqlite3.Connection) -> int:
    """Move the store's generation on (inside the write transaction) and return it. The
    words table moves on with it only if it was current: this Suli keeps it in every write
    transaction (StoreFile.tx), a Suli without it leaves it behind."""
    row = c.execute(
        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation' "
        "RETURNING CAST(value AS INTEGER)"
    ).fetchone()
    gen = int(row[0])
    c.execute(
        "UPDATE meta SET value = ? WHERE key = 'terms_generation' AND value = ?",
        (str(gen), str(gen - 1)),
    )
    return gen


def write_item(
    c: sqlite3.Connection, item: Item, vector: bytes | None, gen: int, ehash: str
) -> None:
    """Insert or replace one item, its list rows, its vector and the vector's embed hash (the
    row keeps its rowid); vector None keeps the stored one (the caller checked it exists)."""
    rowid = c.execute(_UPSERT, item_row(item)).fetchone()[0]
    for table in _SIDE_TABLES:
        c.execute(f"DELETE FROM {table} WHERE item = ?", (rowid,))
    c.executemany("INSERT INTO item_tags VALUES (?, ?)", [(rowid, t) for t in item.tags])
    c.executemany(
        "INSERT INTO item_stations VALUES (?, ?, ?)", [(rowid, s.id, s.name) for s in item.stations]
    )
    c.executemany("INSERT INTO item_refs VALUES (?, ?)", [(rowid, r) for r in item.references])
    if vector is not None:
        c.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", (rowid, gen, vector))
    c.execute("INSERT INTO item_embed VALUES (?, ?)", (rowid, ehash))


def stored_hashes(
    c: sqlite3.Connection, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], str]:
    """The embed hash of the stored items among keys ((workspace, id) pairs)."""
    out: dict[tuple[str, str], str] = {}
    for start in range(0, len(keys), 400):  # under SQLite's bound-parameter limit
        chunk = keys[start : start + 400]
        where = " OR ".join("(i.workspace = ? AND i.id = ?)" for _ in chunk)
        rows = c.execute(
            "SELECT i.workspace, i.id, e.hash FROM items i JOIN item_embed e ON e.item = i.rowid "
            f"WHERE {where}",
            [x for k in chunk for x in k],
        ).fetchall()
        out.update({(w, i): h for w, i, h in rows})
    return out


def delete_item(c: sqlite3.Connection, workspace: str, item_id: str, gen: int) -> bool:
    """Remove an item with its list rows and vector (the FTS rows go by trigger); False when
    the workspace holds no such item."""
    row = c.execute(
        "DELETE FROM items WHERE workspace = ? AND id = ? RETURNING rowid", (workspace, item_id)
    ).fetchone()
    if row is None:
        return False
    for table in _SIDE_TABLES:
        c.execute(f"DELETE FROM {table} WHERE item = ?", (row[0],))
    c.execute("DELETE FROM vectors WHERE rowid = ?", (row[0],))
    c.execute("INSERT INTO vector_deletes VALUES (?, ?)", (row[0], gen))
    return True


def trim_deletes(c: sqlite3.Connection, gen: int) -> None:
    """Forget deletions older than DELETES_KEPT generations; older matrices then reload whole."""
    floor = gen - DELETES_KEPT
    if floor > 0:
        c.execute("DELETE FROM vector_deletes WHERE gen <= ?", (floor,))
        c.execute("INSERT OR REPLACE INTO meta VALUES ('deletes_floor', ?)", (str(floor),))


def vector_changes(
    c: sqlite3.Connection, since: int
) -> tuple[list[tuple[int, bytes]], list[int]] | None:
    """(rowid, vector) written and rowids deleted after generation `since`; None if forgotten."""
    floor = c.execute("SELECT value FROM meta WHERE key = 'deletes_floor'").fetchone()
    if floor is not None and int(floor[0]) >= since:
        return None
    changed = c.execute("SELECT rowid, vector FROM vectors WHERE gen > ?", (since,)).fetchall()
    deleted = c.execute("SELECT rowid FROM vector_deletes WHERE gen > ?", (since,)).fetchall()
    return changed, [r[0] for r in deleted]
