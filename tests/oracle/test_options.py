"""The options: one definition, every signature listing it, typos named."""

import dataclasses
import inspect

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import kvcache, testing
from sdpa_ref._options import (
    FOREIGN_NAMES,
    OPTION_NAMES,
    CacheOptionKeywords,
    OptionKeywords,
    Options,
    check_keywords,
)

PUBLIC = [
    sdpa_ref.attention,
    sdpa_ref.tiled_attention,
    sdpa_ref.attention_backward,
    sdpa_ref.tiled_attention_backward,
]
Q = K = V = np.eye(3)


@pytest.mark.parametrize("fn", PUBLIC, ids=lambda f: f.__name__)
def test_signature_lists_every_option_with_options_default(fn):
    parameters = inspect.signature(fn).parameters
    defaults = {f.name: f.default for f in dataclasses.fields(Options)}
    for name in OPTION_NAMES:
        assert name in parameters, f"{fn.__name__} does not list {name}"
        p = parameters[name]
        assert p.kind is p.KEYWORD_ONLY
        assert p.default == defaults[name], name
        assert p.annotation is not p.empty, f"{name} has no type hint"
    options = [n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY]
    assert [n for n in options if n in OPTION_NAMES] == list(OPTION_NAMES)


def test_the_keyword_sets_are_options_fields_with_their_types():
    # What a type checker sees of **options is what Options takes and checks.
    types = {f.name: f.type for f in dataclasses.fields(Options)}
    for keywords in (OptionKeywords, CacheOptionKeywords):
        hints = {
            name: getattr(hint, "__forward_arg__", hint)
            for name, hint in keywords.__annotations__.items()
        }
        assert hints == {name: types[name] for name in hints}
    assert set(OptionKeywords.__annotations__) == set(OPTION_NAMES)
    assert set(OPTION_NAMES) - set(CacheOptionKeywords.__annotations__) == {
        "q_lengths",
        "k_lengths",
        "cu_seqlens_q",
        "cu_seqlens_k",
        "seqused_k",
        "dropout_mask",
        "dropout_p",
    }


def test_a_function_s_own_defaults_are_shown_and_applied():
    # The KV cache takes FlashAttention's layout and alignment by default,
    # and the checks PyTorch's and FlashAttention's zero rows.
    cache = inspect.signature(kvcache.attention_with_kvcache).parameters
    assert cache["align"].default == "bottom_right"
    assert cache["layout"].default == "bshd"
    assert "cu_seqlens_q" not in cache
    check = inspect.signature(testing.check_attention).parameters
    assert check["empty_rows"].default == "zero"
    assert list(inspect.signature(testing.assert_attention_close).parameters) == [
        n for n in check if n != "diagnose"
    ]
    q = np.zeros((1, 1, 2, 2))
    empty = np.zeros((2, 2), dtype=bool)
    verdict = testing.check_attention(np.zeros((1, 1, 2, 2)), q, q, q, mask=empty)
    assert verdict.passed  # an empty row's output is 0, not an error
    with pytest.raises(ValueError, match="no allowed key"):
        testing.check_attention(q, q, q, q, mask=empty, empty_rows="raise")


def test_options_without_a_keyword_set_are_refused_at_definition():
    with pytest.raises(TypeError, match=r"g\(\) has no \*\*options"):

        @check_keywords(empty_rows="zero")
        def g(q):
            return q

    with pytest.raises(TypeError, match=r"g\(\) takes no option \['dropout_p'\]"):

        @check_keywords(dropout_p=0.5)
        def g(q, **options: "Unpack[CacheOptionKeywords]"):  # noqa: F821
            return q


def test_attention_signature_is_its_own():
    text = str(inspect.signature(sdpa_ref.attention))
    assert "**" not in text
    assert "window: 'Window | None' = None" in text
    assert "return_lse: 'bool' = False" in text


@pytest.mark.parametrize("fn", PUBLIC, ids=lambda f: f.__name__)
def test_a_misspelt_option_gets_a_suggestion(fn):
    with pytest.raises(TypeError) as info:
        fn(Q, K, V, np.eye(3), np.eye(3), np.zeros(3), is_casual=True)
    assert str(info.value) == (
        f"{fn.__name__}() got an unexpected keyword argument 'is_casual'; "
        "did you mean 'is_causal'?"
    )


def test_a_far_off_keyword_lists_the_options():
    with pytest.raises(
        TypeError,
        match=r"'colour'; the options are mask, mask_mod, score_mod, is_causal",
    ):
        sdpa_ref.attention(Q, K, V, colour="red")


@pytest.mark.parametrize(
    ("keyword", "ours"),
    [
        ("causal", "is_causal=True, align='bottom_right'"),
        (
            "window_size",
            "window=(left, right) with None for -1, and align='bottom_right'",
        ),
        ("softmax_scale", "scale"),
        ("sink_token_length", "sink_tokens"),
        ("attention_chunk", "chunk, with None for 0"),
        ("learnable_sink", "sink_logits"),
        ("key_padding_mask", "k_lengths, or a boolean mask"),
        ("query_padding_mask", "q_lengths"),
    ],
)
def test_flash_attention_names_point_to_flash_options(keyword, ours):
    with pytest.raises(TypeError) as info:
        sdpa_ref.tiled_attention(Q, K, V, **{keyword: 1})
    message = str(info.value)
    assert message.startswith(
        f"tiled_attention() got an unexpected keyword argument {keyword!r}: "
        f"FlashAttention's {keyword} is {ours} in sdpa_ref."
    )
    assert f"**flash_options({keyword}=...)" in message


def test_pytorch_names_say_what_sdpa_ref_calls_them():
    with pytest.raises(TypeError, match=r"PyTorch's attn_mask is mask in sdpa_ref$"):
        sdpa_ref.attention(Q, K, V, attn_mask=None)
    assert set(FOREIGN_NAMES) >= {"causal", "window_size", "softmax_scale"}


def test_options_are_frozen_and_checked_once():
    options = Options(window=(2, 0), is_causal=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.scale = 2.0  # type: ignore[misc]
    assert options.window == (2, 0)
    with pytest.raises(ValueError, match="is_causal=True means a right window"):
        Options(window=(2, 1), is_causal=True)
    # A torch-free array-like becomes a NumPy array on the way in.
    assert isinstance(Options(mask=[[True, False]]).mask, np.ndarray)


def test_wrapped_function_is_kept_for_introspection():
    assert sdpa_ref.attention.__wrapped__.__name__ == "attention"
    assert sdpa_ref.attention.__doc__.startswith("Scaled dot-product attention")
