"""Attention's options, defined once and checked once.

:class:`Options` is the one definition of what each option may be, with its
default. The public functions (dense and tiled, forward and backward, the KV
cache and the testing helpers) take them as ``**options`` typed by
:class:`OptionKeywords` (or :class:`CacheOptionKeywords`), so a type checker
knows each name and type, and :func:`check_keywords` spells them out as
keyword-only parameters in the signature that ``help()``, an IDE's
:func:`inspect.signature` and the API pages show. Checks that need the
inputs' shapes (does the mask broadcast to the scores?) happen when the
options meet q, k and v, in :func:`sdpa_ref.core.prepare`.

:func:`check_keywords` also turns Python's "unexpected keyword argument"
into a message that names the option meant: the closest spelling, or for
FlashAttention's and PyTorch's names the sdpa_ref one and
``sdpa_ref.testing.flash_options``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar, cast, get_args

import numpy as np

from ._arrays import LAYOUTS, ArrayInput, as_array
from ._checks import (
    alignment,
    dropout_probability,
    empty_row_policy,
    nonnegative_int,
    positive_int,
    positive_scale,
    softcap_value,
    window_bounds,
)
from .mods import MaskMod, ScoreMod
from .varlen import cu_seqlens_array

__all__ = [
    "FLASH_OPTIONS",
    "FOREIGN_NAMES",
    "OPTION_NAMES",
    "Align",
    "CacheOptionKeywords",
    "EmptyRows",
    "Layout",
    "OptionKeywords",
    "Options",
    "Window",
    "check_keywords",
    "unknown_keyword_error",
    "with_signature",
]

EmptyRows: TypeAlias = Literal["raise", "zero", "nan"]
Align: TypeAlias = Literal["top_left", "bottom_right"]
Layout: TypeAlias = Literal["bhsd", "bshd"]
Window: TypeAlias = tuple[int | None, int | None]


@dataclass(frozen=True, kw_only=True)
class Options:
    """Every option of attention, checked; the defaults are attention's.

    The meaning of each is in :func:`sdpa_ref.attention`'s docstring. On
    construction each value is checked on its own and normalised: arrays
    become NumPy arrays (from torch tensors too), ``window`` a pair of ints
    or None, numbers Python floats and ints. What depends on q, k and v is
    checked by :func:`sdpa_ref.core.prepare`.

    Examples
    --------
    >>> Options(scale=np.float32(0.5), window=(np.int64(3), None))
    Options(scale=0.5, window=(3, None))
    >>> Options(align="bottom-right")
    Traceback (most recent call last):
      ...
    ValueError: align must be one of ('top_left', 'bottom_right'), got 'bottom-right'
    """

    mask: ArrayInput | None = None
    mask_mod: MaskMod | None = None
    score_mod: ScoreMod | None = None
    is_causal: bool = False
    scale: float | None = None
    empty_rows: EmptyRows = "raise"
    check_finite: bool = True
    align: Align = "top_left"
    window: Window | None = None
    sink_tokens: int = 0
    chunk: int | None = None
    softcap: float | None = None
    sink_logits: ArrayInput | None = None
    q_lengths: ArrayInput | None = None
    k_lengths: ArrayInput | None = None
    key_leftpad: ArrayInput | None = None
    cu_seqlens_q: ArrayInput | None = None
    cu_seqlens_k: ArrayInput | None = None
    seqused_k: ArrayInput | None = None
    dropout_mask: ArrayInput | None = None
    dropout_p: float = 0.0
    layout: Layout = "bhsd"

    def __post_init__(self) -> None:
        for name in ("is_causal", "check_finite"):
            flag = getattr(self, name)
            if not isinstance(flag, bool | np.bool_):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
            self._set(name, bool(flag))
        if self.scale is not None:
            self._set("scale", positive_scale(self.scale))
        self._set("empty_rows", empty_row_policy(self.empty_rows))
        self._set("align", alignment(self.align))
        left, right = window_bounds(self.window)
        if self.is_causal and right is not None and right > 0:
            raise ValueError(
                f"is_causal=True means a right window bound of 0, but window = "
                f"{self.window!r}; pass window=({left!r}, 0) or is_causal=False"
            )
        self._set("window", None if self.window is None else (left, right))
        sink_tokens = nonnegative_int(self.sink_tokens, "sink_tokens")
        if sink_tokens and left is None:
            raise ValueError(
                f"sink_tokens={sink_tokens} exempts keys from the window's left "
                f"bound, but there is none (window = {self.window!r}); pass "
                f"window=(left, right)"
            )
        self._set("sink_tokens", sink_tokens)
        if self.chunk is not None:
            self._set("chunk", positive_int(self.chunk, "chunk"))
        self._set("softcap", softcap_value(self.softcap))
        self._set("dropout_p", dropout_probability(self.dropout_p))
        if self.layout not in LAYOUTS:
            raise ValueError(
                f"layout must be one of {LAYOUTS}, got {self.layout!r}: 'bhsd' is "
                f"(batch, heads, seqlen, dim), 'bshd' FlashAttention's (batch, "
                f"seqlen, heads, dim)"
            )
        _check_mod(self.mask_mod, "mask_mod", 4, "score_mod")
        _check_mod(self.score_mod, "score_mod", 5, "mask_mod")
        self._set_arrays()
        self._set_packing()

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)  # frozen: only while checking

    def _set_arrays(self) -> None:
        if self.mask is not None:
            mask = _any_array(self.mask, "mask")
            if mask.dtype != bool and mask.dtype.kind != "f":
                raise TypeError(
                    f"mask must be boolean (True = may attend) or floating (added "
                    f"to the logits), got dtype {mask.dtype} (shape {mask.shape})"
                )
            if mask.dtype.kind == "f" and (
                np.isnan(mask).any() or np.isposinf(mask).any()
            ):
                raise ValueError(
                    "a float mask may hold finite values and -inf, not NaN or +inf"
                )
            self._set("mask", mask)
        for name in ("q_lengths", "k_lengths", "key_leftpad"):
            value = getattr(self, name)
            if value is not None:
                lengths = _any_array(value, name)
                if lengths.dtype.kind not in "iu":
                    raise TypeError(
                        f"{name} must be an integer array of shape (B,), got dtype "
                        f"{lengths.dtype} (shape {lengths.shape})"
                    )
                self._set(name, lengths)
        if self.sink_logits is not None:
            self._set("sink_logits", _any_array(self.sink_logits, "sink_logits"))
        self._set_dropout()

    def _set_packing(self) -> None:
        given = [
            n for n in ("cu_seqlens_q", "cu_seqlens_k") if getattr(self, n) is not None
        ]
        if not given:
            if self.seqused_k is not None:
                raise ValueError(
                    "seqused_k counts the used keys of each sequence of a packed "
                    "batch; pass cu_seqlens_q and cu_seqlens_k too, or k_lengths "
                    "for a padded one"
                )
            return
        if len(given) == 1:
            missing = "cu_seqlens_k" if given[0] == "cu_seqlens_q" else "cu_seqlens_q"
            raise ValueError(
                f"{given[0]} was given without {missing}: a packed batch needs both "
                f"(for self-attention, pass the same array twice)"
            )
        for name in ("q_lengths", "k_lengths"):
            if getattr(self, name) is not None:
                raise ValueError(
                    f"{name} cannot be given with cu_seqlens_q and cu_seqlens_k, "
                    f"which give each sequence's length; a cache longer than its "
                    f"use takes seqused_k"
                )
        for name in ("cu_seqlens_q", "cu_seqlens_k"):
            self._set(name, cu_seqlens_array(getattr(self, name), name))
        if self.seqused_k is not None:
            self._set("seqused_k", _any_array(self.seqused_k, "seqused_k"))

    def _set_dropout(self) -> None:
        if self.dropout_mask is None:
            if self.dropout_p > 0:
                raise ValueError(
                    f"dropout_p={self.dropout_p} needs the dropout_mask that the "
                    f"kernel drew (bool, True = keep, broadcastable to the scores' "
                    f"shape); sdpa_ref draws no random numbers"
                )
            return
        keep = _any_array(self.dropout_mask, "dropout_mask")
        if keep.dtype != bool:
            raise TypeError(
                f"dropout_mask must be boolean (True = keep), got dtype {keep.dtype} "
                f"(shape {keep.shape})"
            )
        if self.dropout_p == 0:
            raise ValueError(
                "a dropout_mask with dropout_p=0 drops entries without rescaling the "
                "rest; pass the dropout_p that the mask was drawn with"
            )
        self._set("dropout_mask", keep)

    def __repr__(self) -> str:
        """Only the options that differ from the defaults."""
        changed = [
            f"{f.name}={_short(getattr(self, f.name))}"
            for f in fields(self)
            if not _is_default(getattr(self, f.name), f.default)
        ]
        return f"Options({', '.join(changed)})"


def _any_array(value: object, name: str) -> np.ndarray[Any, Any]:
    try:
        return as_array(value, name)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{name} must be an array; {exc}") from None


def _check_mod(mod: object, name: str, arity: int, other: str) -> None:
    """A mod must be callable with FlexAttention's positional arguments."""
    if mod is None:
        return
    if not callable(mod):
        raise TypeError(f"{name} must be callable or None, got {mod!r}")
    try:
        parameters = inspect.signature(mod).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return
    required = sum(
        1
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        and p.default is p.empty
    )
    if required == arity:
        return
    signature = (
        "(b, h, q_idx, kv_idx)" if arity == 4 else "(score, b, h, q_idx, kv_idx)"
    )
    hint = f"; is it a {other}?" if required == 9 - arity else ""
    raise TypeError(
        f"{name} must take FlexAttention's {arity} positional arguments "
        f"{signature}, but {getattr(mod, '__name__', mod)!r} takes {required}{hint}"
    )


def _is_default(value: object, default: object) -> bool:
    if isinstance(value, np.ndarray):
        return False
    return bool(value == default)


def _short(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"<array {value.dtype} {value.shape}>"
    return repr(value)


class CacheOptionKeywords(TypedDict, total=False):
    """The options :func:`sdpa_ref.attention_with_kvcache` takes, as keywords.

    What a type checker knows of a public function's ``**options``; the
    defaults and the checks are :class:`Options`'. A cache has its own
    lengths, so the padding, packing and dropout options are not here.
    """

    mask: ArrayInput | None
    mask_mod: MaskMod | None
    score_mod: ScoreMod | None
    is_causal: bool
    scale: float | None
    empty_rows: EmptyRows
    check_finite: bool
    align: Align
    window: Window | None
    sink_tokens: int
    chunk: int | None
    softcap: float | None
    sink_logits: ArrayInput | None
    key_leftpad: ArrayInput | None
    layout: Layout


class OptionKeywords(CacheOptionKeywords, total=False):
    """Every option of :class:`Options`, as keywords (``**options``)."""

    q_lengths: ArrayInput | None
    k_lengths: ArrayInput | None
    cu_seqlens_q: ArrayInput | None
    cu_seqlens_k: ArrayInput | None
    seqused_k: ArrayInput | None
    dropout_mask: ArrayInput | None
    dropout_p: float


#: The options' names, in the order the public signatures list them.
OPTION_NAMES = tuple(f.name for f in fields(Options))

#: Other libraries' names for sdpa_ref's options, which a kernel developer
#: may type first: FlashAttention's ``flash_attn_func`` and ``attention_ref``
#: (flash_attn/utils/testing.py), and PyTorch's
#: ``scaled_dot_product_attention``. Each maps to (library, sdpa_ref's way).
FOREIGN_NAMES = {
    "causal": ("FlashAttention", "is_causal=True, align='bottom_right'"),
    "window_size": (
        "FlashAttention",
        "window=(left, right) with None for -1, and align='bottom_right'",
    ),
    "softmax_scale": ("FlashAttention", "scale"),
    "sink_token_length": ("FlashAttention", "sink_tokens"),
    "attention_chunk": ("FlashAttention", "chunk, with None for 0"),
    "learnable_sink": ("FlashAttention", "sink_logits"),
    "key_padding_mask": ("FlashAttention", "k_lengths, or a boolean mask"),
    "query_padding_mask": ("FlashAttention", "q_lengths"),
    "cache_leftpad": ("FlashAttention", "key_leftpad"),
    "leftpad_k": ("FlashAttention", "key_leftpad"),
    "max_seqlen_q": (
        "FlashAttention",
        "not needed: sdpa_ref reads the lengths from cu_seqlens_q",
    ),
    "max_seqlen_k": (
        "FlashAttention",
        "not needed: sdpa_ref reads the lengths from cu_seqlens_k",
    ),
    "block_table": (
        "FlashAttention",
        "an argument of sdpa_ref.attention_with_kvcache, with cache_seqlens",
    ),
    "page_table": (
        "FlashAttention",
        "block_table, an argument of sdpa_ref.attention_with_kvcache",
    ),
    "cache_seqlens": (
        "FlashAttention",
        "an argument of sdpa_ref.attention_with_kvcache",
    ),
    "cache_batch_idx": (
        "FlashAttention",
        "not an option: pass the caches indexed, k_cache[cache_batch_idx]",
    ),
    "attn_bias": ("FlashAttention", "a float mask"),
    "alibi_slopes": (
        "FlashAttention",
        "score_mod=sdpa_ref.mods.alibi(slopes, absolute=True, offset=n_k - n_q)",
    ),
    "block_mask": (
        "FlexAttention",
        "mask_mod: sdpa_ref takes the mask_mod itself and calls it block by "
        "block, so no BlockMask is needed",
    ),
    "return_attn_probs": ("FlashAttention", "return_weights and return_lse"),
    "attn_mask": ("PyTorch", "mask"),
    "enable_gqa": (
        "PyTorch",
        "not needed: k and v with fewer heads than q are grouped-query attention",
    ),
}


#: The names of ``attention_ref``'s options, which
#: ``sdpa_ref.testing.flash_options`` translates.
FLASH_OPTIONS = frozenset(
    {
        "causal",
        "window_size",
        "softmax_scale",
        "sink_token_length",
        "attention_chunk",
        "learnable_sink",
        "key_padding_mask",
        "query_padding_mask",
        "attn_bias",
        "softcap",
    }
)


def unknown_keyword_error(
    function: str, keyword: str, known: list[str], listed: list[str] | None = None
) -> TypeError:
    """The TypeError for ``function(keyword=...)``, naming the option meant.

    ``known`` are the keywords that ``function`` takes, ``listed`` (by
    default the same) those named when none is close.

    Examples
    --------
    >>> print(unknown_keyword_error("f", "is_casual", ["is_causal", "scale"]))
    f() got an unexpected keyword argument 'is_casual'; did you mean 'is_causal'?
    >>> print(unknown_keyword_error("f", "softmax_scale", ["scale"]))
    f() got an unexpected keyword argument 'softmax_scale': FlashAttention's
    softmax_scale is scale in sdpa_ref. sdpa_ref.testing.flash_options
    translates FlashAttention's options: f(q, k, v,
    **flash_options(softmax_scale=...))
    """
    message = f"{function}() got an unexpected keyword argument {keyword!r}"
    if keyword in FOREIGN_NAMES:
        library, ours = FOREIGN_NAMES[keyword]
        message += f": {library}'s {keyword} is {ours} in sdpa_ref"
        if keyword in FLASH_OPTIONS:
            message += (
                ". sdpa_ref.testing.flash_options translates FlashAttention's "
                f"options: {function}(q, k, v, **flash_options({keyword}=...))"
            )
        return TypeError(message)
    close = difflib.get_close_matches(keyword, known, n=1, cutoff=0.6)
    if close:
        return TypeError(f"{message}; did you mean {close[0]!r}?")
    listed = known if listed is None else listed
    return TypeError(f"{message}; the options are {', '.join(listed)}")


F = TypeVar("F", bound=Callable[..., Any])


def check_keywords(**defaults: object) -> Callable[[F], F]:
    """Decorate a public function: its options listed, an unknown keyword named.

    A public function takes its own parameters and then ``**options:
    Unpack[OptionKeywords]`` (or :class:`CacheOptionKeywords`). Its signature,
    as :func:`inspect.signature`, ``help()`` and the API pages show it, lists
    each of those options as a keyword-only parameter with :class:`Options`'
    default, after the function's own parameters and before its ``return_*``
    flags. ``defaults`` changes an option's default for this function, and
    the call passes it on when the caller does not. A keyword that the
    function does not take raises a TypeError that names the option meant:
    the closest spelling, or for FlashAttention's and PyTorch's names the
    sdpa_ref one. The wrapper hides itself from pytest's tracebacks.

    Examples
    --------
    >>> @check_keywords(empty_rows="zero")
    ... def f(q, *, return_lse=False, **options: Unpack[OptionKeywords]):
    ...     return options
    >>> print(inspect.signature(f))  # doctest: +ELLIPSIS
    (q, *, mask: 'ArrayInput | None' = None, ..., empty_rows: 'EmptyRows' = 'zero', \
..., layout: 'Layout' = 'bhsd', return_lse=False)
    >>> f(1, scale=0.5)
    {'empty_rows': 'zero', 'scale': 0.5}
    >>> f(1, scael=2)
    Traceback (most recent call last):
      ...
    TypeError: f() got an unexpected keyword argument 'scael'; did you mean 'scale'?
    """

    def decorate(func: F) -> F:
        signature = _with_options(inspect.signature(func), defaults, func.__name__)
        return with_signature(signature, defaults)(func)

    return decorate


def with_signature(
    signature: inspect.Signature, defaults: Mapping[str, object] | None = None
) -> Callable[[F], F]:
    """Decorate a function to take the keywords of ``signature``, and show it.

    What :func:`check_keywords` does once it has spelt out the options: an
    unknown keyword names the one meant, ``defaults`` fill the keywords the
    caller leaves out, and :func:`inspect.signature` gives ``signature``.
    """
    parameters = signature.parameters
    known = [
        name
        for name, p in parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    accepted = frozenset(known)
    listed = [n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY]
    given = dict(defaults or {})

    def decorate(func: F) -> F:
        name = func.__name__

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            for keyword in kwargs:
                if keyword not in accepted:
                    raise unknown_keyword_error(name, keyword, known, listed)
            return func(*args, **(given | kwargs))

        checked.__signature__ = signature  # type: ignore[attr-defined]
        return cast(F, checked)

    return decorate


#: The keyword sets that a public function's ``**options`` may be annotated with.
KEYWORD_SETS: dict[str, type] = {
    t.__name__: t for t in (OptionKeywords, CacheOptionKeywords)
}


def _with_options(
    signature: inspect.Signature, defaults: Mapping[str, object], function: str
) -> inspect.Signature:
    """``signature`` with its ``**options`` spelt out as keyword-only options."""
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    spread = [p for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD]
    if not spread:
        if defaults:
            raise TypeError(f"{function}() has no **options to give defaults to")
        return signature
    annotation = spread[0].annotation
    if isinstance(annotation, str):  # from __future__ import annotations
        name = annotation.strip("'\"").removeprefix("Unpack[").removesuffix("]")
        if name not in KEYWORD_SETS:
            raise TypeError(
                f"{function}(**{spread[0].name}: {annotation}): the options must be "
                f"one of {sorted(KEYWORD_SETS)}"
            )
        annotation = KEYWORD_SETS[name]
    else:
        (annotation,) = get_args(annotation)
    taken = [f for f in fields(Options) if f.name in annotation.__annotations__]
    unknown = set(defaults) - {f.name for f in taken}
    if unknown:
        raise TypeError(f"{function}() takes no option {sorted(unknown)}")
    options = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=defaults.get(f.name, f.default),
            annotation=f.type,
        )
        for f in taken
    ]
    flags = [p for p in own if p.name.startswith("return_")]
    rest = [p for p in own if not p.name.startswith("return_")]
    return signature.replace(parameters=[*rest, *options, *flags])
