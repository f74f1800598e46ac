"""The vector field's HNSW build parameters, and how an index built otherwise is reported."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Hnsw:
    """How the vector field's HNSW graph is built (Settings.hnsw_m, hnsw_ef_construction,
    vector_encoder). `sq` is Lucene's 7-bit scalar quantizer: a quarter of the float32
    vector memory for the graph search; the full vectors stay on disk."""

    m: int = 16
    ef_construction: int = 128
    encoder: str = "float32"  # or "sq"

    def parameters(self) -> dict[str, Any]:
        """The `method.parameters` of the vector field, as the mapping states them."""
        out: dict[str, Any] = {"m": self.m, "ef_construction": self.ef_construction}
        if self.encoder == "sq":
            out["encoder"] = {"name": "sq"}
        return out

    @classmethod
    def of_mapping(cls, vector_field: dict[str, Any]) -> Hnsw:
        """What an existing index's vector field was built with (its mapping as read back)."""
        params = (vector_field.get("method") or {}).get("parameters") or {}
        encoder = (params.get("encoder") or {}).get("name") or "float32"
        # 16 and 100 are the k-NN plugin's own defaults, which apply when a mapping omits them.
        return cls(int(params.get("m", 16)), int(params.get("ef_construction", 100)), encoder)

    def describe(self) -> str:
        return f"m={self.m} ef_construction={self.ef_construction} encoder={self.encoder}"


def hnsw_drift(built: Hnsw, wanted: Hnsw) -> str | None:
    """A line saying an index's graph differs from the configured one (None when it does not).

    The HNSW parameters are fixed when an index is created: a changed SULI_HNSW_* setting
    applies only to indices created after it, so the difference is said, never hidden."""
    if built == wanted:
        return None
    return (
        f"live index's vector graph is {built.describe()}, settings ask for "
        f"{wanted.describe()}: run `suli reindex` to rebuild it"
    )
