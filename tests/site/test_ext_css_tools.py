"""docs/_ext/css_tools: reading, trimming, renaming and rebasing minified CSS."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
from css_tools import (
    blocks,
    class_names,
    drop_unused_properties,
    rebase_urls,
    rename_classes,
    split_selectors,
    trim_css,
)


def test_blocks_split_at_top_level_and_drop_plain_comments():
    css = '/* gone */@import "a;b.css";a{b:c}@media (x){.p .q{r:s}}.s{content:"}{"}'
    assert blocks(css) == [
        ('@import "a;b.css";', None),
        ("a", "b:c"),
        ("@media (x)", ".p .q{r:s}"),
        (".s", 'content:"}{"'),
    ]


def test_split_selectors_ignores_commas_inside_brackets_and_parentheses():
    prelude = '.a, .b:is(.c, .d) ,[x="1,2"] .e'
    assert split_selectors(prelude) == [".a", ".b:is(.c, .d)", '[x="1,2"] .e']


def test_trim_css_keeps_only_selectors_whose_classes_are_used():
    css = (
        ".a,.b{x:y}.c .d{z:w}@media print{.a{p:q}.z{p:q}}"
        "@media screen{.z{a:b}}@font-face{src:url(f.woff2)}h1{m:0}"
    )
    assert trim_css(css, {"a", "d"}) == (
        ".a{x:y}\n@media print{.a{p:q}}\n@font-face{src:url(f.woff2)}\nh1{m:0}"
    )


@pytest.mark.parametrize(
    "rule",
    [
        ".a:not(.never){x:y}",  # :not() does not need its class
        '[class~="q"] .a{x:y}',  # an attribute value is no class
        ".md\\:wide{x:y}",  # escapes are not parsed: kept to be safe
        ":is(.never){x:y}",
    ],
)
def test_trim_css_keeps_what_it_cannot_rule_out(rule):
    assert trim_css(rule, {"a"}) == rule


def test_trim_css_keeps_an_unclassed_rule_after_a_licence_comment():
    css = (
        "/*! normalize.css v8.0.1 | MIT License | github.com/necolas/normalize.css */"
        "html{line-height:1.15}body{margin:0}"
    )
    trimmed = trim_css(css, set())
    assert "html{line-height:1.15}" in trimmed
    # The licence stays, ahead of the rules it covers.
    assert trimmed.startswith("/*! normalize.css v8.0.1 | MIT License")


def test_drop_unused_properties_follows_var_chains_across_sheets():
    sheets = {
        "a.css": ":root{--a:1;--b:var(--c);--c:2;--d:3}.x{color:var(--b)}",
        "b.css": '.y{--e:url("a;b");margin:0}',
    }
    assert drop_unused_properties(
        sheets, extra="el.style.getPropertyValue('var(--d)')"
    ) == {
        "a.css": ":root{--b:var(--c);--c:2;--d:3}.x{color:var(--b)}",
        "b.css": ".y{margin:0}",
    }


def test_rename_classes_changes_selectors_only():
    css = ".a .b{src:url(x.a)}@media (x){.a{c:d}}@font-face{font-family:.a}"
    assert rename_classes(css, {"a": "Ka"}) == (
        ".Ka .b{src:url(x.a)}@media (x){.Ka{c:d}}@font-face{font-family:.a}"
    )


def test_class_names_reads_nested_rules_but_not_declarations():
    css = ".a .b:hover{x:y}@media (x){.c>.d{e:f}}@font-face{src:url(f.woff2)}"
    assert class_names(css) == {"a", "b", "c", "d"}


def test_rebase_urls_moves_relative_urls_and_leaves_absolute_ones():
    css = (
        'a{b:url("../img/x.png")}c{d:url(data:image/png;base64,AA)}'
        "e{f:url(https://example.org/y)}g{h:url(/abs.png)}i{j:url(#m)}"
    )
    assert rebase_urls(css, "_static/css/s.css", "sub/page.html") == (
        "a{b:url(../_static/img/x.png)}c{d:url(data:image/png;base64,AA)}"
        "e{f:url(https://example.org/y)}g{h:url(/abs.png)}i{j:url(#m)}"
    )
    assert rebase_urls("a{b:url(f.woff2)}", "_static/k.css", "index.html") == (
        "a{b:url(_static/f.woff2)}"
    )
