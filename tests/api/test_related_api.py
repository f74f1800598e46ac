"""POST /api/v1/related: by item id and by unsaved card; visibility; a card is never stored."""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch

from .helpers import Api, World


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def related(api: Api, who: str, **body: Any) -> dict[str, Any]:
    r = api.client.post("/api/v1/related", json=body, headers=api.auth(who))
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_related_by_id_puts_direct_references_first_and_excludes_the_item(api: Api) -> None:
    body = related(api, "ana", item_id="itm_checklist", explain=True)
    assert ids(body)[0] == "itm_rollback"  # referenced by itm_checklist
    assert body["results"][0]["explain"]["kept"] == "direct-reference"
    assert "itm_checklist" not in ids(body)
    assert "itm_secret" not in ids(body)  # referenced too, but ana may not see it


def test_related_by_id_finds_items_that_reference_it(api: Api) -> None:
    body = related(api, "ana", item_id="itm_rollback")
    assert ids(body)[0] == "itm_checklist"  # it references itm_rollback
    assert "itm_rollback" not in ids(body)


def test_related_for_an_invisible_item_is_404(api: Api) -> None:
    r = api.client.post("/api/v1/related", json={"item_id": "itm_secret"}, headers=api.auth("ana"))
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert related(api, "bob", item_id="itm_secret")["results"]


def test_related_by_card_matches_its_text_and_references(api: Api) -> None:
    body = related(
        api,
        "ana",
        title="Database migration checklist",
        spec="What to run before a deploy",
        references=["itm_old"],
        limit=3,
    )
    assert ids(body)[0] == "itm_old"
    assert "itm_checklist" in ids(body)
    for r in body["results"]:
        assert r["id"] in {"itm_rollback", "itm_checklist", "itm_old"}


def _snapshot(client: OpenSearch, world: World) -> tuple[int, list[dict[str, Any]], int]:
    alias, acl = world.settings.index_alias, world.settings.acl_index
    client.indices.refresh(index=f"{alias},{acl}")
    count = client.count(index=alias)["count"]
    docs = client.search(
        index=alias, body={"size": 100, "query": {"match_all": {}}, "sort": [{"id": "asc"}]}
    )
    acl_count = client.count(index=acl)["count"]
    return count, [h["_source"] for h in docs["hits"]["hits"]], acl_count


def test_cards_are_never_stored(api: Api, world: World, os_client: OpenSearch) -> None:
    before = _snapshot(os_client, world)
    card = {
        "title": "Zanzibar quokka rollout",
        "spec": "A card nobody saved: quokka zanzibar deploy",
        "references": ["itm_rollback"],
    }
    for _ in range(3):
        body = related(api, "ana", **card)
        assert ids(body)[0] == "itm_rollback"
    related(api, "bob", title="Only a title zanzibar")
    after = _snapshot(os_client, world)
    assert after == before
    assert before[0] == 7
    found = os_client.search(
        index=world.settings.index_alias, body={"query": {"match": {"title": "zanzibar"}}}
    )
    assert found["hits"]["total"]["value"] == 0
