"""How far down a printed page its content reaches, read from Chromium's PDF.

No PDF library: Chromium writes each page as one Flate-compressed content
stream, and following its transforms (q, Q, cm) and text positions (Tm, Td)
is enough to find where the lowest text line or image is drawn.
"""

from __future__ import annotations

import re
import zlib

_NUMBER = re.compile(r"[-+]?\d*\.?\d+")
_TOKEN = re.compile(
    r"<[0-9A-Fa-f]*>|\((?:\\.|[^\\)])*\)|\[[^\]]*\]|/[^\s/\[\]()<>]+"
    r"|[-+]?\d*\.?\d+|[A-Za-z*'\"]+"
)


def _pages(pdf: bytes) -> list[tuple[float, str]]:
    """(page height, content stream) of each page, in order."""
    objects = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(rb"(\d+) 0 obj(.*?)endobj", pdf, re.S)
    }
    tree = next(b for b in objects.values() if re.search(rb"/Type\s*/Pages\b", b))
    kids = re.search(rb"/Kids\s*\[(.*?)\]", tree, re.S).group(1)
    pages = []
    for ref in re.findall(rb"(\d+) 0 R", kids):
        page = objects[int(ref)]
        box = re.search(rb"/MediaBox\s*\[\s*\S+\s+\S+\s+\S+\s+(\S+)\s*\]", page)
        contents = re.search(rb"/Contents\s*(\[.*?\]|\d+ 0 R)", page, re.S).group(1)
        stream = b""
        for n in re.findall(rb"(\d+) 0 R", contents):
            body = objects[int(n)]
            raw = re.search(rb"stream\r?\n(.*?)endstream", body, re.S).group(1)
            if b"FlateDecode" in body:
                # The end-of-line before "endstream" is not data, but the
                # compressed bytes may themselves end in \r or \n: let zlib
                # find where its stream ends and leave the rest.
                stream += zlib.decompressobj().decompress(raw)
            else:
                stream += re.sub(rb"\r?\n\Z", b"", raw)
        pages.append((float(box.group(1)), stream.decode("latin-1")))
    return pages


def _times(m, n):
    a, b, c, d, e, f = m
    p, q, r, s, t, u = n
    return (
        a * p + b * r,
        a * q + b * s,
        c * p + d * r,
        c * q + d * s,
        e * p + f * r + t,
        e * q + f * s + u,
    )


def lowest_marks(pdf: bytes, foot: float = 1.0) -> list[float]:
    """For each page, how far down (0 top, 1 bottom) text or an image is drawn.

    Marks further down than ``foot`` are ignored.
    """
    result = []
    for height, stream in _pages(pdf):
        ctm = text = (1, 0, 0, 1, 0, 0)
        stack, numbers, lowest = [], [], 0.0

        def mark(depth):
            nonlocal lowest
            if depth <= foot:
                lowest = max(lowest, depth)

        for token in _TOKEN.findall(stream):
            if _NUMBER.fullmatch(token):
                numbers.append(float(token))
                continue
            if token == "q":
                stack.append(ctm)
            elif token == "Q" and stack:
                ctm = stack.pop()
            elif token == "cm" and len(numbers) >= 6:
                ctm = _times(tuple(numbers[-6:]), ctm)
            elif token == "Tm" and len(numbers) >= 6:
                text = tuple(numbers[-6:])
            elif token == "Td" and len(numbers) >= 2:
                text = _times((1, 0, 0, 1, numbers[-2], numbers[-1]), text)
            elif token in ("Tj", "TJ"):
                mark(1 - _times(text, ctm)[5] / height)
            elif token == "Do":  # an image fills the unit square of the CTM
                mark(1 - min(ctm[5], ctm[3] + ctm[5]) / height)
            numbers = []
        result.append(lowest)
    return result
