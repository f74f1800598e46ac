"""Every document id Suli writes fits OpenSearch's 512-byte `_id` limit, which 3.x enforces in
bulk requests: validation bounds the parts of each key, and refuses longer ones naming the field.

The expected answers are worked out here from the documented id rule (docs/items.md: 1-128
characters from [A-Za-z0-9_.:-], starting with a letter or digit; surrounding spaces are
trimmed), not from suli.validate's pattern.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from suli.backends.opensearch import keys
from suli.backends.opensearch.visdocs import doc_id, principal_doc_id
from suli.errors import InvalidInput
from suli.validate import MAX_ID_BYTES, lookup_id, parse_acl, parse_item, parse_principal

OPENSEARCH_ID_LIMIT = 512  # bytes of UTF-8, the limit on a document `_id`
FIRST = set(string.ascii_letters + string.digits)
REST = FIRST | set("_.:-")
# Allowed characters, the key separator, a space and characters of 2, 3 and 4 UTF-8 bytes.
ALPHABET = st.sampled_from([*sorted(REST), "/", " ", "é", "日", "😀", "+"])
IDS = st.text(ALPHABET, max_size=300) | st.integers(1, 300).map(lambda n: "a" * n)


def valid_id(raw: str) -> bool:
    s = raw.strip(" ")
    return 1 <= len(s) <= 128 and s[0] in FIRST and set(s) <= REST


def utf8(s: str) -> int:
    return len(s.encode("utf-8"))


@settings(max_examples=600, deadline=None)
@given(item_id=IDS, workspace=IDS)
@example(item_id="i" * 128, workspace="w" * 128)
@example(item_id="i" * 129, workspace="w")
@example(item_id="ok", workspace="w" * 129)
def test_an_accepted_item_has_a_key_within_the_limit(item_id: str, workspace: str) -> None:
    data = {"id": item_id, "workspace": workspace, "title": "t"}
    if valid_id(item_id) and valid_id(workspace):
        item = parse_item(data)
        assert (item.id, item.workspace) == (item_id.strip(" "), workspace.strip(" "))
        key = keys.key(item.workspace, item.id)
        assert utf8(key) == len(item.workspace) + 1 + len(item.id) <= 257 < OPENSEARCH_ID_LIMIT
        assert keys.split(key) == (item.workspace, item.id)
    else:
        with pytest.raises(InvalidInput) as err:
            parse_item(data)
        expected = "id" if not valid_id(item_id) else "workspace"
        assert err.value.field == expected
        assert str(err.value).startswith(f"{expected}: ")


@settings(max_examples=300, deadline=None)
@given(board=IDS, principal=IDS)
def test_acl_and_visibility_document_ids_fit_too(board: str, principal: str) -> None:
    if valid_id(board):
        acl = parse_acl({"board": board, "workspace": "w" * 128})
        assert utf8("acl:" + keys.key(acl.workspace, acl.board)) <= 4 + 257 < OPENSEARCH_ID_LIMIT
    else:
        with pytest.raises(InvalidInput, match=r"^board: "):
            parse_acl({"board": board, "workspace": "w"})
    if valid_id(principal):
        who = parse_principal({"id": principal, "workspace": "w"})
        for stored in (doc_id(who.id), principal_doc_id(who.id)):
            assert utf8(stored) <= len("principal:") + 128 < OPENSEARCH_ID_LIMIT
    else:
        with pytest.raises(InvalidInput, match=r"^id: "):
            parse_principal({"id": principal, "workspace": "w"})


@settings(max_examples=500, deadline=None)
@given(value=st.text(ALPHABET, max_size=200))
@example(value="a" * 512)
@example(value="a" * 513)
@example(value="😀" * 128)  # 512 bytes in 128 characters
@example(value="😀" * 129)
def test_a_looked_up_id_is_refused_past_512_bytes_not_characters(value: str) -> None:
    assert MAX_ID_BYTES == OPENSEARCH_ID_LIMIT
    if not value.strip():
        with pytest.raises(InvalidInput, match="must not be empty"):
            lookup_id(value)
    elif utf8(value) > OPENSEARCH_ID_LIMIT:
        with pytest.raises(InvalidInput, match=r"^item_id: at most 512 bytes$") as err:
            lookup_id(value)
        assert err.value.field == "item_id"
    else:
        assert lookup_id(value) == value
