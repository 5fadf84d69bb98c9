"""The PDF reader the print tests use, on streams that end awkwardly."""

import zlib

import pytest

from .pdf_marks import _pages


def _content_ending_in(last: bytes) -> tuple[bytes, bytes]:
    """A page's text and its Flate stream, whose last compressed byte is ``last``."""
    for i in range(256):
        # a comment whose last byte runs through every value, so that the
        # checksum that ends the compressed stream does too
        tail = bytes([i])
        text = b"BT /F1 9 Tf 72 720 Td (line) Tj ET %" + tail
        packed = zlib.compress(text)
        if packed.endswith(last):
            return text, packed
    raise AssertionError(f"no stream ends in {last!r}")


@pytest.mark.parametrize("last", [b"\r", b"\n", b"x"])
def test_a_stream_whose_compressed_bytes_end_in_a_line_break_is_read_whole(last):
    # Chromium's content streams are compressed bytes; when they happen to end
    # in \r or \n, a reader that strips an end-of-line before "endstream" cuts
    # the stream short (zlib: "incomplete or truncated stream", seen in CI).
    text, packed = _content_ending_in(last)
    pdf = (
        b"%PDF-1.4\n1 0 obj\n<</Type /Pages /Kids [2 0 R] /Count 1>>\nendobj\n"
        b"2 0 obj\n<</Type /Page /MediaBox [0 0 595 842] /Contents 3 0 R>>\nendobj\n"
        + b"3 0 obj\n<</Filter /FlateDecode /Length %d>> stream\n" % len(packed)
        + packed
        + b"\nendstream\nendobj\n%%EOF\n"
    )
    assert _pages(pdf) == [(842.0, text.decode("latin-1"))]
