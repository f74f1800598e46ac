"""Diversity reranking by maximal marginal relevance over the item vectors already stored."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Relevance and redundancy weigh the same (the usual MMR default): distinct items keep the
# fused order, and a near-copy (cosine ~1) of an item above it moves down about half the list.
# 1.0 would be no reranking, 0.0 pure diversity.
DEFAULT_LAMBDA = 0.5


class MMRReranker:
    """Reorders the fused head so near-duplicates do not crowd the top; needs no model."""

    name = "mmr"

    def __init__(self, lambda_: float = DEFAULT_LAMBDA) -> None:
        if not 0.0 <= lambda_ <= 1.0:
            raise ValueError("lambda_ must be within [0, 1]")
        self.lambda_ = lambda_

    def rerank(
        self,
        query_vector: Sequence[float] | None,
        ranked: list[str],
        vectors: dict[str, list[float]],
    ) -> list[str]:
        """MMR: pick, one at a time, the item best by lambda*relevance - (1-lambda)*redundancy.

        Relevance is the item's place in the fused order (linear from 1 down to 1/n), not the
        query similarity: the fused order already carries words, meaning and outcome weights.
        Redundancy is the highest cosine similarity to an item already picked; an item with no
        stored vector is never redundant. query_vector is not needed and may be None.
        """
        n = len(ranked)
        if n < 2:
            return list(ranked)
        relevance = np.array([(n - i) / n for i in range(n)], dtype=np.float64)
        unit = np.zeros((n, _dimension(vectors)), dtype=np.float64)
        has_vec = np.zeros(n, dtype=bool)
        for i, item_id in enumerate(ranked):
            vec = vectors.get(item_id)
            if vec is not None and len(vec) == unit.shape[1]:
                v = np.asarray(vec, dtype=np.float64)
                norm = float(np.linalg.norm(v))
                if norm > 0:
                    unit[i] = v / norm
                    has_vec[i] = True
        sims = unit @ unit.T  # rows without a vector are zero, so their similarities are 0
        redundancy = np.zeros(n, dtype=np.float64)
        picked: list[int] = []
        left = np.ones(n, dtype=bool)
        for _ in range(n):
            score = self.lambda_ * relevance - (1.0 - self.lambda_) * redundancy
            score[~left] = -np.inf
            best = int(np.argmax(score))  # argmax takes the first on ties: fused order wins
            picked.append(best)
            left[best] = False
            if has_vec[best]:
                redundancy = np.maximum(redundancy, sims[best])
        return [ranked[i] for i in picked]


def _dimension(vectors: dict[str, list[float]]) -> int:
    """The vectors' dimension (the most common length; 1 when there are none)."""
    lengths = [len(v) for v in vectors.values() if v is not None]
    return max(set(lengths), key=lengths.count) if lengths else 1
