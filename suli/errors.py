"""Errors raised by the Suli core.

    SuliError
    ├── InvalidInput(field)      bad user input; nothing was changed
    ├── NotFound                 no such item, or the caller may not see it
    ├── Forbidden                authenticated, but not allowed
    ├── Unauthorized             no or unknown credentials
    ├── RateLimited              too many requests for this principal
    ├── BackendUnavailable       the search backend cannot be reached
    │   └── ModelMismatch        the store's vectors come from another embedding model
    ├── DeadlineExceeded         the request ran past its deadline
    └── IndexingError            a write failed for a reason other than bad input

Each edge (HTTP, CLI, MCP) maps these once to its own status codes.
"""

from __future__ import annotations


class SuliError(Exception):
    """Base of every error the core raises on purpose."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(SuliError):
    """Bad user input, naming the field at fault."""

    code = "invalid_input"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class NotFound(SuliError):
    code = "not_found"


class Forbidden(SuliError):
    code = "forbidden"


class Unauthorized(SuliError):
    code = "unauthorized"


class RateLimited(SuliError):
    code = "rate_limited"

    def __init__(self, message: str, limit: int, retry_after: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.retry_after = retry_after


class BackendUnavailable(SuliError):
    code = "backend_unavailable"


class ModelMismatch(BackendUnavailable):
    """The store's vectors come from another embedding model than the configured one: a
    search would compare vectors of two models, an index run would mix them."""

    def __init__(self, store: str, stored: str, configured: str) -> None:
        super().__init__(
            f"{store} holds vectors of model {stored!r} but the configured model is "
            f"{configured!r}: run `suli reindex` to re-embed every item with {configured!r} "
            f"(or configure {stored!r} again)"
        )
        self.stored, self.configured = stored, configured


class DeadlineExceeded(SuliError):
    code = "deadline_exceeded"


class IndexingError(SuliError):
    code = "indexing_error"
