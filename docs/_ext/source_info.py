"""Where to get ``sdpa_ref``, and which version of it the site shows.

The repository's address is written once, in ``pyproject.toml``'s
``[project.urls]``; ``conf.py`` reads it into ``sdpa_repository``. The commit
is read from git when the site is built (``sdpa_commit``; empty outside a
git checkout), so one commit always gives the same pages.

The ``install-note`` directive writes the install line once, wherever a page
needs it::

    ```{install-note}
    ```

It says how to install ``sdpa_ref`` with pip, from the commit the site was
built from, which version and commit that is, and where the source is.

Furo shows the source too: each page links to its own ``.md`` at the commit
built ("View this page"), and the footer to the repository.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def git_commit(where: Path) -> str:
    """The commit checked out at ``where``, if the pages are built from it.

    "" outside a git checkout, and "" when the checkout has changes that git
    tracks or could track (not ignored files): such a build is not of any
    commit, and naming HEAD would send a reader's pip to other code.
    """

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, cwd=where
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--verify", "HEAD")
        dirty = git("status", "--porcelain")
    except (OSError, subprocess.CalledProcessError):
        return ""
    return "" if dirty else commit


def install_line(package: str, repository: str, commit: str) -> str:
    """The pip command that installs ``package`` from ``repository`` at ``commit``.

    >>> install_line("sdpa-ref", "https://github.com/sdpa-ref/sdpa-ref", "0a1b2c")
    'python -m pip install "sdpa-ref @ git+https://github.com/sdpa-ref/sdpa-ref@0a1b2c"'
    """
    at = f"@{commit}" if commit else ""
    return f'python -m pip install "{package} @ git+{repository}{at}"'


class InstallNote(SphinxDirective):
    """How to install sdpa_ref, from which version and commit, and the source."""

    has_content = False

    def run(self):
        config = self.config
        repo, commit = config.sdpa_repository, config.sdpa_commit
        box = nodes.container(classes=["sdpa-install"])
        lead = nodes.paragraph()
        lead += nodes.Text("To use ")
        lead += nodes.literal(text="sdpa_ref")
        if commit:
            lead += nodes.Text(
                " yourself, install the version these pages were built from, "
                f"{config.release}, commit "
            )
            lead += nodes.literal(text=commit[:12])
        else:  # built from uncommitted changes: no commit holds these pages
            lead += nodes.Text(
                f" yourself (these pages show version {config.release}, built from "
                "changes not yet committed), install it from its repository"
            )
        lead += nodes.Text(", with pip (Python 3.11 or later; it needs only NumPy):")
        box += lead
        line = install_line(config.sdpa_package, repo, commit)
        box += nodes.literal_block(line, line, language="bash")
        source = nodes.paragraph()
        source += nodes.Text("The source, with these pages and their tests, is at ")
        source += nodes.reference(repo, repo, refuri=repo)
        source += nodes.Text(".")
        box += source
        return [box]


GITHUB_ICON = (
    '<svg aria-hidden="true" viewBox="0 0 16 16" fill="currentColor"><path '
    'fill-rule="evenodd" d="M8 0C3.58 0 0 3.58 0 8c0 3.54 2.29 6.53 5.47 7.59.4.07'
    ".55-.17.55-.38 0-.19-.01-.82-.01-1.49-2.01.37-2.53-.49-2.69-.94-.09-.23-.48-.94-"
    ".82-1.13-.28-.15-.68-.52-.01-.53.63-.01 1.08.58 1.23.82.72 1.21 1.87.87 2.33.66"
    ".07-.52.28-.87.51-1.07-1.78-.2-3.64-.89-3.64-3.95 0-.87.31-1.59.82-2.15-.08-.2-"
    ".36-1.02.08-2.12 0 0 .67-.21 2.2.82.64-.18 1.32-.27 2-.27.68 0 1.36.09 2 .27 "
    "1.53-1.04 2.2-.82 2.2-.82.44 1.1.16 1.92.08 2.12.51.56.82 1.27.82 2.15 0 3.07-"
    "1.87 3.75-3.65 3.95.29.25.54.73.54 1.48 0 1.07-.01 1.93-.01 2.2 0 .21.15.46.55"
    '.38A8.013 8.013 0 0 0 16 8c0-4.42-3.58-8-8-8z"/></svg>'
)


def _theme_options(app, config):
    if not config.sdpa_repository:
        return
    options = config.html_theme_options
    options.setdefault("source_repository", config.sdpa_repository)
    options.setdefault("source_branch", config.sdpa_commit or "main")
    options.setdefault("source_directory", "docs/")
    options.setdefault("top_of_page_buttons", ["view"])
    options.setdefault(
        "footer_icons",
        [
            {
                "name": "Source on GitHub",
                "url": config.sdpa_repository,
                "html": GITHUB_ICON,
            }
        ],
    )


def setup(app):
    app.connect("config-inited", _theme_options)
    app.add_config_value("sdpa_repository", "", "env", types=frozenset({str}))
    app.add_config_value("sdpa_commit", "", "env", types=frozenset({str}))
    app.add_config_value("sdpa_package", "sdpa-ref", "env", types=frozenset({str}))
    app.add_directive("install-note", InstallNote)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
