"""Citations a reader can follow both ways, without leaving the page.

* **One label for a work everywhere.** The text cites in author-year form
  (``bibtex_reference_style = "author_year"``); the References page now labels
  each entry the same way ("Vaswani et al., 2017") instead of numbering it.
  The bibliography style is pybtex's *plain* with that label, and with each
  web link once: an entry's ``url`` is left out where it is the page its
  arXiv id or DOI already links to.
* **The reference where it is cited.** After the build, every citation link
  gets the class ``sdpa-cite`` and an id, and its page gets the entries it
  cites, copied from the References page into a ``<template>``. A small script
  (``_static/reading.js``) shows the entry in a card on hover, focus or tap.
  Nothing is fetched: it works offline and from ``file://``.
* **Back to where it was cited.** Each entry on the References page lists
  every place that cites it, linked.
"""

from __future__ import annotations

import html
import importlib
import re
from collections import defaultdict
from pathlib import Path

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import optional, sentence

STYLE = "sdpa"
REFERENCES = "references.html"
_CITE = re.compile(
    r'<a class="reference internal( sdpa-cite)?" href="references\.html#([\w-]+)"'
    r'(?: title="[^"]*")?(?: id="[^"]*")?>(.*?)</a>',
    re.S,
)
# A .bib "and others" reaches the text as a person named "others".
_OTHERS = re.compile(r"\band others\b")
_ENTRY = re.compile(
    r'<div class="citation" id="([\w-]+)" role="listitem">\s*'
    r'<span class="label">(.*?)</span>\s*<p>(.*?)</p>',
    re.S,
)
_TEMPLATE = re.compile(r'<template id="sdpa-references">.*?</template>', re.S)
_CITED_IN = re.compile(r'<p class="sdpa-cited-in">.*?</p>', re.S)
_TITLE = re.compile(r"<h1>(.*?)<a class=\"headerlink\"", re.S)


def author_year(entry) -> str:
    """'Last', 'Last and Last' or 'Last et al.', and the year, as the text cites.

    >>> from pybtex.database import Entry, Person
    >>> e = Entry("article", fields={"year": "2017"},
    ...           persons={"author": [Person("Vaswani, A."), Person("Shazeer, N."),
    ...                               Person("Parmar, N.")]})
    >>> author_year(e)
    'Vaswani et al., 2017'
    >>> author_year(Entry("misc", persons={"author": [Person("{PyTorch Contributors}")]}))
    'PyTorch Contributors, n.d.'
    """
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [
        " ".join(p.prelast_names + p.last_names) or " ".join(p.first_names)
        for p in people
    ]
    if not names:
        names = [
            entry.fields.get("organization") or entry.fields.get("key") or entry.key
        ]
    # A group author is written in braces: {Gemma Team}.
    names = [name.replace("{", "").replace("}", "") for name in names]
    others = len(names) > 2 or "others" in names
    who = f"{names[0]} et al." if others else " and ".join(names)
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """Bibliography labels in the text's own author-year form."""

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield author_year(entry)


class SiteStyle(PlainStyle):
    """pybtex's plain style with author-year labels and each link once."""

    default_label_style = AuthorYearLabels

    def format_web_refs(self, e):
        url = e.fields.get("url", "").rstrip("/")
        doi, eprint = e.fields.get("doi", ""), e.fields.get("eprint", "")
        if (eprint and url.endswith(eprint)) or (doi and url.endswith(doi)):
            # The arXiv or DOI link that follows already goes there.
            return sentence[
                optional[self.format_eprint(e)],
                optional[self.format_pubmed(e)],
                optional[self.format_doi(e)],
            ]
        return super().format_web_refs(e)


def _page_title(text: str) -> str:
    match = _TITLE.search(text)
    return re.sub(r"<[^>]+>", "", match.group(1)).strip() if match else ""


def link_citations(outdir: Path) -> None:
    """Give citations ids and cards' data, and the References page backlinks."""
    refs_page = outdir / REFERENCES
    if not refs_page.exists():
        return
    refs = refs_page.read_text(encoding="utf-8")
    entries = {ref: body for ref, _, body in _ENTRY.findall(refs)}
    cited_from: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for page in sorted(outdir.glob("*.html")):
        if page.name == REFERENCES:
            continue
        text = page.read_text(encoding="utf-8")
        seen: dict[str, int] = defaultdict(int)
        title = _page_title(text)

        def mark(match: re.Match, page=page, seen=seen, title=title) -> str:
            ref = match.group(2)
            seen[ref] += 1
            anchor = f"cite-{ref}-{seen[ref]}"
            cited_from[ref].append((page.name, anchor, title))
            text = _OTHERS.sub("<em>et al.</em>", match.group(3))
            return (
                f'<a class="reference internal sdpa-cite" href="references.html#{ref}" '
                f'id="{anchor}">{text}</a>'
            )

        new = _CITE.sub(mark, text)
        new = _TEMPLATE.sub("", new)
        if seen:
            cards = "".join(
                f'<span data-ref="{ref}">{entries[ref]}</span>'
                for ref in sorted(seen, key=_natural)
                if ref in entries
            )
            new = new.replace(
                "</article>",
                f'<template id="sdpa-references">{cards}</template></article>',
                1,
            )
        if new != text:
            page.write_text(new, encoding="utf-8")

    def backlinks(match: re.Match) -> str:
        ref = match.group(1)
        places = cited_from.get(ref, [])
        if not places:
            return match.group(0)
        by_page: dict[str, list[tuple[str, str]]] = {}
        for name, anchor, title in places:
            by_page.setdefault(name, []).append((anchor, title))
        links = []
        for name, anchors in by_page.items():
            title = html.escape(html.unescape(anchors[0][1]), quote=True)
            first = f'<a href="{name}#{anchors[0][0]}">{anchors[0][1]}</a>'
            more = "".join(
                f' <a href="{name}#{anchor}" aria-label="{title}, citation {n}">{n}</a>'
                for n, (anchor, _) in enumerate(anchors[1:], start=2)
            )
            links.append(first + more)
        return (
            f'{match.group(0)}<p class="sdpa-cited-in">Cited in {"; ".join(links)}.</p>'
        )

    refs = _CITED_IN.sub("", refs)
    refs = re.sub(
        r'<div class="citation" id="([\w-]+)" role="listitem">.*?</p>',
        backlinks,
        refs,
        flags=re.S,
    )
    refs_page.write_text(refs, encoding="utf-8")


def _natural(ref: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", ref)]


def source_citation(name: str, sources) -> str | None:
    """The line that cites a published constant's source in its API entry.

    ``sources`` is :data:`sdpa_ref.published.SOURCES`; ``name`` is the entry's
    full name. Other entries get None.

    >>> source_citation("sdpa_ref.published.ADAM", {"ADAM": ("kingma2015adam",)})
    'Source: :cite:p:`kingma2015adam`.'
    >>> source_citation("sdpa_ref.published.X", {"X": ("a", "b")})
    'Sources: :cite:p:`a,b`.'
    >>> source_citation("sdpa_ref.training.ADAM", {"ADAM": ("k",)}) is None
    True
    """
    module, _, short = name.rpartition(".")
    if module != "sdpa_ref.published" or short not in sources:
        return None
    keys = sources[short]
    return f"Source{'s' if len(keys) > 1 else ''}: :cite:p:`{','.join(keys)}`."


def _cite_sources(app, what, name, obj, options, lines):  # noqa: PLR0917 (Sphinx's)
    """Cite each published number's source under its API entry, from SOURCES."""
    if what == "data" and name.startswith("sdpa_ref.published."):
        sources = importlib.import_module("sdpa_ref.published").SOURCES
        line = source_citation(name, sources)
        if line:
            lines.extend(["", line])


def _finish(app, exception):
    if exception is None and app.builder.format == "html":
        link_citations(Path(app.outdir))


def setup(app):
    register_plugin("pybtex.style.formatting", STYLE, SiteStyle)
    app.connect("build-finished", _finish, priority=400)
    app.connect("autodoc-process-docstring", _cite_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
