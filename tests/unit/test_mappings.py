"""Documents use only mapped fields and the model's dimension; the vector is Lucene HNSW."""

import mappings
from suli.backends.opensearch.bodies import doc_to_item, item_to_doc
from suli.backends.opensearch.hnsw import Hnsw, hnsw_drift
from suli.models import Item, Station


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


def test_hnsw_settings_reach_the_vector_field() -> None:
    from suli.settings import Settings

    assert Settings().hnsw == Hnsw()  # defaults build what items.json states
    default = mappings.items_index(384, vector_parameters=Settings().hnsw.parameters())
    assert default == mappings.items_index(384)
    s = Settings(hnsw_m=32, hnsw_ef_construction=200, vector_encoder="sq")
    body = mappings.items_index(384, vector_parameters=s.hnsw.parameters())
    params = body["mappings"]["properties"]["vector"]["method"]["parameters"]
    assert params == {"m": 32, "ef_construction": 200, "encoder": {"name": "sq"}}


def test_hnsw_read_back_from_a_mapping_and_drift_said() -> None:
    # As OpenSearch returns a mapping made with the sq encoder (parameters filled in).
    field = {"method": {"parameters": {"m": 8, "ef_construction": 64,
                                       "encoder": {"name": "sq", "parameters": {}}}}}  # fmt: skip
    built = Hnsw.of_mapping(field)
    assert built == Hnsw(8, 64, "sq")
    assert hnsw_drift(built, built) is None
    note = hnsw_drift(built, Hnsw())
    assert note is not None and "m=8" in note and "m=16" in note and "suli reindex" in note
    # No parameters stated: k-NN's own defaults (m 16, ef_construction 100), float32.
    assert Hnsw.of_mapping({"method": {}}) == Hnsw(16, 100, "float32")
