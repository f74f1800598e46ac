"""Configuration: one Settings object read from SULI_* environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

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
    opensearch_timeout_s: float = 10.0
    index_alias: str = "suli-items"
    acl_index: str = "suli-acl"
    shards: int = Field(default=1, ge=1)
    replicas: int = Field(default=0, ge=0)

    # Embedded backend
    embedded_path: Path | None = None

    # Embeddings
    embedder: Literal["minilm", "fake"] = "minilm"
    embed_batch_size: int = Field(default=8, ge=1, le=256)
    vector_cache: Path | None = None

    # Ranking
    rrf_k: int = Field(default=60, ge=1)
    text_weight: float = Field(default=1.0, ge=0)
    # bench.quality --tune on NFCorpus dev (issue 15): 0.5 beat 1.0 by 0.0013 nDCG@10.
    vector_weight: float = Field(default=0.5, ge=0)
    candidate_depth: int = Field(default=100, ge=1, le=1000)
    # Tuned on NFCorpus dev: 0.3 cost 0.001 nDCG@10 there; 0.1 cost 0.003 and 0.05 of recall@100.
    # Wider margins measured 0.001 better there but keep unrelated items in small workspaces.
    meaning_margin: float = Field(default=0.3, ge=0, le=2)
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

    @field_validator("outcome_weights")
    @classmethod
    def _weights_known(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = set(v) - set(DEFAULT_OUTCOME_WEIGHTS)
        if unknown:
            raise ValueError(f"unknown outcomes: {sorted(unknown)}")
        if any(w < 0 for w in v.values()):
            raise ValueError("weights must be >= 0")
        return {**DEFAULT_OUTCOME_WEIGHTS, **v}

    @model_validator(mode="after")
    def _pick_backend(self) -> Settings:
        if self.backend is None:
            self.backend = "opensearch" if self.opensearch_url else "embedded"
        if self.backend == "opensearch" and not self.opensearch_url:
            raise ValueError("SULI_BACKEND=opensearch needs SULI_OPENSEARCH_URL")
        return self

    @property
    def sqlite_path(self) -> Path:
        return self.embedded_path or self.home / "suli.db"

    @property
    def vector_cache_path(self) -> Path:
        return self.vector_cache or self.home / "vectors.sqlite"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
