"""docs/_ext/citations: author-year labels, citation ids, cards and backlinks."""

import doctest
import sys
from pathlib import Path

import pytest
from pybtex.database import Entry, Person

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
import citations
from citations import _page_title, author_year, link_citations


def test_the_module_examples_hold():
    result = doctest.testmod(citations)
    assert (result.attempted, result.failed) == (7, 0)


def people(*names):
    return {"author": [Person(n) for n in names]}


def work(fields, *authors):
    return Entry("article", fields, people(*authors))


@pytest.mark.parametrize(
    ("entry", "label"),
    [
        (work({"year": "2019"}, "Shazeer, Noam"), "Shazeer, 2019"),
        (work({"year": "2022"}, "Dao, T.", "Fu, D."), "Dao and Fu, 2022"),
        (work({"year": "2015"}, "Hinton, G.", "others"), "Hinton et al., 2015"),
        (work({"year": "2024"}, "{Gemma Team}"), "Gemma Team, 2024"),
        (work({"year": "2013", "organization": "IEEE"}), "IEEE, 2013"),
        (work({}, "van der Maaten, L."), "van der Maaten, n.d."),
        (
            Entry("book", {"year": "1999"}, {"editor": [Person("Knuth, D.")]}),
            "Knuth, 1999",
        ),
    ],
)
def test_author_year(entry, label):
    assert author_year(entry) == label


def test_page_title_is_the_h1_text_without_markup():
    text = '<h1>Why scale by √d<sub>k</sub><a class="headerlink" href="#x">¶</a></h1>'
    assert _page_title(text) == "Why scale by √dk"
    assert _page_title("<p>no heading</p>") == ""


def cite(ref, text):
    href = f"references.html#{ref}"
    return f'<a class="reference internal" href="{href}" title="t">{text}</a>'


def page(title, *cites):
    return (
        f'<h1>{title}<a class="headerlink" href="#h">¶</a></h1>'
        f"<article><p>{' '.join(cites)}</p></article>"
    )


def entry(ref, label, body):
    return (
        f'<div class="citation" id="{ref}" role="listitem">\n'
        f'<span class="label">{label}</span>\n<p>{body}</p>\n</div>\n'
    )


@pytest.fixture
def site(tmp_path):
    (tmp_path / "a.html").write_text(
        page(
            "Page &amp; A",
            cite("id10", "Dao and Fu, 2022"),
            cite("id2", "Vaswani and others, 2017"),
            cite("id10", "Dao and Fu, 2022"),
            cite("id9", "Shazeer, 2019"),
        ),
        encoding="utf-8",
    )
    (tmp_path / "b.html").write_text(page("Page B", cite("id2", "V")), encoding="utf-8")
    (tmp_path / "c.html").write_text(page("No cites"), encoding="utf-8")
    (tmp_path / "references.html").write_text(
        entry("id2", "Vaswani et al., 2017", "Attention is all you need.")
        + entry("id9", "Shazeer, 2019", "Fast decoding.")
        + entry("id10", "Dao and Fu, 2022", "FlashAttention.")
        + entry("id11", "Uncited, 2020", "Never cited."),
        encoding="utf-8",
    )
    link_citations(tmp_path)
    return tmp_path


def linked(ref, n, text):
    """The n-th citation of ref on a page, as link_citations leaves it."""
    return (
        f'<a class="reference internal sdpa-cite" href="references.html#{ref}" '
        f'id="cite-{ref}-{n}">{text}</a>'
    )


def test_each_citation_gets_a_numbered_id_and_et_al(site):
    text = (site / "a.html").read_text(encoding="utf-8")
    expected = " ".join(
        [
            linked("id10", 1, "Dao and Fu, 2022"),
            linked("id2", 1, "Vaswani <em>et al.</em>, 2017"),
            linked("id10", 2, "Dao and Fu, 2022"),
        ]
    )
    assert expected in text


def test_a_page_carries_the_entries_it_cites_in_natural_order(site):
    text = (site / "a.html").read_text(encoding="utf-8")
    assert text.endswith(
        '<template id="sdpa-references">'
        '<span data-ref="id2">Attention is all you need.</span>'
        '<span data-ref="id9">Fast decoding.</span>'
        '<span data-ref="id10">FlashAttention.</span>'
        "</template></article>"
    )
    assert (site / "c.html").read_text(encoding="utf-8") == page("No cites")


def test_references_list_every_place_that_cites_them(site):
    refs = (site / "references.html").read_text(encoding="utf-8")
    assert (
        '<p>FlashAttention.</p><p class="sdpa-cited-in">Cited in '
        '<a href="a.html#cite-id10-1">Page &amp; A</a> '
        '<a href="a.html#cite-id10-2" aria-label="Page &amp; A, citation 2">2</a>.</p>'
    ) in refs
    assert (
        '<p class="sdpa-cited-in">Cited in '
        '<a href="a.html#cite-id2-1">Page &amp; A</a>; '
        '<a href="b.html#cite-id2-1">Page B</a>.</p>'
    ) in refs
    assert "<p>Never cited.</p>\n</div>" in refs


def test_linking_again_changes_nothing(site):
    before = {p.name: p.read_text(encoding="utf-8") for p in site.glob("*.html")}
    link_citations(site)
    assert {
        p.name: p.read_text(encoding="utf-8") for p in site.glob("*.html")
    } == before


def test_no_references_page_means_no_change(tmp_path):
    (tmp_path / "a.html").write_text(page("A", cite("id2", "V")), encoding="utf-8")
    link_citations(tmp_path)
    assert (tmp_path / "a.html").read_text(encoding="utf-8") == page(
        "A", cite("id2", "V")
    )


def test_every_published_number_cites_its_sources_under_its_entry():
    from sdpa_ref import published

    for name, keys in published.SOURCES.items():
        full = f"sdpa_ref.published.{name}"
        plural = "s" if len(keys) > 1 else ""
        expected = f"Source{plural}: :cite:p:`{','.join(keys)}`."
        assert citations.source_citation(full, published.SOURCES) == expected
    lines = ["A constant."]
    citations._cite_sources(None, "data", "sdpa_ref.published.ADAM", {}, {}, lines)
    assert lines == ["A constant.", "", "Source: :cite:p:`kingma2015adam`."]
    untouched = ["A constant."]
    citations._cite_sources(None, "data", "sdpa_ref.training.STEPS", 1, {}, untouched)
    assert untouched == ["A constant."]
