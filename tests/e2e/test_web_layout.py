"""The web page's words and lines in headless Chromium: counts in the right number ("1 item",
"2 items", "1 match") and long ids and agent names that never break inside a word.

Over its own small embedded store (fake embedder), so the counts are known exactly:
- prn_one (ws_one) sees one item, made by an agent whose id has 80 characters;
- prn_two (ws_two) sees two, one by an agent whose 80-character id has no separator after
  `prn_`.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from api.helpers import opener
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright.sync_api import Locator, Page, expect

from app.main import create_app
from app.web_view import Form, breakable, previous_url
from indexer.pipeline import index_items
from suli.auth import create_token
from suli.models import Principal
from suli.settings import Settings
from suli.validate import parse_item

from .conftest import running

# 80 characters each: one in parts (it may wrap between them), one a single long part.
LONG_AGENT = "prn_release_coordination_agent_for_the_northern_payments_platform_team_nightly_v2"[
    :80
]
SOLID_AGENT = "prn_" + "x" * 76
SEPARATORS = "_-.:/@"


def _item(item_id: str, ws: str, title: str, agent: str, **more: str) -> dict[str, object]:
    return {
        "id": item_id,
        "workspace": ws,
        "title": title,
        "body": f"{title}: how the nightly deploy is run.",
        "outcome": "approved",
        "agent": agent,
        "last_activity_at": "2026-02-01T12:00:00Z",
        "provenance": {"source": "agentpod", "created_by": agent},
        **more,
    }


ITEMS = (
    _item("itm_one", "ws_one", "Nightly deploy report", LONG_AGENT),
    _item("itm_two_a", "ws_two", "Nightly deploy summary", SOLID_AGENT),
    _item("itm_two_b", "ws_two", "Weekly capacity review", "prn_bot", outcome="in-progress"),
)


@dataclass(frozen=True)
class Site:
    url: str
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    home = tmp_path_factory.mktemp("web-layout")
    settings = Settings(backend="embedded", embedder="fake", home=home)
    searcher = opener()(settings)
    try:
        backend = searcher.backend
        backend.put_principals(
            [
                Principal("prn_one", "ws_one", "person", ()),
                Principal("prn_two", "ws_two", "person", ()),
            ]
        )
        parsed = [(n, parse_item(d)) for n, d in enumerate(ITEMS)]
        assert index_items(parsed, backend, searcher.embedder).indexed == len(ITEMS)
        backend.refresh()
        tokens = {p: create_token(backend, f"prn_{p}") for p in ("one", "two")}
    finally:
        searcher.backend.close()
    with running(create_app(settings, opener=opener())) as url:
        yield Site(url, tokens)


def sign_in(page: Page, site: Site, who: str) -> None:
    page.goto(f"{site.url}/signin")
    page.get_by_label("API token").fill(site.tokens[who])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{site.url}/")


def test_one_item_and_one_match_are_singular(page: Page, site: Site) -> None:
    sign_in(page, site, "one")
    expect(page.locator(".summary")).to_contain_text("Showing 1 of 1 item, newest activity first")
    expect(page.locator(".filters .hint")).to_have_text(
        "Values and counts come from the 1 item you can see."
    )
    expect(page.get_by_role("checkbox", name="approved 1 item", exact=True)).to_be_visible()
    page.goto(f"{site.url}/?q=nightly")
    expect(page.locator(".summary")).to_contain_text("Showing 1 of 1 match")
    expect(page.locator(".summary")).not_to_contain_text("matches")
    expect(page.locator(".filters .hint")).to_have_text(
        "Counts are for the 1 item this search matches."
    )
    page.goto(f"{site.url}/?outcome=approved")
    expect(page.locator(".filters .hint")).to_have_text(
        "Counts are for the 1 item you can see that passes these filters."
    )


def test_two_items_are_plural(page: Page, site: Site) -> None:
    sign_in(page, site, "two")
    expect(page.locator(".summary")).to_contain_text("Showing 2 of 2 items, newest activity first")
    expect(page.locator(".filters .hint")).to_have_text(
        "Values and counts come from the 2 items you can see."
    )
    expect(page.get_by_role("checkbox", name="approved 1 item", exact=True)).to_be_visible()
    page.goto(f"{site.url}/?q=nightly+weekly&mode=text")
    expect(page.locator(".summary")).to_contain_text("of 2 matches")


def _line_breaks(element: Locator) -> list[tuple[str, str]]:
    """Each place the element's text goes on to a new line: (the character before, after)."""
    chars: list[tuple[str, float]] = element.evaluate(
        """el => {
          const out = [];
          const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
          for (let n = walk.nextNode(); n; n = walk.nextNode()) {
            for (let i = 0; i < n.length; i++) {
              const r = document.createRange();
              r.setStart(n, i);
              r.setEnd(n, i + 1);
              const box = r.getBoundingClientRect();
              if (box.width > 0) out.push([n.data[i], box.top]);
            }
          }
          return out;
        }"""
    )
    return [(a[0], b[0]) for a, b in itertools.pairwise(chars) if b[1] > a[1] + 1]


def test_a_long_agent_name_stays_whole_on_its_line(page: Page, site: Site, artifacts: Path) -> None:
    assert len(LONG_AGENT) == len(SOLID_AGENT) == 80
    sign_in(page, site, "one")
    # The Agent filter: one line, cut with an ellipsis, the whole name in the DOM and the title.
    option = page.locator("fieldset.facet").filter(has_text="Agent").locator("label.option")
    label = option.locator(".option-label")
    expect(label).to_have_text(LONG_AGENT)
    expect(option).to_have_attribute("title", LONG_AGENT)
    style = label.evaluate(
        "el => { const s = getComputedStyle(el); return [s.whiteSpace, s.textOverflow, "
        "parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.5, el.scrollWidth, "
        "el.clientWidth]; }"
    )
    white_space, overflow, line_height, scroll_w, client_w = style
    assert (white_space, overflow) == ("nowrap", "ellipsis")
    box = label.bounding_box()
    assert box is not None and box["height"] < 1.5 * float(line_height)  # one line, not two
    assert scroll_w > client_w  # it was cut, not squeezed into another line
    assert _line_breaks(label) == []
    page.screenshot(path=str(artifacts / "web-long-agent-filters.png"), full_page=True)

    # The item page on a phone: the name wraps, but only after one of its separators.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{site.url}/items/itm_one")
    agent = page.locator("dd.agent")
    expect(agent).to_have_text(LONG_AGENT)
    breaks = _line_breaks(agent)
    assert breaks, "80 characters fit a phone's half column: the test would prove nothing"
    assert all(before in SEPARATORS for before, _ in breaks), breaks
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(artifacts / "web-long-agent-item-phone.png"), full_page=True)


def test_a_long_name_with_no_separator_is_cut_never_split(
    page: Page, site: Site, artifacts: Path
) -> None:
    sign_in(page, site, "two")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{site.url}/items/itm_two_a")
    agent = page.locator("dd.agent")
    expect(agent).to_have_text(SOLID_AGENT)
    # It may break after `prn_` only; the 76 x's stay on one line, cut by an ellipsis.
    assert all(before in SEPARATORS for before, _ in _line_breaks(agent))
    assert agent.evaluate("el => getComputedStyle(el).textOverflow") == "ellipsis"
    expect(agent).to_have_attribute("title", SOLID_AGENT)  # the whole name, on hover
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(artifacts / "web-solid-agent-item-phone.png"), full_page=True)
    # The provenance line of a result (by <agent>) follows the same rule.
    page.goto(f"{site.url}/")
    by = page.locator('li[data-item-id="itm_two_a"] .provenance')
    expect(by).to_have_text(f"via agentpod · by {SOLID_AGENT}")
    assert all(before in SEPARATORS + " " for before, _ in _line_breaks(by))


# ---- the helpers behind the lines (pure, so many examples) -----------------------------------


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab_-.:/@<&> x"), max_size=40))
def test_breakable_adds_break_chances_after_separators_only(value: str) -> None:
    out = str(breakable(value))
    parts = out.split("<wbr>")
    # Written apart from the code: the text back, and a chance after every separator but the last
    # character's.
    assert html.unescape("".join(parts)) == value
    assert "<" not in "".join(parts) and ">" not in "".join(parts)  # escaped, no markup
    expected = sum(1 for i, c in enumerate(value) if c in SEPARATORS and i < len(value) - 1)
    assert len(parts) - 1 == expected
    for part in parts[:-1]:
        assert html.unescape(part)[-1] in SEPARATORS


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2000), st.sampled_from([10, 25]))
def test_previous_is_one_limit_back_with_a_fresh_cursor(offset: int, limit: int) -> None:
    form = Form(q="deploy", limit=limit)
    asked: list[int] = []

    def cursor_at(at: int) -> str:
        asked.append(at)
        return f"c{at}"

    url = previous_url(form, offset, cursor_at)
    if offset == 0:
        assert url is None and asked == []
    elif offset <= limit:  # back to the first page: no cursor at all
        assert url == form.url() and asked == []
    else:
        assert asked == [offset - limit] and url == form.url(cursor=f"c{offset - limit}")
