"""Browser tests: the built site in Debian's Chromium, driven by Playwright.

Chromium comes from Debian (``apt-get install chromium``), never from
``playwright install``, which downloads a browser of its own. Without it these
tests skip and say how to install it; with ``REQUIRE_BROWSER=1`` (as in CI) a
missing browser is a failure.

The site is built afresh into a temporary folder for the session, unless
``SDPA_SITE`` names a built one. It is served by ``python -m http.server`` on
127.0.0.1 and the server is stopped by its PID.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from .browsing import CHROMIUM, ServerStartError, launch, serve

ROOT = Path(__file__).parents[2]
HERE = Path(__file__).parent
HINT = (
    "install Debian's Chromium with `apt-get update && apt-get install -y chromium` "
    "(or point CHROMIUM at a Chromium binary); never run `playwright install`"
)


def _unavailable(reason: str):
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} and REQUIRE_BROWSER=1: {HINT}")
    pytest.skip(f"{reason}: {HINT}")


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable(
            "the playwright package is not installed (nox -s tests installs it)"
        )
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built site: SDPA_SITE if set, else a fresh build of docs/."""
    if os.environ.get("SDPA_SITE"):
        path = Path(os.environ["SDPA_SITE"])
        assert (path / "index.html").exists(), f"SDPA_SITE={path} holds no built site"
        return path
    out = tmp_path_factory.mktemp("site")
    # figures/ is not in the wheel: the pages' kernels import it from the checkout.
    env = os.environ | {
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
        ),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-n",
            "-q",
            "-b",
            "html",
            "-d",
            str(out / "doctrees"),
            str(ROOT / "docs"),
            str(out / "html"),
        ],
        check=True,
        env=env,
    )
    return out / "html"


@pytest.fixture(scope="session")
def server(browser, site):
    """Base URL of the site served on 127.0.0.1; stopped by PID afterwards."""
    try:
        with serve(site) as base:
            yield base
    except ServerStartError as exc:
        pytest.fail(str(exc))


class PageProblems:
    """What a page did wrong: errors, requests to other hosts, local 404s."""

    def __init__(self):
        self.console_errors: list[str] = []
        self.foreign_requests: list[str] = []
        self.not_found: list[str] = []

    def assert_clean(self):
        # Most specific first: an aborted foreign request also logs a console error.
        assert not self.foreign_requests, (
            f"requests to other hosts: {self.foreign_requests}"
        )
        assert not self.not_found, f"local 404s: {self.not_found}"
        assert not self.console_errors, f"console errors: {self.console_errors}"


@pytest.fixture
def open_page(browser, server):
    """Open a page of the site; the test fails on any error the page shows."""
    contexts = []
    problems = PageProblems()

    def route(r):
        url = urlparse(r.request.url)
        if url.hostname == "127.0.0.1" or url.scheme in ("file", "data", "blob"):
            r.continue_()
        else:
            problems.foreign_requests.append(r.request.url)
            r.abort()

    def opener(
        path="index.html",
        *,
        js=True,
        width=1280,
        height=900,
        base=None,
        **context_options,
    ):
        context = browser.new_context(
            viewport={"width": width, "height": height},
            java_script_enabled=js,
            **context_options,
        )
        contexts.append(context)
        context.route("**/*", route)
        page = context.new_page()
        page.on(
            "console",
            lambda m: m.type == "error" and problems.console_errors.append(m.text),
        )
        page.on("pageerror", lambda e: problems.console_errors.append(str(e)))
        page.on(
            "response", lambda r: r.status == 404 and problems.not_found.append(r.url)
        )
        page.goto((base or server) + path)
        return page

    opener.problems = problems
    yield opener
    for context in contexts:
        context.close()
    problems.assert_clean()


PAGE_WEIGHTS: dict[str, int] = {}


@pytest.fixture(scope="session")
def page_weights():
    """Bytes transferred by each page, reported at the end of the run."""
    return PAGE_WEIGHTS


def pytest_terminal_summary(terminalreporter):
    if not PAGE_WEIGHTS:
        return
    terminalreporter.section("page weights (all requests of a page load)")
    for name, size in sorted(PAGE_WEIGHTS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{name:<24} {size / 1000:8.1f} kB")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Every test here drives Chromium: ``-m "not browser"`` leaves them all out."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.browser)
