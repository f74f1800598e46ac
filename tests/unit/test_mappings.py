"""Documents use only mapped fields and the model's dimension; the vector is Lucene HNSW."""

import pytest

import mappings
from suli.backends.opensearch_bodies import doc_to_item, item_to_doc
from suli.models import Item, Station

pytestmark = pytest.mark.unit


def test_documents_use_only_mapped_fields() -> None:
    item = Item("i", "w", "t", stations=(Station("s", "n"),), tags=("x",), references=("j",))
    doc = item_to_doc(item, [0.0] * 384)
    assert set(doc) <= mappings.item_fields()
    assert doc_to_item({k: v for k, v in doc.items() if k != "vector"}) == item


def test_vector_field() -> None:
    body = mappings.items_index(384, shards=2, replicas=1, model="m")
    vec = body["mappings"]["properties"]["vector"]
    assert vec["dimension"] == 384
    assert vec["method"]["engine"] == "lucene"  # the Maven k-NN build has no native engines
    assert vec["method"]["space_type"] == "cosinesimil"
    assert body["settings"]["index"]["number_of_shards"] == 2
    assert body["mappings"]["_meta"] == {
        "mapping_version": mappings.mapping_version(),
        "dimension": 384,
        "model": "m",
    }


def test_binary_body_is_not_searchable_text() -> None:
    doc = item_to_doc(
        Item("i", "w", "diagram", body="binary junk", media_type="image/png", caption="arch"),
        [0.0] * 384,
    )
    assert doc["body"] == "" and doc["caption"] == "arch"
