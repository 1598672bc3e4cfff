"""Issue 51 item 5, in headless Chromium against a real server with a token: the page itself loads without one; its
first request gets a 401, the page asks for the token once, keeps it for the tab (sessionStorage) and sends the
request again; every request after carries it without asking. A wrong token is asked for again on the next submit."""

import pytest

from tests.api.conftest import TOKEN
from tests.api.test_web import ARGS, ARTIFACTS, CHROMIUM, pytestmark, sync_api  # noqa: F401 - skipped without Chromium


@pytest.fixture
def bare_page():
    """A browser page that was never given the token (test_web's `page` is given it before the page loads)."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        pg = browser.new_page(viewport={"width": 1280, "height": 800})
        pg.set_default_timeout(60_000)
        yield pg
        browser.close()


def _submit(page, server):
    page.goto(server.url + "/")
    page.wait_for_selector("#model option[value='qwen2.5-7b']", state="attached")
    page.fill("#global_batch", "64")
    page.click("#submit")


def test_the_page_asks_for_the_token_once_and_keeps_it(server, bare_page):
    page, statuses = bare_page, []
    page.on("response", lambda r: statuses.append((r.url.removeprefix(server.url), r.status)))
    _submit(page, server)
    page.wait_for_selector("#token-dialog[open]")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-token.png"))
    page.fill("#token-input", TOKEN)
    page.keyboard.press("Enter")
    page.wait_for_selector("#answer[data-ready]", state="attached")
    assert page.locator("#plans tbody tr").count() >= 1 and page.locator("#token-dialog").count() == 0
    assert [s for s in statuses if s[1] == 401] == [("/v1/plans", 401)]  # asked once; the retry, the rest: 200
    assert page.evaluate("sessionStorage.getItem('memplan-token')") == TOKEN
    asked = len(statuses)
    page.fill("#global_batch", "128")
    page.click("#submit")  # the next answer, and its lines, files and curve, without a question
    page.wait_for_function("document.querySelector('#title').textContent.includes('128')")
    page.wait_for_selector("#answer[data-ready]", state="attached")
    assert all(s != 401 for _, s in statuses[asked:]) and page.locator("#token-dialog").count() == 0


def test_a_wrong_token_shows_the_401_and_is_asked_again(server, bare_page):
    page = bare_page
    _submit(page, server)
    page.fill("#token-input", "not-the-token-at-all")
    page.click("#token-ok")
    page.wait_for_selector("#err-form:not(:empty)")
    assert "401" in page.inner_text("#err-form") and page.locator("#answer").is_hidden()
    page.click("#submit")
    page.wait_for_selector("#token-dialog[open]")  # the stored token was refused: asked again
    page.keyboard.press("Escape")  # no answer: the 401 stands, nothing is stored
    page.wait_for_selector("#token-dialog", state="detached")
    page.wait_for_selector("#err-form:not(:empty)")
    assert page.evaluate("sessionStorage.getItem('memplan-token')") is None
