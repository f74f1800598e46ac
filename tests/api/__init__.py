"""HTTP API tests (FastAPI TestClient and a live uvicorn) against the real OpenSearch."""

import pytest

pytest.register_assert_rewrite(f"{__name__}.helpers")
