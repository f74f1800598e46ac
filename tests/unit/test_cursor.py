"""Paging cursors: bound to the caller and the search, tamper-proof, one stored secret."""

from __future__ import annotations

import base64
import binascii
import re
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suli import cursor
from suli.errors import InvalidInput
from suli.search_params import search_request
from suli.settings import Settings

SECRET = b"s" * 32


def test_a_cursor_reads_back_its_offset_for_the_same_caller_and_search() -> None:
    req = search_request("Deploy  guide", outcome="approved,failed", limit=5)
    made = cursor.make(SECRET, "prn_a", req, 10)
    # spacing, case, filter order, limit and explain do not make another search
    same = search_request(" deploy GUIDE ", outcome="failed,approved", limit=25, explain=True)
    assert cursor.read_position(SECRET, made, "prn_a", same).offset == 10


@pytest.mark.parametrize(
    "principal, query, params",
    [
        ("prn_b", "deploy guide", {}),
        ("prn_a", "deploy", {}),
        ("prn_a", "deploy guide", {"mode": "text"}),
        ("prn_a", "deploy guide", {"tag": "x"}),
        ("prn_a", "deploy guide", {"regex": "dep"}),
        ("prn_a", "deploy guide", {"include_hidden": True}),
    ],
)
def test_another_caller_or_search_is_refused(principal: str, query: str, params: dict) -> None:  # type: ignore[type-arg]
    made = cursor.make(SECRET, "prn_a", search_request("deploy guide"), 10)
    with pytest.raises(InvalidInput) as e:
        cursor.read_position(SECRET, made, principal, search_request(query, **params))
    assert e.value.field == "cursor"


def test_tampering_or_another_secret_is_refused() -> None:
    req = search_request("deploy")
    made = cursor.make(SECRET, "prn_a", req, 10)
    forged_payload = cursor._b64(b'{"v":1,"p":"prn_a","s":"x","o":20}')
    body, sig = made.split(".")
    for bad in (f"{forged_payload}.{sig}", f"{body}.{sig[:-1]}", "", "...", "%%%.%%%", "a" * 600):
        with pytest.raises(InvalidInput):
            cursor.read_position(SECRET, bad, "prn_a", req)
    with pytest.raises(InvalidInput):
        cursor.read_position(b"t" * 32, made, "prn_a", req)


def _refused(made: str, req: object) -> bool:
    try:
        cursor.read_position(SECRET, made, "prn_a", req)  # type: ignore[arg-type]
    except InvalidInput as e:
        return e.field == "cursor"
    return False


def _flipped(data: bytes) -> list[bytes]:
    """data with one bit changed, for every bit."""
    return [
        data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
        for i in range(len(data))
        for bit in range(8)
    ]


MINTED = [
    cursor.Position(10),
    cursor.Position(14, ["itm_9"], 12),  # a text window's start
    cursor.Position(3, ["2026-01-15T12:00:00+00:00", "itm_2"], 3),  # browse's
]


@pytest.mark.parametrize("at", MINTED)
def test_an_empty_or_cut_signature_is_refused(at: cursor.Position) -> None:
    req = search_request("deploy")
    made = cursor.make(SECRET, "prn_a", req, at)
    assert cursor.read_position(SECRET, made, "prn_a", req) == at
    body, sig = made.split(".")
    mac = cursor._unb64(sig)
    # `payload.` with nothing after the dot, then every shorter prefix of the right signature
    cut = [f"{body}.{cursor._b64(mac[:n])}" for n in range(len(mac))]
    assert cut[0] == f"{body}."
    assert [c for c in cut if not _refused(c, req)] == []
    assert _refused(f".{sig}", req) and _refused(".", req)


@pytest.mark.parametrize("at", MINTED)
def test_a_cursor_with_any_bit_changed_anywhere_is_refused(at: cursor.Position) -> None:
    req = search_request("deploy")
    made = cursor.make(SECRET, "prn_a", req, at)
    body, sig = made.split(".")
    payload, mac = cursor._unb64(body), cursor._unb64(sig)
    # every bit of the cursor's text, and every bit of the bytes it spells (spelt canonically,
    # so only the signature stands between them and a page)
    text = made.encode()
    others = [t.decode("latin-1") for t in _flipped(text)]
    others += [f"{cursor._b64(p)}.{sig}" for p in _flipped(payload)]
    others += [f"{body}.{cursor._b64(m)}" for m in _flipped(mac)]
    assert len(others) == 8 * (len(text) + len(payload) + len(mac))
    assert [o for o in others if not _refused(o, req)] == []


def test_the_secret_is_made_once_kept_private_and_reused(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", embedder="fake")
    first = cursor.secret_for(settings)
    path = settings.cursor_secret_path
    assert len(first) == 32 and path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert cursor.secret_for(settings) == first  # read back, not made again
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    configured = Settings(home=tmp_path / "other", embedder="fake", cursor_secret="abc")
    assert cursor.secret_for(configured) == b"abc"
    assert not configured.cursor_secret_path.exists()


def _spellings(text: str) -> list[str]:
    """Other strings that a lenient base64url decoder reads as the same bytes as text."""
    out = [text + "=", text + "==", text + "!", "\n" + text, text[:1] + " " + text[1:]]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    spare = (6 * len(text)) % 8  # bits of the last character that carry no data
    if spare:
        last = alphabet.index(text[-1])
        out += [text[:-1] + alphabet[last ^ bit] for bit in range(1, 1 << spare)]
    return out


def test_a_cursor_has_one_spelling_others_are_refused_naming_cursor() -> None:
    req = search_request("deploy")
    made = cursor.make(SECRET, "prn_a", req, 10)
    body, sig = made.split(".")
    others = [f"{b}.{sig}" for b in _spellings(body)] + [f"{body}.{s}" for s in _spellings(sig)]
    assert len(others) > 10
    for other in others:
        with pytest.raises(InvalidInput) as e:
            cursor.read_position(SECRET, other, "prn_a", req)
        assert e.value.field == "cursor", other
    assert cursor.read_position(SECRET, made, "prn_a", req).offset == 10


# Canonical unpadded base64url, as a grammar: whole quads, then 2 characters whose last carries
# 4 zero bits (index a multiple of 16) or 3 whose last carries 2 zero bits (a multiple of 4).
_B64 = "[A-Za-z0-9_-]"
CANONICAL = re.compile(f"(?:{_B64}{{4}})*(?:{_B64}[AQgw]|{_B64}{{2}}[AEIMQUYcgkosw048])?")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=80), st.text("ABCDQgw0_-=!. \n", max_size=6), st.data())
def test_exactly_the_canonical_spellings_decode(
    payload: bytes, noise: str, data: st.DataObject
) -> None:
    text = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    at = data.draw(st.integers(0, len(text)))
    spelled = text[:at] + noise + text[at:]
    if CANONICAL.fullmatch(spelled):
        pad = "=" * (-len(spelled) % 4)
        expected = base64.b64decode(spelled + pad, altchars=b"-_", validate=True)
        assert cursor._unb64(spelled) == expected
    else:
        with pytest.raises((ValueError, binascii.Error)):
            cursor._unb64(spelled)
