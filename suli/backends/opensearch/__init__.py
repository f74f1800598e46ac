"""OpenSearch backend: both legs in one _msearch through the items alias; writes with back-off.

The whole backend lives in this package. Cut into rooms, each a layer over the ones below it:

    client      clients, transport faults as core errors, the per-read time budget
    visibility  visibility-document upkeep (visdocs holds the pure builders and checks)
    directory   board ACLs, principals, tokens, sessions (the ACL index)
    indices     physical index, alias, ACL index, migrations, the write guard
    workspaces  an index per workspace when SULI_ISOLATE_WORKSPACES is on
    reads       the two legs, the page by id, browse, get, vectors, facets, count, export
    writes      bulk upsert and delete with retries
    backend     OpenSearchBackend: all of the above

Pure parts: `bodies` (request bodies), `docs` (documents in and out), `visdocs`, `keys`
(storage keys), `hnsw` (the vector graph's parameters, also a setting's type), `roles`.

Importing the package loads no client: `OpenSearchBackend`, `make_client` and `wrap` are
loaded on first use, so the settings (which read `hnsw`) start without opensearch-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from suli.backends.opensearch.backend import OpenSearchBackend
    from suli.backends.opensearch.client import make_client, wrap

__all__ = ["OpenSearchBackend", "make_client", "wrap"]


def __getattr__(name: str) -> Any:
    if name == "OpenSearchBackend":
        from suli.backends.opensearch.backend import OpenSearchBackend

        return OpenSearchBackend
    if name in ("make_client", "wrap"):
        from suli.backends.opensearch import client

        return getattr(client, name)
    raise AttributeError(name)
