"""The built site, served on 127.0.0.1 and opened in Debian's Chromium.

Shared by the browser tests (conftest.py) and the benchmarks
(benchmarks/bench.py), which must run without pytest: this module needs
neither pytest nor, until a browser is launched, playwright.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: Loads every image of the page now, lazy ones too, and waits for them and
#: for the fonts.
ALL_IMAGES = """async () => {
    const images = [...document.images];
    images.forEach(i => { i.loading = 'eager'; });
    await Promise.all(images.map(i => i.complete ? null
        : new Promise(done => { i.onload = i.onerror = done; })));
    await document.fonts.ready;
}"""


class ServerStartError(RuntimeError):
    """The site's server did not accept a connection in time."""


@contextmanager
def serve(site: Path, timeout: float = 10) -> Iterator[str]:
    """Serve ``site`` with ``python -m http.server`` on 127.0.0.1.

    Yields the base URL once the server accepts connections; the server is
    stopped by its PID afterwards.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(site),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise ServerStartError("the site server did not start")
        yield f"http://127.0.0.1:{port}/"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def launch(playwright):
    """Debian's Chromium, launched through a running ``sync_playwright()``."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
