"""OpenSearch backend: both legs in one _msearch through the items alias; writes with back-off.

The whole backend lives in this package. `OpenSearchBackend` (backend) is composed of parts,
each holding the one `Connection` and, given at construction, the other parts it asks:

    client      Connection: settings, the two clients, the items' alias, the read time budget;
                transport faults as core errors
    visibility  VisibilityUpkeep: the ACL-index reads visibility documents are made from, and
                their conflict-safe rewrite (visdocs holds the pure builders and checks)
    directory   AclDirectory (visibility): board ACLs, principals, tokens, sessions
    indices     Indices: physical index, alias, ACL index, migrations, the write guard
    workspaces  Workspaces: an index per workspace when SULI_ISOLATE_WORKSPACES is on
    reads       Reads (visibility, indices, workspaces): the two legs, the page by id, browse,
                get, vectors, facets, count, export
    writes      Writes (indices, workspaces): bulk upsert and delete with retries
    backend     OpenSearchBackend: builds the parts and answers the protocols through them

Pure modules: `bodies` (request bodies), `docs` (documents in and out), `visdocs`, `keys`
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
