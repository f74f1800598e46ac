"""Configuration: one Settings object read from SULI_* environment variables."""

from __future__ import annotations

import ipaddress
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from suli.backends.opensearch.hnsw import Hnsw

DEFAULT_OUTCOME_WEIGHTS = {
    # Multiplicative on the fused score. Finished, accepted work first; lower outcomes
    # sink but are never removed.
    "approved": 1.0,
    "completed": 1.0,
    "in-progress": 0.9,
    "superseded": 0.75,
    "rejected": 0.6,
    "failed": 0.6,
    "abandoned": 0.6,
}


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _default_home() -> Path:
    return Path.home() / ".local" / "share" / "suli"


class Settings(BaseSettings):
    """Every knob of Suli; env prefix SULI_ (e.g. SULI_OPENSEARCH_URL)."""

    model_config = SettingsConfigDict(env_prefix="SULI_", env_nested_delimiter="__", extra="ignore")

    backend: Literal["embedded", "opensearch"] | None = None
    home: Path = Field(default_factory=_default_home)

    # OpenSearch connection
    opensearch_url: str | None = None
    opensearch_user: str | None = None
    opensearch_password: SecretStr | None = None
    opensearch_verify_certs: bool = True
    opensearch_ca_certs: str | None = None
    # A secured cluster's client certificate (PEM) and its key: the certificate's CN is the
    # user, instead of a password (docs/operations.md, "Deploying on a secured cluster").
    opensearch_client_cert: str | None = None
    opensearch_client_key: str | None = None
    opensearch_timeout_s: float = 10.0
    # A bulk write of a chunk takes longer than a search on a busy cluster: its own timeout, so
    # an indexer does not time out (and re-send) what the cluster was still writing.
    opensearch_bulk_timeout_s: float = Field(default=60.0, gt=0)
    index_alias: str = "suli-items"
    acl_index: str = "suli-acl"
    shards: int = Field(default=1, ge=1)
    replicas: int = Field(default=0, ge=0)
    # Each workspace's items in their own index (behind `<alias>-ws-<workspace>`, made on its
    # first write), so BM25's term statistics never mix tenants; costs `shards` x (1 +
    # `replicas`) shards per workspace (docs/operations.md, "Isolating workspaces").
    isolate_workspaces: bool = False
    # The vector field's HNSW graph, fixed when an index is created (a change takes effect
    # through `suli reindex`; `suli status` says when the live index differs). Why these
    # defaults: docs/decisions.md, "Vector tuning" (bench/vector_tuning.py measures them).
    hnsw_m: int = Field(default=16, ge=2, le=100)
    hnsw_ef_construction: int = Field(default=128, ge=2, le=4096)
    vector_encoder: Literal["float32", "sq"] = "float32"
    # Breadth of the k-NN graph search, sent as `method_parameters.ef_search`; unset: none is
    # sent and the graph is searched with k = candidate_depth. 200: with k = 100 alone the
    # search missed 2.6 % of the exact top 100 on NFCorpus dev and cost the vector leg 0.003
    # nDCG@10 (chosen by `python -m bench.quality --tune`, docs/decisions.md).
    ef_search: int | None = Field(default=200, ge=1, le=10_000)

    # Embedded backend
    embedded_path: Path | None = None

    # Embeddings
    embedder: Literal["minilm", "fake"] = "minilm"
    embed_batch_size: int = Field(default=8, ge=1, le=256)
    vector_cache: Path | None = None

    # Ranking
    rrf_k: int = Field(default=60, ge=1)
    text_weight: float = Field(default=1.0, ge=0)
    # bench.quality --tune on NFCorpus dev: 0.5 beat 1.0 by 0.0013 nDCG@10.
    vector_weight: float = Field(default=0.5, ge=0)
    candidate_depth: int = Field(default=100, ge=1, le=1000)
    # `total` counts the word matches up to this many unless a request asks for it exact
    # (`exact_total`); past it `total_relation` says "gte". Counting every match keeps the
    # engine from skipping documents that cannot reach the top (docs/decisions.md, "Totals").
    total_count_limit: int = Field(default=1000, ge=1, le=1_000_000)
    # Tuned on NFCorpus dev: 0.3 cost 0.001 nDCG@10 there; 0.1 cost 0.003 and 0.05 of recall@100.
    # Wider margins measured 0.001 better there but keep unrelated items in small workspaces.
    meaning_margin: float = Field(default=0.3, ge=0, le=2)
    # A meaning-only hit must also reach this cosine similarity, else a nonsense query keeps
    # its least-far neighbours. bench/floor.py: the nonsense set's best no-word similarity is
    # 0.26 (sample) and 0.32 (NFCorpus); 0.33 finds none of it and costs 0.0014 NFCorpus dev
    # nDCG@10 (0.3279 -> 0.3265; recall@100 0.298 -> 0.262).
    meaning_floor: float = Field(default=0.33, ge=-1, le=1)
    outcome_weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_OUTCOME_WEIGHTS))

    # Service
    deadline_s: float = Field(default=20.0, gt=0)
    rate_per_minute: int = Field(default=600, ge=1)
    rate_per_day: int = Field(default=100_000, ge=1)
    max_response_bytes: int = Field(default=1_000_000, ge=1024)
    rerank: Literal["off", "mmr"] = "off"
    rerank_budget_s: float = Field(default=4.0, gt=0)
    embed_budget_s: float = Field(default=2.0, gt=0)  # past it the vector leg is degraded
    max_query_chars: int = Field(default=1000, ge=1)
    # Signs paging cursors (HMAC-SHA256). Unset: made once and kept in <home>/cursor-secret;
    # set it to one value on every replica behind a load balancer.
    cursor_secret: SecretStr | None = None
    # Connections and streams (`suli serve`); why these defaults: docs/decisions.md.
    max_connections: int = Field(default=1000, ge=1)  # lowered to fit the open-file limit
    header_timeout_s: float = Field(default=10.0, gt=0)  # a request head must arrive within
    body_timeout_s: float = Field(default=30.0, gt=0)  # longest pause while a body arrives
    keep_alive_s: int = Field(default=5, ge=1)  # idle keep-alive connections close after
    mcp_streams_per_principal: int = Field(default=4, ge=1)  # open GET /mcp streams
    mcp_stream_check_s: float = Field(default=5.0, gt=0)  # streams re-check their token
    bad_token_per_minute: int = Field(default=30, ge=1)  # invalid tokens per client address
    # A store every service process and replica shares (redis://host:port/db): rate limits are
    # counted there, and the cursor secret is kept there when SULI_CURSOR_SECRET is unset.
    # Unset: each process counts its own limits.
    shared_store: SecretStr | None = None
    # The HTTP edge under load; why these defaults: docs/operations.md, "Behind a load balancer".
    # Request bodies: 1 MiB holds any search or related request a client means (a 100,000-char
    # spec is at most 400 KB of UTF-8); item ingestion takes batches, so it has its own cap,
    # room for a few items at the 1,000,000-character body limit.
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    max_ingest_body_bytes: int = Field(default=16 << 20, ge=1024)
    # Open connections per client address; unset: a quarter of the connection cap, at least 32.
    max_connections_per_client: int | None = Field(default=None, ge=1)
    # Comma-separated addresses or networks of the load balancers whose X-Forwarded-For and
    # X-Forwarded-Proto are believed (e.g. 10.0.0.0/8); empty: none, the peer is the client.
    trusted_proxies: str = ""
    # Log lines on stderr: `text` for people, `json` (one object a line) to ship.
    log_format: Literal["text", "json"] = "text"
    secure_cookies: bool = False  # always mark the session cookie Secure (else: on https only)
    # The bearer token /metrics requires (a Prometheus scrape's `authorization`); unset: /metrics
    # answers anyone who reaches it (bind it to a private network then; docs/operations.md).
    metrics_token: SecretStr | None = None
    # A whole request body must arrive within this many seconds (body_timeout_s bounds each
    # pause): a sender of one byte per pause held its connection for as long as it liked.
    body_total_timeout_s: float = Field(default=60.0, gt=0)

    @field_validator("outcome_weights")
    @classmethod
    def _weights_known(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = set(v) - set(DEFAULT_OUTCOME_WEIGHTS)
        if unknown:
            known = ", ".join(DEFAULT_OUTCOME_WEIGHTS)
            raise ValueError(f"unknown outcomes {sorted(unknown)} (known: {known})")
        if any(w < 0 for w in v.values()):
            raise ValueError("weights must be >= 0")
        return {**DEFAULT_OUTCOME_WEIGHTS, **v}

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_parse(cls, v: str) -> str:
        for part in _split(v):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"{part!r} is not an IP address or network") from None
        return v

    @field_validator("opensearch_ca_certs", "opensearch_client_cert", "opensearch_client_key")
    @classmethod
    def _tls_file_readable(cls, v: str | None) -> str | None:
        # Checked here, not at the first request: the TLS layer would say only that a file
        # failed to load, deep in a connection error, and not which setting named it.
        if not v:  # set but empty, as `VAR= cmd` leaves it: unset
            return None
        if not Path(v).expanduser().is_file():
            raise ValueError(f"no such file: {v}")
        return str(Path(v).expanduser())

    @model_validator(mode="after")
    def _client_cert_pairs(self) -> Settings:
        if self.opensearch_client_key and not self.opensearch_client_cert:
            raise ValueError(
                "SULI_OPENSEARCH_CLIENT_KEY is set without SULI_OPENSEARCH_CLIENT_CERT: set the "
                "certificate too, or unset the key"
            )
        return self

    @property
    def trusted_proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(p, strict=False) for p in _split(self.trusted_proxies))

    @model_validator(mode="after")
    def _pick_backend(self) -> Settings:
        if self.backend is None:
            self.backend = "opensearch" if self.opensearch_url else "embedded"
        if self.backend == "opensearch" and not self.opensearch_url:
            raise ValueError(
                "SULI_BACKEND=opensearch needs SULI_OPENSEARCH_URL: set it "
                "(e.g. SULI_OPENSEARCH_URL=http://127.0.0.1:9200) or use SULI_BACKEND=embedded"
            )
        return self

    @property
    def hnsw(self) -> Hnsw:
        return Hnsw(self.hnsw_m, self.hnsw_ef_construction, self.vector_encoder)

    @property
    def sqlite_path(self) -> Path:
        return self.embedded_path or self.home / "suli.db"

    @property
    def cursor_secret_path(self) -> Path:
        return self.home / "cursor-secret"

    @property
    def vector_cache_path(self) -> Path:
        return self.vector_cache or self.home / "vectors.sqlite"


def _default_text(name: str) -> str:
    field = Settings.model_fields[name]
    value = field.get_default(call_default_factory=True)
    if isinstance(value, dict):
        return f"built in; to change some, give JSON such as {json.dumps({'failed': 0.5})}"
    return "unset" if value is None else str(value)


def _field_line(name: str, message: str, value: Any = None, *, show_value: bool = True) -> str:
    env = f"SULI_{name.upper()}"
    got = f"={value}" if show_value and isinstance(value, str | int | float) else ""
    if name == "opensearch_password":
        got = ""  # never echo a secret
    return f"{env}{got}: {message}; fix {env} or unset it (default: {_default_text(name)})"


def settings_error_line(error: ValidationError | SettingsError) -> str:
    """A bad configuration as one line naming the SULI_ variable and how to fix it."""
    if isinstance(error, SettingsError):
        # pydantic-settings could not even decode the value (e.g. a dict that is not JSON).
        m = re.search(r'field "(\w+)"', str(error))
        if m is None or m.group(1) not in Settings.model_fields:
            return f"bad setting: {error}"
        return _field_line(m.group(1), "not valid JSON", show_value=False)
    lines = []
    for err in error.errors():
        message = str(err["msg"]).removeprefix("Value error, ")
        loc = err.get("loc") or ()
        if loc and str(loc[0]) in Settings.model_fields:
            message = message[:1].lower() + message[1:]
            lines.append(_field_line(str(loc[0]), message, err.get("input")))
        else:
            lines.append(message)
    return "; ".join(lines)


def is_settings_error(error: BaseException) -> bool:
    """Whether error is a bad-configuration error of Settings (not of some other model)."""
    if isinstance(error, SettingsError):
        return True
    return isinstance(error, ValidationError) and error.title == Settings.__name__


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
