"""The embedded backend: items, vectors, ACLs, principals and tokens in one SQLite file.

store    EmbeddedBackend: the item index and the directory over one connection per thread
sql      schema, migrations, filters as SQL, rows in and out (pure)
typos    the vocabulary: corrections from the words of items the caller may see
vectors  exact vector search over an in-memory matrix kept per store generation
lru      the small LRU the vocabulary and the matrix keep
"""

from __future__ import annotations

from suli.backends.embedded.store import EmbeddedBackend

__all__ = ["EmbeddedBackend"]
