"""The bibliography: every work cited somewhere, every citation resolvable,
and no two works that a reader would see under the same label."""

import re
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import pybtex.database
import pytest
from pybtex.richtext import Text

DOCS = Path(__file__).parents[2] / "docs"
CITE = re.compile(r"\{cite:[a-z]+\}`([^`]+)`")


@cache
def _entries():
    entries = {}
    for path in [DOCS / "references.bib", *sorted((DOCS / "bib").glob("*.bib"))]:
        for key, entry in pybtex.database.parse_file(path).entries.items():
            assert key not in entries, f"{key} is in two .bib files"
            entries[key] = entry
    return entries


def _cited():
    return {
        key.strip()
        for page in DOCS.glob("*.md")
        for keys in CITE.findall(page.read_text())
        for key in keys.split(",")
    }


def _label(entry, year=None):
    """What sphinxcontrib-bibtex's author_year style shows in a citation.

    'Last' for one author, 'Last and Last' for two and 'Last et al.' for
    three or more. BibTeX's ``others`` makes it 'Last et al.' too:
    ``{Dao, Tri and others}`` shows as 'Dao et al.' (docs/_ext/citations.py).
    """
    people = entry.persons.get("author", [])
    names = [" ".join(p.last_names) or " ".join(p.first_names) for p in people]
    others = len(names) > 2 or "others" in names
    who = f"{names[0]} et al." if others else " and ".join(names)
    year = entry.fields.get("year", "n.d.") if year is None else year
    return f"{who}, {year}"


def _year_and_suffix(entry):
    match = re.fullmatch(r"(\d{4})([a-z]?)", entry.fields.get("year", "n.d."))
    return (match[1], match[2]) if match else (entry.fields.get("year", "n.d."), "")


def test_every_citation_resolves():
    assert _cited() <= set(_entries()), sorted(_cited() - set(_entries()))


def test_every_work_in_the_bibliography_is_cited_where_a_claim_is_made():
    uncited = sorted(set(_entries()) - _cited())
    assert not uncited, f"listed on the References page but cited nowhere: {uncited}"


def test_no_two_works_share_a_label():
    labels = Counter(_label(e) for e in _entries().values())
    assert not [label for label, n in labels.items() if n > 1], labels.most_common(3)


def test_a_year_suffix_only_where_two_works_would_share_a_label():
    """2023a and 2023b sit under the same author, and only where needed."""
    groups = defaultdict(list)
    for key, entry in _entries().items():
        year, suffix = _year_and_suffix(entry)
        groups[_label(entry, year)].append((suffix, key))
    for label, members in groups.items():
        suffixes = sorted(suffix for suffix, _ in members)
        if len(members) == 1:
            assert suffixes == [""], f"{members[0][1]}: {label} needs no suffix"
        else:
            expected = [chr(ord("a") + i) for i in range(len(members))]
            assert suffixes == expected, f"{label}: {sorted(members)}"


def _fields():
    for key, entry in _entries().items():
        for name in ("title", "note", "howpublished", "booktitle"):
            if name in entry.fields:
                yield key, name, entry.fields[name]


@pytest.mark.slow
def test_no_raw_latex_reaches_the_page():
    for key, name, value in _fields():
        shown = Text.from_latex(value).render_as("text")
        assert "$" not in shown, (key, name, shown)
        assert "\\" not in shown, (key, name, shown)


#: Names whose capitals the plain style's sentence case must not lower.
PROPER_NAMES = (
    "FlashAttention-2",
    "FlashAttention-3",
    "FlashAttention",
    "flash-attention",
    "CuTe",
    "gpt-oss",
    "Flex Attention",
    "llama-models",
    "Llama",
    "LLaMA",
    "OLMo",
    "Mistral",
    "Gemma",
    "PyTorch",
    "cuDNN",
    "NVIDIA",
    "Ampere",
    "IEEE",
    "Intel",
    "Cloud TPUs",
    "BFloat16",
    "Performers",
    "Sparse Transformers",
    "Routing Transformers",
    "Vision Transformers",
    "Annotated Transformer",
    "Tensor Programs",
    "RNNs",
    "GQA",
    "SDPA",
    "XPU",
    "MPS",
)


@cache
def _titles():
    """Each title as written, and as the plain style shows it (sentence case)."""
    titles = {}
    for key, entry in _entries().items():
        title = Text.from_latex(entry.fields["title"])
        titles[key] = (title.render_as("text"), title.capitalize().render_as("text"))
    return titles


@pytest.mark.slow
@pytest.mark.parametrize("name", PROPER_NAMES)
def test_titles_keep_the_case_of_proper_names(name):
    """The plain style sentence-cases titles; braces protect proper names."""
    for key, (written, shown) in _titles().items():
        assert shown.count(name) == written.count(name), (key, shown)


def test_a_library_source_is_pinned_to_a_version():
    """A repository file is cited at a tag or commit, never at a moving branch."""
    for key, entry in _entries().items():
        url = entry.fields.get("url", "")
        if "github.com" in url and ("/blob/" in url or "/tree/" in url):
            ref = url.split("/blob/" if "/blob/" in url else "/tree/")[1].split("/")[0]
            assert ref not in {"main", "master", "HEAD"}, (key, url)
        assert "/stable/" not in url, (key, url)
        if "/latest/" in url:  # an unversioned page names the version it shows
            version = re.search(r"\d+\.\d+\.\d+", entry.fields.get("howpublished", ""))
            assert version, key


def test_the_bibliography_has_at_least_fifteen_works():
    assert len(_entries()) >= 15
