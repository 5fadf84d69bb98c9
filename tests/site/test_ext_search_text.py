"""docs/_ext/search_text: formulas and titles indexed as readers type them."""

import doctest
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
import search_text
from search_text import math_words, search_words, typed_forms


def test_the_module_examples_hold():
    # pytest does not collect docs/_ext (norecursedirs), so run them here.
    result = doctest.testmod(search_text, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted == 2
    assert result.failed == 0


@pytest.mark.parametrize(
    ("latex", "words"),
    [
        (r"\frac{1}{\sqrt{d_k}}", "1 d_k dk"),
        (r"x_{ij} + \alpha \mathrm{e}^{s_{i}}", "x_ij xij e s_i si"),
        (r"\operatorname{softmax}(QK^\top)V", "softmax QK V"),
    ],
)
def test_math_words_keeps_symbols_and_drops_commands(latex, words):
    assert math_words(latex) == words


@pytest.mark.parametrize(
    ("word", "forms"),
    [
        ("dₖ", ["dk", "d_k"]),
        ("x²", ["x2"]),  # a superscript is no subscript: no underscore form
        ("FlashAttention", ["Flash", "Attention"]),
        ("KVCache", ["KV", "Cache"]),
        ("bfloat16", ["bf16"]),
        ("FP32", ["float32"]),
        ("softmax", []),
        ("GQA", []),
        ("d_k", []),
    ],
)
def test_typed_forms(word, forms):
    assert typed_forms(word) == forms


def test_search_words_follows_each_word_with_its_forms():
    assert search_words("Why scale by √dₖ: FlashAttention in bfloat16") == [
        "Why", "scale", "by", "dₖ", "dk", "d_k",
        "FlashAttention", "Flash", "Attention", "in", "bfloat16", "bf16",
    ]  # fmt: skip
