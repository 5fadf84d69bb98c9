"""The markers that pick a quick run: every browser test carries ``browser``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def collected(*args: str) -> list[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", *args]
    run = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT)
    assert run.returncode in (0, 5), run.stdout + run.stderr
    return [line for line in run.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_every_browser_test_is_marked_browser_and_no_other_is():
    everything = collected("tests/browser")
    assert len(everything) > 100
    assert collected("tests/browser", "-m", "not browser") == []
    assert collected("tests/browser", "-m", "browser") == everything
    assert collected("tests/oracle/test_softmax.py", "-m", "browser") == []


def test_the_three_markers_are_registered():
    text = (ROOT / "pyproject.toml").read_text()
    for name in ("browser", "slow", "torch"):
        assert f'"{name}: ' in text


def test_the_tests_live_in_three_rooms():
    """tests/oracle checks sdpa_ref, tests/site the pages, figures and
    extensions, tests/browser the built site; nothing else holds a test."""
    tests = ROOT / "tests"
    rooms = sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name[0] != "_")
    assert rooms == ["browser", "oracle", "site"]
    assert not list(tests.glob("test_*.py"))
    for room in ("oracle", "site", "browser"):
        assert len(list((tests / room).glob("test_*.py"))) >= 5, room
