"""Small, dependable CSS surgery for the site's build: no CSS library needed.

Sphinx's, Furo's and the extensions' stylesheets are minified, well-formed CSS.
These functions read them as top-level blocks (a prelude and its body), which
is all that trimming unused rules, renaming classes and inlining a page's
styles need.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

CLASS = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")
_URL = re.compile(r"url\(\s*([\"']?)(?!data:|https?:|/|#)([^\"')]+)\1\s*\)")


def blocks(css: str):
    """Top-level (prelude, body or None) pairs; comments dropped, strings kept."""
    out, i, start, n = [], 0, 0, len(css)
    while i < n:
        c = css[i]
        if css.startswith("/*", i):
            end = css.find("*/", i + 2)
            end = n if end < 0 else end + 2
            if css.startswith("/*!", i) and not css[start:i].strip():
                # A licence comment is kept, as an item of its own: inside the
                # next prelude its words (".css", ".com") would read as classes.
                out.append((css[i:end], None))
                start = i = end
                continue
            css = css[:i] + css[end:]
            n = len(css)
            continue
        if c in "\"'":
            j = i + 1
            while j < n and css[j] != c:
                j += 2 if css[j] == "\\" else 1
            i = j + 1
            continue
        if c == ";":
            out.append((css[start : i + 1].strip(), None))
            start = i = i + 1
            continue
        if c == "{":
            depth, j = 1, i + 1
            while j < n and depth:
                if css[j] in "\"'":
                    q, j = css[j], j + 1
                    while j < n and css[j] != q:
                        j += 2 if css[j] == "\\" else 1
                elif css[j] == "{":
                    depth += 1
                elif css[j] == "}":
                    depth -= 1
                j += 1
            out.append((css[start:i].strip(), css[i + 1 : j - 1]))
            start = i = j
            continue
        i += 1
    return out


def _split_outside(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside strings, () and []; blank parts dropped."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote and text[i - 1] != "\\" else quote
        elif c in "\"'":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def split_selectors(prelude: str) -> list[str]:
    """A selector list's selectors, split at the commas outside (), [] and strings."""
    return _split_outside(prelude, ",")


def _selector_used(selector: str, used: set[str]) -> bool:
    if "\\" in selector or re.search(r":(is|where|has|matches)\(", selector):
        return True
    bare = re.sub(r":not\([^()]*\)", "", selector)
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # attribute values are not classes
    return all(name in used for name in re.findall(r"\.(-?[_a-zA-Z][\w-]*)", bare))


#: At-rules whose body holds rules, not declarations.
_GROUPING = ("media", "supports", "layer", "container", "document")


def _map_rules(
    css: str, rule: Callable[[str, str], str], sep: str, *, keep_empty: bool
) -> str:
    """``css`` with each style rule written ``rule(prelude, body)``.

    Rules inside grouping at-rules (``@media``, ``@supports``, …) are mapped
    too; other at-rules (``@font-face``, ``@keyframes``, ``@page``) and
    statements are kept whole. A rule mapped to ``""`` is dropped, and so is
    a grouping at-rule left empty unless ``keep_empty``. The parts are joined
    with ``sep``.
    """
    out = []
    for prelude, body in blocks(css):
        if body is None:
            out.append(prelude)
        elif not prelude.startswith("@"):
            out.append(rule(prelude, body))
        elif prelude[1:].split("(")[0].split()[0].lower() in _GROUPING:
            inner = _map_rules(body, rule, sep, keep_empty=keep_empty)
            if inner or keep_empty:
                out.append(f"{prelude}{{{inner}}}")
        else:
            out.append(f"{prelude}{{{body}}}")
    return sep.join(part for part in out if part)


def trim_css(css: str, used: set[str]) -> str:
    """CSS without the selectors that need a class outside ``used``."""

    def rule(prelude: str, body: str) -> str:
        keep = [s for s in split_selectors(prelude) if _selector_used(s, used)]
        return f"{','.join(keep)}{{{body.strip()}}}" if keep else ""

    return _map_rules(css, rule, "\n", keep_empty=False)


def _declarations(body: str) -> list[str]:
    """A rule's declarations, split at the semicolons outside strings, () and []."""
    return _split_outside(body, ";")


_CUSTOM = re.compile(r"(--[\w-]+)\s*:")
_VAR = re.compile(r"var\(\s*(--[\w-]+)")
_RULE = re.compile(r"\{([^{}]*)\}")


def drop_unused_properties(sheets: dict[str, str], extra: str = "") -> dict[str, str]:
    """The sheets without custom properties (``--x: ...``) that nothing reads.

    A property is read if a kept declaration of any sheet, an inline style or
    a script (``extra``) names it in ``var()``; reading is followed through
    properties that are themselves kept.
    """
    decls = [
        d
        for text in sheets.values()
        for b in _RULE.findall(text)
        for d in _declarations(b)
    ]
    read = set(_VAR.findall(extra))
    plain = [d for d in decls if not _CUSTOM.match(d)]
    for d in plain:
        read.update(_VAR.findall(d))
    custom = [(m.group(1), d) for d in decls if (m := _CUSTOM.match(d))]
    while True:
        more = {v for name, d in custom if name in read for v in _VAR.findall(d)} - read
        if not more:
            break
        read |= more

    def rule(match: re.Match) -> str:
        kept = [
            d
            for d in _declarations(match.group(1))
            if not (m := _CUSTOM.match(d)) or m.group(1) in read
        ]
        return "{" + ";".join(kept) + "}"

    return {name: _RULE.sub(rule, text) for name, text in sheets.items()}


def rename_classes(css: str, names: dict[str, str]) -> str:
    """CSS with each class selector ``.x`` in ``names`` written ``.names[x]``.

    Only selectors change: a declaration such as ``url(fonts/x.woff2)`` keeps
    what looks like a class.
    """

    def rule(prelude: str, body: str) -> str:
        renamed = CLASS.sub(lambda m: "." + names.get(m.group(1), m.group(1)), prelude)
        return f"{renamed}{{{body}}}"

    return _map_rules(css, rule, "", keep_empty=True)


def class_names(css: str) -> set[str]:
    """Every class that a selector of ``css`` names."""
    found: set[str] = set()
    for prelude, body in blocks(css):
        if body is None:
            continue
        if prelude.startswith("@"):
            found |= class_names(body)
        else:
            found.update(CLASS.findall(prelude))
    return found


def rebase_urls(css: str, sheet: str, page: str) -> str:
    """``css`` from the file ``sheet`` with its relative ``url()``s made
    relative to ``page`` (both paths relative to the site's root, with /).

    >>> rebase_urls("a{src:url(fonts/x.woff2)}", "_static/katex/k.css", "index.html")
    'a{src:url(_static/katex/fonts/x.woff2)}'
    """

    def rebase(match: re.Match) -> str:
        target = posixpath.normpath(
            posixpath.join(posixpath.dirname(sheet), match.group(2))
        )
        return f"url({posixpath.relpath(target, posixpath.dirname(page) or '.')})"

    return _URL.sub(rebase, css)
