"""The live index's mapping records the model its vectors come from (`_meta.model`); the core
refuses to open it with another model of the same dimension, in one line naming both models
and `suli reindex` (the embedded store: tests/unit/test_model_switch.py)."""

from __future__ import annotations

import pytest
from contract.helpers import opensearch_settings
from opensearchpy import OpenSearch

from suli.backends.opensearch import OpenSearchBackend
from suli.core import open_backend
from suli.embedding import FakeEmbedder
from suli.errors import ModelMismatch


class OtherModel(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__(16)
        self.name = "other-model-16"


def test_another_model_is_refused_naming_both_and_reindex(
    opensearch_url: str, os_client: OpenSearch
) -> None:
    settings = opensearch_settings(opensearch_url)
    name = settings.index_alias
    first = FakeEmbedder(16)
    try:
        backend = open_backend(settings, first)
        assert isinstance(backend, OpenSearchBackend)
        assert backend.live_model() == first.name
        backend.close()
        with pytest.raises(ModelMismatch) as e:
            open_backend(settings, OtherModel())
        msg = e.value.message
        assert "\n" not in msg and "`suli reindex`" in msg
        assert repr(first.name) in msg and "'other-model-16'" in msg
        open_backend(settings, first).close()  # the recorded model still opens it
    finally:
        os_client.indices.delete(index=f"{name}*", ignore=[404])
