"""Documents in and out of OpenSearch: an Item as its indexed document and back, and the
parts of a search response the backend reads (highlights, scores, a failed leg's cause)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from suli.models import Item, Station


def _iso(d: datetime | None) -> str | None:
    return d.isoformat().replace("+00:00", "Z") if d else None


def item_to_doc(item: Item, vector: Sequence[float], ehash: str | None = None) -> dict[str, Any]:
    """The indexed document: item fields, the derived scope, the vector and (when known) the
    embed hash of what the vector was made from (suli.embedding.embed_hash)."""
    doc = {
        "id": item.id,
        "workspace": item.workspace,
        "kind": item.kind,
        "scope": item.scope,
        "outcome": item.outcome,
        "board": item.board,
        "uploader": item.uploader,
        "agent": item.agent,
        "title": item.title,
        # Binaries are found by title, path and caption only: their body is not text.
        "body": "" if item.is_binary else item.body,
        "caption": item.caption,
        "path": item.path,
        "tags": list(item.tags),
        "stations": [{"id": s.id, "name": s.name} for s in item.stations],
        "superseded_by": item.superseded_by,
        "references": list(item.references),
        "media_type": item.media_type,
        "url": item.url,
        "provenance": item.provenance,
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
        "last_activity_at": _iso(item.last_activity_at),
        "hidden": item.hidden,
        "vector": [float(x) for x in vector],
    }
    if ehash:
        doc["embedded_text_sha"] = ehash
    return doc


def _dt(v: Any) -> datetime | None:
    return datetime.fromisoformat(v.replace("Z", "+00:00")) if v else None


def doc_to_item(src: dict[str, Any]) -> Item:
    return Item(
        id=src["id"],
        workspace=src["workspace"],
        kind=src.get("kind") or "artifact",
        title=src.get("title") or "",
        body=src.get("body") or "",
        outcome=src.get("outcome"),
        board=src.get("board"),
        uploader=src.get("uploader"),
        agent=src.get("agent"),
        stations=tuple(Station(s["id"], s["name"]) for s in src.get("stations") or ()),
        superseded_by=src.get("superseded_by"),
        references=tuple(src.get("references") or ()),
        tags=tuple(src.get("tags") or ()),
        media_type=src.get("media_type") or "",
        path=src.get("path") or "",
        caption=src.get("caption") or "",
        provenance=src.get("provenance") or {},
        created_at=_dt(src.get("created_at")),
        updated_at=_dt(src.get("updated_at")),
        last_activity_at=_dt(src.get("last_activity_at")),
        url=src.get("url") or "",
        hidden=bool(src.get("hidden")),
    )


def leg_error(response: dict[str, Any]) -> str:
    """One failed leg's cause as the engine gave it: the root cause, not the wrapper.

    A shard's error comes wrapped in `search_phase_execution_exception: all shards failed`,
    which says nothing; and a request the engine refused (4xx, say in its query phase) is
    not the engine being unavailable, so the line says which of the two it was.
    """
    err = response["error"]
    status = int(response.get("status") or 500)
    refused = 400 <= status < 500 and status != 429
    head = f"{'refused' if refused else 'failed'} by OpenSearch (status {status}"
    if not isinstance(err, dict):
        return f"{head}): {err}"
    phase = f", {err['phase']} phase" if err.get("phase") else ""
    causes = err.get("root_cause") or [err]
    cause = causes[0] if isinstance(causes[0], dict) else err
    return f"{head}{phase}): {cause.get('type', 'error')}: {cause.get('reason')}"


def refusal(response: dict[str, Any]) -> str | None:
    """The root cause's type when the engine refused a leg's request (a 4xx other than 429:
    it will refuse it again), None when the leg failed otherwise."""
    status = int(response.get("status") or 500)
    if not 400 <= status < 500 or status == 429:
        return None
    err = response.get("error")
    causes = (err.get("root_cause") or [err]) if isinstance(err, dict) else [{}]
    return str((causes[0] if isinstance(causes[0], dict) else {}).get("type") or "error")


def cosine_from_score(score: float) -> float:
    """Lucene's cosinesimil score is (1 + cos) / 2; turn it back into the cosine."""
    return 2.0 * score - 1.0
