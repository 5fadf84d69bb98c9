"""docs/_ext/source_info: the install note names a commit only if the build is of it."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
from source_info import git_commit, install_line


def git(where, *args):
    return subprocess.run(
        ["git", *args], cwd=where, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.invalid")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / ".gitignore").write_text("_build/\n")
    (tmp_path / "page.md").write_text("one\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_a_clean_checkout_names_its_commit(repo):
    (repo / "_build").mkdir()
    (repo / "_build" / "out.html").write_text("ignored output\n")
    assert git_commit(repo) == git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize("change", ["edit", "new file"])
def test_a_build_with_uncommitted_changes_names_no_commit(repo, change):
    if change == "edit":
        (repo / "page.md").write_text("two\n")
    else:
        (repo / "other.md").write_text("new\n")
    assert git_commit(repo) == ""
    assert install_line("sdpa-ref", "https://example.invalid/r", "") == (
        'python -m pip install "sdpa-ref @ git+https://example.invalid/r"'
    )


def test_outside_a_checkout_there_is_no_commit(tmp_path):
    assert git_commit(tmp_path) == ""
