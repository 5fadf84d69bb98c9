"""The bibliography: every work cited somewhere, every citation resolvable,
and no two works that a reader would see under the same label."""

import re
from collections import Counter
from pathlib import Path

import pybtex.database

DOCS = Path(__file__).parents[1] / "docs"
CITE = re.compile(r"\{cite:[a-z]+\}`([^`]+)`")


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


def _label(entry):
    """What the author-year style shows: 'Last', 'Last and Last' or 'Last et al.'."""
    people = entry.persons.get("author", [])
    names = [" ".join(p.last_names) or " ".join(p.first_names) for p in people]
    others = len(names) > 2 or "others" in names
    who = f"{names[0]} et al." if others else " and ".join(names)
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


def test_every_citation_resolves():
    assert _cited() <= set(_entries()), sorted(_cited() - set(_entries()))


def test_every_work_in_the_bibliography_is_cited_where_a_claim_is_made():
    uncited = sorted(set(_entries()) - _cited())
    assert not uncited, f"listed on the References page but cited nowhere: {uncited}"


def test_no_two_works_share_a_label():
    labels = Counter(_label(e) for e in _entries().values())
    assert not [label for label, n in labels.items() if n > 1], labels.most_common(3)


def test_the_bibliography_has_at_least_fifteen_works():
    assert len(_entries()) >= 15
