"""The studio's page driven in a real headless browser (Debian's chromium + chromedriver).

The server is the real ``autoparser studio`` command in a subprocess; selenium drives
/usr/bin/chromedriver (never a downloaded driver). Outside CI a machine without the browser
skips with the reason; in CI (CI=true) a missing browser fails: scripts/setup_browser.sh
installs it. ``STUDIO_SCREENSHOT=path`` also saves the screenshot of the README there
(scripts/studio_screenshot.sh).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO_ROOT
from helpers.processes import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
EXAMPLE = REPO_ROOT / "src/autoparser/examples/chatml_tools.jinja"
TOOL_OUTPUT = (
    "<think>\nParis first.\n</think>\n\nChecking.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
)
WAIT = 60.0  # seconds a page state may take to appear on a loaded 2-core machine


def _browser_missing() -> str:
    if shutil.which("chromium") is None and not Path(CHROMIUM).exists():
        return "chromium is not installed (scripts/setup_browser.sh)"
    if not Path(CHROMEDRIVER).exists():
        return "chromedriver is not installed (scripts/setup_browser.sh)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the test extra)"
    pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
    return ""


def _require_browser() -> None:
    missing = _browser_missing()
    if not missing:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the browser tests: {missing}")
    pytest.skip(missing)


@pytest.fixture(scope="module")
def studio_url() -> Iterator[str]:
    _require_browser()
    port = free_port()
    port_args = ["--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autoparser.cli",
            "studio",
            str(EXAMPLE),
            "--no-browser",
            *port_args,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The command prints its URL, with the launch's token, once the socket listens.
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/#token=[\w-]+)", line)
        if found is None:
            pytest.fail(f"the studio did not start: {line}{proc.stderr.read()}")
        url = found.group(1)
        token = url.partition("#token=")[2]
        request = urllib.request.Request(
            url.partition("#")[0] + "api/template", headers={"X-Studio-Token": token}
        )
        with urllib.request.urlopen(request, timeout=WAIT) as answer:
            assert answer.status == 200
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="studio-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1600,1300",
    ):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(WAIT)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(browser: Any, condition: Any, what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, WAIT).until(condition)
    except TimeoutException:
        errors = browser.execute_script(
            "return [...document.querySelectorAll('.pane-error')].map(e => e.textContent)"
        )
        pytest.fail(f"the page never showed {what}; pane errors: {errors}")


def _ready_after(browser: Any, before: str | None) -> None:
    """Wait until the page finished a refresh that started after ``before`` (its stamp)."""
    _wait(
        browser,
        lambda b: (
            (b.execute_script("return document.body.dataset.ready") or None) not in (None, before)
        ),
        "a finished refresh",
    )


def _stamp(browser: Any) -> str | None:
    value = browser.execute_script("return document.body.dataset.ready")
    return str(value) if value else None


def _set(browser: Any, element_id: str, value: str) -> None:
    """Replace a field's text as a paste would, and tell the page (an input event)."""
    browser.execute_script(
        "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event('input', {bubbles: true}));",
        element_id,
        value,
    )


@pytest.fixture
def page(driver: Any, studio_url: str) -> Any:
    driver.get("about:blank")  # the same URL again (a fragment) would not reload the page
    driver.get(studio_url)
    _ready_after(driver, None)
    return driver


def _marker_titles(browser: Any) -> list[str]:
    return list(
        browser.execute_script(
            "return [...document.querySelectorAll('#prompt mark.marker')].map(m => m.title)"
        )
    )


def test_opens_on_a_template_and_highlights_markers(page: Any) -> None:
    from selenium.webdriver.common.by import By

    assert page.find_element(By.ID, "template-name").text.endswith("chatml_tools.jinja")
    titles = _marker_titles(page)
    assert "end_of_turn" in titles  # <|im_end|> after each turn
    assert "generation_prompt" in titles
    gen = page.find_element(By.CSS_SELECTOR, "#prompt .gen-prompt").text
    assert gen.startswith("<|im_start|>assistant")
    summary = page.find_element(By.ID, "analysis-summary").text
    assert "tools: json_native" in summary and "reasoning: tag_based" in summary
    checks = page.find_elements(By.CSS_SELECTOR, "#verification li.pass")
    assert checks and not page.find_elements(By.CSS_SELECTOR, "#verification li.fail")
    fields = page.execute_script(
        "return [...document.querySelectorAll('#evidence summary .field-label')]"
        ".map(e => e.textContent.trim())"
    )
    assert "tools.format.per_call_start" in fields


def test_presets_change_the_prompt(page: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    assert "tools.format.per_call_start" not in _marker_titles(page)  # no call rendered yet
    before = _stamp(page)
    Select(page.find_element(By.ID, "preset")).select_by_value("tool_result")
    _ready_after(page, before)
    assert "tools.format.per_call_start" in _marker_titles(page)  # the call in the history
    prompt = page.find_element(By.ID, "prompt").text
    assert "get_weather" in prompt and "temperature" in prompt
    before = _stamp(page)
    Select(page.find_element(By.ID, "preset")).select_by_value("plain")
    _ready_after(page, before)
    assert "get_weather" not in page.find_element(By.ID, "prompt").text


def test_pasted_output_shows_the_parsed_call(page: Any) -> None:
    from selenium.webdriver.common.by import By

    before = _stamp(page)
    _set(page, "output", TOOL_OUTPUT)
    _ready_after(page, before)
    card = _wait(
        page, lambda b: b.find_elements(By.CSS_SELECTOR, "#parsed .tool-call"), "a tool call"
    )[0]
    assert card.find_element(By.CSS_SELECTOR, ".name").text == "get_weather"
    assert card.find_element(By.CSS_SELECTOR, ".args").text == '{"city": "Paris"}'
    assert page.find_element(By.ID, "parsed-reasoning").text == "Paris first."
    assert page.find_element(By.ID, "parsed-content").text == "Checking."
    names = page.find_elements(By.CSS_SELECTOR, "#output-spans .span-tool-name")
    assert [n.text for n in names] == ["get_weather"]
    assert page.find_elements(By.CSS_SELECTOR, "#output-spans .span-reasoning")
    accepts = page.find_element(By.ID, "accepts").text
    assert "accepts the output" in accepts or "not checked" in accepts


def test_cut_output_is_truncated_with_finish_reason_length(page: Any) -> None:
    from selenium.webdriver.common.by import By

    before = _stamp(page)
    _set(page, "output", TOOL_OUTPUT[: TOOL_OUTPUT.index("Paris", 40)])
    _ready_after(page, before)
    assert page.find_elements(By.ID, "truncated")
    assert not page.find_elements(By.CSS_SELECTOR, "#parsed .tool-call")


def test_replay_streams_deltas(page: Any) -> None:
    from selenium.webdriver.common.by import By

    before = _stamp(page)
    _set(page, "output", TOOL_OUTPUT)
    _ready_after(page, before)
    page.find_element(By.ID, "replay").click()
    _wait(page, lambda b: b.find_elements(By.ID, "replay-done"), "the end of the replay")
    deltas = [d.text for d in page.find_elements(By.CSS_SELECTOR, "#deltas li.delta")]
    assert any('"reasoning_content"' in d for d in deltas)
    assert any('"tool_calls"' in d and "get_weather" in d for d in deltas)
    assert deltas[0].startswith("chunk ")


def test_broken_template_shows_the_error_where_it_is(page: Any) -> None:
    from selenium.webdriver.common.by import By

    broken = "{{ bos_token }}\n{% for m in messages %}\n{{ m.content }\n{% endfor %}"
    _set(page, "template-source", broken)
    box = _wait(
        page,
        lambda b: (e := b.find_element(By.ID, "error-template")).is_displayed() and e,
        "the template error",
    )
    assert "TemplateError" in box.text and "line 3" in box.text
    marked = page.find_elements(By.CSS_SELECTOR, "#template-view .error-line")
    assert [m.get_attribute("data-line") for m in marked] == ["3"]


def test_screenshot(page: Any, tmp_path: Path) -> None:
    """The README's picture: the page after a pasted tool call (saved where
    STUDIO_SCREENSHOT says, by scripts/studio_screenshot.sh)."""
    before = _stamp(page)
    _set(page, "output", TOOL_OUTPUT)
    _ready_after(page, before)
    from selenium.webdriver.common.by import By

    evidence = next(
        d
        for d in page.find_elements(By.CSS_SELECTOR, "#evidence details")
        if d.find_element(By.CSS_SELECTOR, ".field-label").text == "tools.format.per_call_start"
    )
    evidence.find_element(By.TAG_NAME, "summary").click()
    without, with_ = evidence.find_elements(By.CSS_SELECTOR, ".pair pre")
    assert not without.find_elements(By.CSS_SELECTOR, "mark.marker")
    assert with_.find_element(By.CSS_SELECTOR, "mark.marker").text.startswith("<tool_call>")
    target = Path(os.environ.get("STUDIO_SCREENSHOT") or tmp_path / "studio.png")
    assert page.save_screenshot(str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_opened_config_file_brings_its_variants(page: Any, tmp_path: Path) -> None:
    """A tokenizer_config.json opened (or dropped) on the page: its named templates become
    the variants, and choosing one renders with it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    config = {
        "chat_template": [
            {
                "name": "default",
                "template": "{% for m in messages %}D:{{ m.content }}\n{% endfor %}",
            },
            {
                "name": "tool_use",
                "template": "{% for m in messages %}T:{{ m.content }}\n{% endfor %}",
            },
        ],
        "eos_token": "</s>",
    }
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    before = _stamp(page)
    page.find_element(By.ID, "template-file").send_keys(str(path))
    _ready_after(page, before)
    variants = Select(page.find_element(By.ID, "variant"))
    assert [o.text for o in variants.options] == ["default", "tool_use"]
    assert page.find_element(By.ID, "template-name").text == "tokenizer_config.json"
    assert page.find_element(By.ID, "eos-token").get_attribute("value") == "</s>"
    assert page.find_element(By.ID, "prompt").text.startswith("D:")
    before = _stamp(page)
    variants.select_by_value("tool_use")
    _ready_after(page, before)
    assert page.find_element(By.ID, "prompt").text.startswith("T:")
