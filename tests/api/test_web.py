"""The web page end to end in headless Chromium (Debian's, driven by Playwright): fill the form,
see the plan table and one bar per plan, trigger a validation error next to its field; screenshots
are saved as test artifacts under test-artifacts/."""
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# As this workplace's notes ask: no sandbox as root, no background networking on a closed network.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")


@pytest.fixture
def page():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        pg = browser.new_page(viewport={"width": 1280, "height": 800})
        pg.set_default_timeout(60_000)
        yield pg
        browser.close()


def test_form_table_charts_and_field_errors(server, page):
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(server.url + "/")
    page.wait_for_selector("#model option[value='qwen2.5-7b']", state="attached")
    page.select_option("#model", "qwen2.5-7b")
    page.select_option("#gpu", "a100-80gb")
    page.fill("#gpus_per_node", "4")
    page.fill("#global_batch", "64")
    page.fill("#seq_len", "2048")
    page.keyboard.press("Enter")                       # submit by keyboard from the focused field
    page.wait_for_selector("#plans tbody tr")
    rows = page.locator("#plans tbody tr").count()
    assert rows >= 1
    assert page.locator("#bars svg g.plan-bar").count() == rows
    assert page.locator("#bars svg .capacity-line").count() == 1 and page.locator("#bars svg .margin-line").count() == 1
    page.wait_for_selector("#curve svg polyline.memory-curve")
    assert page.locator("#curve svg circle").count() >= 2
    assert "torchrun" in page.inner_text("#command") or "deepspeed" in page.inner_text("#command")
    page.screenshot(path=str(ARTIFACTS / "web-plans.png"), full_page=True)

    page.fill("#global_batch", "63")                   # not divisible by 4 GPUs: a 422 naming global_batch
    page.click("#submit")
    page.wait_for_selector("#err-global_batch:not(:empty)")
    assert "nearest valid global batches: 60, 64" in page.inner_text("#err-global_batch")
    assert page.get_attribute("#global_batch", "aria-invalid") == "true"
    page.fill("#global_batch", "64")
    page.select_option("#gpu", "a100-80gb")
    page.fill("#config", '{"model_type": "llama", "hidden_size": "wide"}')   # a bad pasted config: next to the model
    page.click("#submit")
    page.wait_for_selector("#err-model:not(:empty)")
    page.screenshot(path=str(ARTIFACTS / "web-error.png"))


def test_narrow_screen_keeps_the_form_usable(server, page):
    page.set_viewport_size({"width": 380, "height": 800})
    page.goto(server.url + "/")
    page.wait_for_selector("#model option[value='gpt2']", state="attached")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 380 + 1                             # no horizontal scrolling of the page itself
    page.focus("#model")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "config"
