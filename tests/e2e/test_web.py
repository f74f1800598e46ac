"""The web page in headless Chromium against the running service: what a person does with it."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from suli.render import response_json
from suli.search_params import search_request
from suli.service import Searcher

from .conftest import Service
from .world import VISIBLE

PHONE = {"width": 390, "height": 844}


def sign_in(page: Page, service: Service, who: str) -> None:
    page.goto(f"{service.url}/")
    expect(page).to_have_url(f"{service.url}/signin?next=%2F")
    page.get_by_label("API token").fill(service.world.tokens[who])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{service.url}/")


def result_ids(page: Page) -> list[str]:
    return page.locator("ol.results > li.result").evaluate_all(
        "items => items.map(li => li.dataset.itemId)"
    )


def core_ids(core: Searcher, who: str, query: str, **params: object) -> list[str]:
    resp = core.search(core.principal(f"prn_{who}"), search_request(query, **params))  # type: ignore[arg-type]
    return [r["id"] for r in response_json(resp)["results"]]


def shot(page: Page, artifacts: Path, name: str) -> None:
    """A full-page screenshot under test-artifacts/ (docs/screenshots/ holds chosen copies)."""
    page.screenshot(path=str(artifacts / name), full_page=True)


def test_sign_in_search_filter_open_item_follow_related_and_superseded(
    page: Page, service: Service, core: Searcher, artifacts: Path
) -> None:
    page.goto(f"{service.url}/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("API token").fill("suli_wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Sign-in failed: unknown or revoked token.")
    shot(page, artifacts, "web-signin-error.png")

    page.get_by_label("API token").fill(service.world.tokens["ana"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{service.url}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Newest items")
    assert result_ids(page) == core_ids(core, "ana", "")
    expect(page.locator(".who")).to_contain_text("prn_ana")

    page.get_by_label("Search words").fill("deploy")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{service.url}/?q=deploy")
    expect(page.get_by_role("heading", level=1)).to_have_text("Results for “deploy”")
    assert result_ids(page) == core_ids(core, "ana", "deploy")
    expect(page.locator(".snippet mark").first).to_have_text("deploy")
    expect(page.locator("li.result .badge").first).to_be_visible()
    shot(page, artifacts, "web-desktop-search.png")

    # Filters come from the facets ana can see, with counts.
    superseded = page.get_by_role("checkbox", name="superseded 2 items")
    superseded.check()
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator(".active-count")).to_have_text("1 on")
    expect(superseded).to_be_checked()
    assert set(result_ids(page)) == {"itm_old", "itm_legacy"}

    old = page.locator('li.result[data-item-id="itm_old"]')
    legacy = page.locator('li.result[data-item-id="itm_legacy"]')
    expect(old.locator(".superseded")).to_have_text("Superseded by itm_rollback")
    # itm_legacy's replacement is on a board ana may not read: no link, no id.
    expect(legacy.locator(".superseded")).to_have_text("Superseded")
    expect(legacy.locator(".superseded a")).to_have_count(0)
    shot(page, artifacts, "web-desktop-filtered.png")

    old.get_by_role("link", name="itm_rollback").click()
    expect(page).to_have_url(f"{service.url}/items/itm_rollback")
    expect(page.get_by_role("heading", level=1)).to_have_text("Deploy pipeline rollback guide")
    related = page.locator("#related li.result")
    related_ids = related.evaluate_all("items => items.map(li => li.dataset.itemId)")
    assert related_ids and "itm_rollback" not in related_ids
    assert set(related_ids) <= VISIBLE["ana"]
    # Items that reference the rollback guide come first.
    assert set(related_ids[:2]) == {"itm_checklist", "itm_canary"}
    shot(page, artifacts, "web-desktop-item.png")

    first = related.first.locator(".result-title a")
    title = first.inner_text()
    first.click()
    expect(page).to_have_url(f"{service.url}/items/{related_ids[0]}")
    expect(page.get_by_role("heading", level=1)).to_have_text(title)

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{service.url}/signin")
    page.goto(f"{service.url}/?q=deploy")
    expect(page).to_have_url(f"{service.url}/signin?next=%2F%3Fq%3Ddeploy")


def test_phone_width_reads_in_one_column(page: Page, service: Service, artifacts: Path) -> None:
    page.set_viewport_size(PHONE)
    sign_in(page, service, "ana")
    page.get_by_label("Search words").fill("deploy")
    page.keyboard.press("Enter")
    # The browse page before the search has results too: wait for the search's own page, or
    # the width is read while the page navigates ("execution context was destroyed").
    expect(page).to_have_url(re.compile(r"[?&]q=deploy"))
    expect(page.locator("li.result").first).to_be_visible()
    # Nothing wider than the screen: no sideways scrolling.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"]
    # Filters start folded so results come first; they open with one tap.
    filters = page.locator("details.filters")
    expect(filters).not_to_have_attribute("open", "")
    results_top = page.locator("#results").bounding_box()
    search_box = page.get_by_label("Search words").bounding_box()
    assert results_top and search_box and results_top["y"] > search_box["y"]
    shot(page, artifacts, "web-phone-search.png")
    filters.locator("summary").click()
    # the counts follow the query (only the approved items "deploy" matches)
    expect(page.get_by_role("checkbox", name=re.compile(r"^approved \d+ items?$"))).to_be_visible()
    shot(page, artifacts, "web-phone-filters.png")
    page.goto(f"{service.url}/items/itm_checklist")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(page, artifacts, "web-phone-item.png")


def test_keyboard_skip_link_and_slash_shortcut(page: Page, service: Service) -> None:
    page.goto(f"{service.url}/")
    # The token field has focus on arrival: type, Enter, signed in.
    page.keyboard.type(service.world.tokens["ana"])
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{service.url}/")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to results")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    expect(page.locator("#results")).to_be_focused()
    page.keyboard.press("/")
    expect(page.get_by_label("Search words")).to_be_focused()
    # Every form control has an accessible name.
    unnamed = page.locator("input:not([type=hidden]), select").evaluate_all(
        "els => els.filter(e => !e.labels || e.labels.length === 0).map(e => e.name)"
    )
    assert unnamed == []


def test_empty_and_error_states(page: Page, service: Service) -> None:
    sign_in(page, service, "ana")
    page.goto(f"{service.url}/?q=deploy&outcome=abandoned")
    expect(page.locator(".empty")).to_contain_text("No results for “deploy” with these filters")
    expect(page.get_by_role("link", name="Search again without filters")).to_be_visible()
    page.goto(f"{service.url}/?since=yesterday")
    expect(page.get_by_role("alert")).to_contain_text("since: expected a date YYYY-MM-DD")
    expect(page.get_by_label("Search words")).to_be_visible()  # the form stays usable
    page.goto(f"{service.url}/items/itm_secret")
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    expect(page.locator("body")).not_to_contain_text("payroll")


def test_item_text_is_escaped_never_run(page: Page, service: Service) -> None:
    sign_in(page, service, "bob")
    page.get_by_label("Search words").fill("notes timing")
    page.keyboard.press("Enter")
    mine = page.locator('li.result[data-item-id="itm_bobnotes"]')
    expect(mine.locator(".result-title")).to_have_text(
        "Bob's <b>deploy</b> notes & <script>alert('x')</script>"
    )
    expect(mine.locator(".scope")).to_have_text("Personal (only you)")
    # The only script is the page's own; no element came from item text.
    assert page.locator("script").count() == 1
    assert page.locator("li.result b, li.result img, li.result script").count() == 0
    mine.locator(".result-title a").click()
    expect(page.locator(".item-body")).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator("article img").count() == 0


def test_nonsense_finds_nothing_and_says_so(page: Page, service: Service) -> None:
    sign_in(page, service, "ana")
    page.get_by_label("Search words").fill("zxqv plorbnak quuxifrage")
    page.keyboard.press("Enter")
    expect(page.locator(".summary")).to_contain_text("No results")
    empty = page.locator(".empty")
    expect(empty).to_contain_text("No results for “zxqv plorbnak quuxifrage”")
    expect(empty.get_by_role("link", name="Browse the newest items")).to_be_visible()
    expect(page.locator("li.result")).to_have_count(0)
    expect(page.locator(".more-results")).to_have_count(0)


def test_more_results_pages_through_the_ranked_list(
    page: Page, service: Service, core: Searcher
) -> None:
    sign_in(page, service, "ana")
    whole = core_ids(core, "ana", "deploy", limit=25)
    assert len(whole) > 3
    page.goto(f"{service.url}/?q=deploy&limit=3")
    seen = result_ids(page)
    assert seen == whole[:3]
    expect(page.locator(".summary")).to_contain_text(f"Showing 3 of {len(whole)} matches")
    while page.locator(".more-results").count():
        page.get_by_role("link", name="More results").click()
        expect(page).to_have_url(re.compile(r"cursor="))
        got = result_ids(page)
        assert got == core_ids(core, "ana", "deploy", limit=3, page=len(seen) // 3 + 1)
        first = len(seen) + 1
        expect(page.locator(".summary")).to_contain_text(f"Showing {first}–{first + len(got) - 1}")
        seen += got
    assert seen == whole  # every match once, in rank order: no repeats, no gaps


def test_filter_counts_follow_the_query_and_ticked_filters(
    page: Page, service: Service, core: Searcher
) -> None:
    sign_in(page, service, "ana")
    page.goto(f"{service.url}/?q=deploy&limit=25")
    resp = core.search(core.principal("prn_ana"), search_request("deploy", limit=25))
    outcomes: dict[str, int] = {}
    for r in resp.results:
        if r.outcome:
            outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    shown = page.locator("fieldset.facet").filter(has_text="Outcome").locator(".option")
    on_page = {
        o.locator(".option-label").inner_text(): int(
            o.locator(".option-count").inner_text().split()[0]
        )
        for o in shown.all()
    }
    assert on_page == outcomes  # counts add up to the results list
    expect(page.locator(".filters .hint").first).to_contain_text(
        f"Counts are for the {resp.total} items this search matches"
    )
    # Ticking a value narrows the other counts to it.
    approved = outcomes["approved"]
    noun = "item" if approved == 1 else "items"  # the hidden count's words are plural-right
    page.get_by_role("checkbox", name=f"approved {approved} {noun}", exact=True).check()
    page.get_by_role("button", name="Apply filters").click()
    kinds = page.locator("fieldset.facet").filter(has_text="Kind").locator(".option-count")
    assert sum(int(k.inner_text().split()[0]) for k in kinds.all()) == outcomes["approved"]
    # every value is on the page, none hidden in a scrolled box (ana sees 11 tags)
    page.goto(f"{service.url}/")
    tags = page.locator("fieldset.facet").filter(has_text="Tag").locator(".option")
    expect(tags).to_have_count(11)
    for tag in tags.all():
        tag.scroll_into_view_if_needed()
        expect(tag).to_be_in_viewport()
    clipped = page.locator("ul.options").evaluate_all(
        "uls => uls.filter(u => u.scrollHeight > u.clientHeight + 1).length"
    )
    assert clipped == 0


def test_previous_goes_back_a_page_with_a_cursor_of_the_caller(
    page: Page, service: Service, core: Searcher, artifacts: Path
) -> None:
    sign_in(page, service, "ana")
    whole = core_ids(core, "ana", "deploy", limit=25)
    assert len(whole) > 4  # three pages of two at least
    page.goto(f"{service.url}/?q=deploy&limit=2")
    expect(page.locator(".previous-results")).to_have_count(0)  # the first page has none
    first = result_ids(page)
    assert first == whole[:2]
    page.get_by_role("link", name="More results").click()
    expect(page).to_have_url(re.compile(r"cursor="))
    second = result_ids(page)
    assert second == whole[2:4]
    page.get_by_role("link", name="More results").click()
    expect(page.locator(".summary")).to_contain_text("Showing 5–")
    assert result_ids(page)[0] == whole[4]
    shot(page, artifacts, "web-page-3.png")
    page.get_by_role("link", name="Previous").click()
    expect(page.locator(".summary")).to_contain_text("Showing 3–4 of")
    assert result_ids(page) == second
    page.get_by_role("link", name="Previous").click()
    # Back on page 1: no cursor in the address, the same ids as at first.
    expect(page).to_have_url(f"{service.url}/?q=deploy&limit=2")
    assert result_ids(page) == first
    expect(page.locator(".previous-results")).to_have_count(0)
    # The cursor of Previous is made for whoever is signed in, so it pages for bob as well as
    # the one in More results does: bob's page 2 -> Previous is bob's page 1.
    bob = core_ids(core, "bob", "deploy", limit=2)
    page.context.clear_cookies()
    sign_in(page, service, "bob")
    page.goto(f"{service.url}/?q=deploy&limit=2")
    page.get_by_role("link", name="More results").click()
    page.get_by_role("link", name="Previous").click()
    expect(page).to_have_url(f"{service.url}/?q=deploy&limit=2")
    assert result_ids(page) == bob
