"""The embedded backend: items, vectors, ACLs, principals and tokens in one SQLite file.

The whole backend lives in this package. `EmbeddedBackend` (store) is composed of two parts,
each holding the one `StoreFile`, as the two protocols of `base.py` are apart:

db         StoreFile: the file, one connection per thread, the transaction helper (deadline,
           errors mapped once), the schema and its migration, the recorded embedding model
items      ItemStore: both legs, the page by id, browse, get, vectors, facets, upsert and
           delete, counts, export; the generation's caches. Visibility arrives resolved and
           is rendered into SQL: it reads no ACL
directory  EmbeddedDirectory: board ACLs, principals, tokens, sessions
store      EmbeddedBackend: builds the parts and answers the protocols through them

sql      schema, migrations, filters as SQL, rows in and out (pure)
typos    the vocabulary: corrections from the words of items the caller may see
vectors  exact vector search over an in-memory matrix kept per store generation
lru      the small LRU the vocabulary and the matrix keep
"""

from __future__ import annotations

from suli.backends.embedded.store import EmbeddedBackend

__all__ = ["EmbeddedBackend"]
