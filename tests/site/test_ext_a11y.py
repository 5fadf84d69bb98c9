"""docs/_ext/a11y: named landmarks, plain corner cells, ARIA-correct captions."""

import doctest
import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
import a11y
from a11y import landmarks


def test_the_module_example_holds():
    result = doctest.testmod(a11y)
    assert (result.attempted, result.failed) == (1, 0)


def test_landmarks_names_both_asides_and_the_icon_bar():
    html = (
        '<aside class="sidebar-drawer">'
        '<div class="content-icon-container"><a href="x">src</a></div>'
        '<aside class="toc-drawer no-toc">'
    )
    assert landmarks(html) == (
        '<aside class="sidebar-drawer" id="sdpa-site-nav" aria-label="Site navigation">'
        '<div class="content-icon-container" role="navigation" '
        'aria-label="Page source"><a href="x">src</a></div>'
        '<aside class="toc-drawer no-toc" id="sdpa-page-toc" aria-label="On this page">'
    )


def test_landmarks_puts_the_back_to_top_link_in_a_named_landmark_once():
    link = '<a href="#" class="back-to-top muted-link"><span>Back to top</span></a>'
    once = landmarks("<div>" + link + "</div>")
    nav = '<nav class="sdpa-back-to-top" aria-label="Back to top">'
    assert once == "<div>" + nav + link + "</nav></div>"
    assert landmarks(once) == once


def test_landmarks_turns_only_empty_header_cells_into_plain_cells():
    html = (
        '<th class="head"></th><th class="head s"><p></p></th><th class="head">q</th>'
    )
    assert landmarks(html) == (
        '<td class="head"></td><td class="head s"></td><th class="head">q</th>'
    )


def test_landmarks_is_idempotent_on_a_built_page():
    page = Path(__file__).parents[2] / "docs" / "_build" / "html" / "formula.html"
    if not page.exists():
        pytest.skip("the site is not built")
    text = page.read_text(encoding="utf-8")
    assert 'id="sdpa-page-toc"' in text
    assert landmarks(text) == text


def _build(root: Path, extensions: list[str], pages: dict[str, str]) -> str:
    """index.html of a Sphinx project of ``pages``, built with ``extensions``."""
    from sphinx.application import Sphinx

    root.mkdir(exist_ok=True)
    (root / "conf.py").write_text(f"extensions = {extensions!r}\n")
    for name, text in pages.items():
        (root / f"{name}.rst").write_text(text)
    out = root / "_build"
    app = Sphinx(root, root, out, out / ".doctrees", "html", status=io.StringIO(),
                 warning=io.StringIO(), freshenv=True)  # fmt: skip
    app.build()
    return (out / "index.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A two-page Sphinx project built with the extension alone."""
    index = (
        "Home\n====\n\n.. toctree::\n   :caption: Chapters\n\n   other\n\n"
        "See [Ref]_.\n\n.. [Ref] A cited work.\n"
    )
    other = "Other\n=====\n\nText.\n"
    return _build(
        tmp_path_factory.mktemp("a11y"), ["a11y"], {"index": index, "other": other}
    )


def test_a_toctree_caption_is_a_level_2_heading(built):
    assert '<p aria-level="2" class="caption" role="heading">' in built
    assert '<span class="caption-text">Chapters</span></p>' in built


def test_a_citation_is_a_list_item(built):
    assert '<div class="citation" id="ref" role="listitem">' in built
    assert "doc-biblioentry" not in built


def _containers_page(root: Path, extensions: list[str]) -> str:
    """The body of a page of containers, built with ``extensions`` in that order."""
    index = (
        "Home\n====\n\n"
        ".. container:: table-wrapper\n\n   wrapped\n\n"
        ".. container:: sdpa-widget-fallback\n\n   fallback\n\n"
        ".. container:: table-wrapper figure-fallback\n\n   both\n\n"
        ".. container:: plain\n\n   plain\n"
    )
    page = _build(root, extensions, {"index": index})
    return page[page.index('<section id="home">') : page.index("</section>")]


@pytest.mark.parametrize("parser", [[], ["myst_parser"]], ids=["docutils", "myst"])
def test_the_two_container_wrappers_give_one_page_in_either_order(tmp_path, parser):
    # a11y and page_weight both wrap the container handler that they find;
    # the site's page must not depend on which of them conf.py names first.
    first = _containers_page(tmp_path / "a", [*parser, "a11y", "page_weight"])
    second = _containers_page(tmp_path / "b", [*parser, "page_weight", "a11y"])
    assert first == second
    table = (
        '<div aria-label="Table" class="table-wrapper{} docutils container" '
        'role="group" tabindex="0">'
    )
    assert table.format("") + "\n<p>wrapped</p>\n</div>\n" in first
    assert '<noscript><div class="sdpa-widget-fallback docutils container">' in first
    both = table.format(" figure-fallback") + "\n<p>both</p>\n</div>\n"
    assert "<noscript>" + both + "</noscript>" in first
    assert '<div class="plain docutils container">\n<p>plain</p>\n</div>' in first
