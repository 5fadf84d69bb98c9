"""docs/_ext/page_weight: image sizes, page classes and per-page inline CSS."""

import struct
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
from page_weight import image_size, inline_styles, page_classes, sized_images


def png(width, height):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\0" * (width + 1) * height)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", pixels)
        + chunk(b"IEND", b"")
    )


SVGS = {
    '<svg xmlns="x" width="345.6pt" height="244.8pt">': (461, 326),  # matplotlib's
    '<?xml?>\n<svg\n width="30" height="20px" viewBox="0 0 3 2">': (30, 20),
    '<svg width="1in" height="2.54cm">': (96, 96),
    '<svg width="100%" height="50mm" viewBox="0 0 400 300">': (400, 300),
    '<svg viewBox="0 0 120.4 60.6">': (120, 61),
    '<svg width="10em" height="5em">': None,
}


@pytest.mark.parametrize(("tag", "size"), SVGS.items())
def test_image_size_of_an_svg(tmp_path, tag, size):
    (tmp_path / "f.svg").write_text(tag + "</svg>", encoding="utf-8")
    assert image_size(tmp_path / "f.svg") == size


def test_image_size_of_a_png_other_files_and_no_file(tmp_path):
    (tmp_path / "f.png").write_bytes(png(7, 3))
    (tmp_path / "f.txt").write_text("hello", encoding="utf-8")
    assert image_size(tmp_path / "f.png") == (7, 3)
    assert image_size(tmp_path / "f.txt") is None
    assert image_size(tmp_path / "missing.png") is None


def test_image_size_of_an_svg_with_a_comma_separated_viewbox(tmp_path):
    (tmp_path / "f.svg").write_text('<svg viewBox="0,0,40,30"></svg>', encoding="utf-8")
    assert image_size(tmp_path / "f.svg") == (40, 30)


def test_sized_images_adds_size_and_lazy_loading_where_missing(tmp_path):
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "a.png").write_bytes(png(4, 2))
    html = (
        '<img alt="A" src="_images/a.png?v=1"/>'
        '<img src="_images/a.png" loading="eager">'
        '<img src="_images/a.png" width="9"/>'
        '<img src="_images/missing.png"/>'
    )
    assert sized_images(html, tmp_path) == (
        '<img alt="A" src="_images/a.png?v=1" width="4" height="2" loading="lazy" />'
        '<img src="_images/a.png" loading="eager" width="4" height="2" >'
        '<img src="_images/a.png" width="9"/>'
        '<img src="_images/missing.png"/>'
    )


def test_page_classes_reads_class_attributes_only():
    html = '<div class="a  b"><span class="c"></span><p data-class="z" title="class=y">'
    assert page_classes(html) == {"a", "b", "c"}


SHEETS = {
    "_static/a.css": (
        ":root{--used:1px;--unused:2px;--inline:3px}.on{margin:var(--used)}"
        ".off{color:red}.x{background:url(img/bg.png)}.added{color:blue}"
    ),
    "_static/b.css": "p{color:green}.off2{color:red}",
}


def test_inline_styles_puts_the_used_rules_of_every_linked_sheet_in_one_place():
    html = (
        '<head><link rel="stylesheet" type="text/css" href="../_static/a.css?v=3" />\n'
        '<link rel="stylesheet" href="https://cdn.example.org/x.css" />\n'
        '<link rel="stylesheet" href="../_static/b.css" />\n</head>'
        '<body><p class="on x" style="width:var(--inline)">t</p></body>'
    )
    assert inline_styles(html, "sub/page.html", SHEETS, {"added"}) == (
        "<head><style>:root{--used:1px;--inline:3px}\n.on{margin:var(--used)}\n"
        ".x{background:url(../_static/img/bg.png)}\n.added{color:blue}\n"
        "p{color:green}</style>\n"
        '<link rel="stylesheet" href="https://cdn.example.org/x.css" />\n'
        "</head>"
        '<body><p class="on x" style="width:var(--inline)">t</p></body>'
    )


def test_inline_styles_leaves_a_page_without_stylesheet_links_alone():
    html = "<p class='on'>no links</p>"
    assert inline_styles(html, "index.html", SHEETS, set()) == html
