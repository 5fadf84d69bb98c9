"""FlexAttention's mask and score mods, the one way every option is written.

PyTorch's FlexAttention expresses a variant of attention as a
``mask_mod(b, h, q_idx, kv_idx) -> bool``, True where query ``q_idx`` may
attend to key ``kv_idx`` in batch entry ``b`` and query head ``h``, or as a
``score_mod(score, b, h, q_idx, kv_idx) -> score`` that changes one scaled
logit. FlexAttention writes them for scalars and vectorises them with
``torch.vmap``; sdpa_ref calls them once per block of keys on broadcast
NumPy index grids, which gives the same values for any mod written with
operators and NumPy's ufuncs:

- ``b`` has shape ``(B, 1, 1, 1)`` (batch axis -4), ``h`` ``(1, H, 1, 1)``
  (the *query* head, axis -3), ``q_idx`` ``(1, 1, n_q, 1)`` and ``kv_idx``
  ``(1, 1, 1, n_block)``, integer arrays, with as many axes as the scores
  (an input without a batch or head axis gets index 0 for it);
- ``score`` is a float64 array of the block's scaled logits, shape
  ``(..., n_q, n_block)``.

A mod may index arrays with them, as FlexAttention's do
(``document_id[q_idx]``). It must use NumPy, not torch (``np.tanh(score)``,
not ``torch.tanh(score)``); mods written with operators alone run in both.

Every built-in option of :func:`sdpa_ref.attention` is one of the ready mods
below, so the dense and tiled passes, forward and backward, share each rule.
The semantics of the options follow FlashAttention's ``attention_ref``
(``flash_attn/utils/testing.py`` at flash-attention commit 0251105a), line
numbers cited at each function; the ready mods' names and spellings follow
FlexAttention's documentation and its examples (attention-gym).

The backward needs each score mod's derivative. A mod may supply it (a
``derivative`` method, or :func:`with_derivative`); otherwise sdpa_ref takes
it by complex-step differentiation, ``f'(x) = Im f(x + ih) / h`` with
``h = 1e-30``, which is exact to float64 rounding for a mod that is analytic
in ``score`` (:func:`score_mod_derivative`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

import numpy as np
import numpy.typing as npt

from ._arrays import BoolArray, FloatArray

__all__ = [
    "COMPLEX_STEP",
    "Grids",
    "MaskMod",
    "ScoreMod",
    "alibi",
    "align_offset",
    "and_masks",
    "causal",
    "check_mask_result",
    "check_score_result",
    "chunked",
    "create_mask",
    "document",
    "index_grids",
    "key_padding",
    "or_masks",
    "prefix_lm",
    "query_padding",
    "relative_position_bias",
    "score_mod_derivative",
    "sliding_window",
    "softcap",
    "with_derivative",
]

#: A mask mod, from ``(b, h, q_idx, kv_idx)`` index grids to "may attend".
MaskMod: TypeAlias = Callable[[Any, Any, Any, Any], Any]

#: A score mod, from ``(score, b, h, q_idx, kv_idx)`` to the changed scores.
ScoreMod: TypeAlias = Callable[[Any, Any, Any, Any, Any], Any]

#: An offset of the diagonal, one int or one per batch entry, shape (B,).
Offset: TypeAlias = int | npt.NDArray[np.int64]

#: The step of complex-step differentiation (Squire and Trapp, 1998). No
#: difference of two values is taken, so nothing cancels, and the error of
#: ``Im f(x + ih) / h`` is of order ``h²``: far below float64's rounding.
COMPLEX_STEP = 1e-30


class Grids(NamedTuple):
    """The index grids a mod is called with, broadcastable to one block."""

    b: npt.NDArray[np.int64]
    h: npt.NDArray[np.int64]
    q_idx: npt.NDArray[np.int64]
    kv_idx: npt.NDArray[np.int64]


def index_grids(
    batch: tuple[int, ...],
    q_idx: npt.NDArray[Any],
    kv_idx: npt.NDArray[Any],
) -> Grids:
    """Index grids for scores of shape ``(*batch, len(q_idx), len(kv_idx))``.

    ``b`` runs along batch axis -4 and ``h`` along axis -3, each 0 where the
    scores have no such axis; axes further left broadcast.

    Examples
    --------
    >>> g = index_grids((2, 3), np.arange(4), np.arange(5, 7))
    >>> [a.shape for a in g]
    [(2, 1, 1, 1), (1, 3, 1, 1), (1, 1, 4, 1), (1, 1, 1, 2)]
    >>> g.kv_idx.ravel().tolist()
    [5, 6]
    """
    ndim = len(batch) + 2
    ones = (1,) * ndim

    def along(axis: int, values: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        shape = list(ones)
        shape[axis] = len(values)
        return np.asarray(values, dtype=np.int64).reshape(shape)

    zero = np.zeros(ones, dtype=np.int64)
    b = along(-4, np.arange(batch[-2])) if len(batch) >= 2 else zero
    h = along(-3, np.arange(batch[-1])) if len(batch) >= 1 else zero
    return Grids(b, h, along(-2, q_idx), along(-1, kv_idx))


def _block_shape(score_shape: tuple[int, ...], grids: Grids) -> tuple[int, ...]:
    return np.broadcast_shapes(score_shape, *(g.shape for g in grids))


def check_mask_result(result: object, shape: tuple[int, ...], name: str) -> BoolArray:
    """A mask mod's result as a boolean array broadcastable to ``shape``, or raise.

    Examples
    --------
    >>> check_mask_result(np.array([[1, 0]]), (1, 2), "mask_mod")
    Traceback (most recent call last):
      ...
    TypeError: mask_mod must return booleans (True = may attend), got dtype int64 ...
    """
    arr = np.asarray(result)
    if arr.dtype != np.bool_:
        raise TypeError(
            f"{name} must return booleans (True = may attend), got dtype "
            f"{arr.dtype} (shape {arr.shape}); compare indices (q_idx >= kv_idx) "
            f"rather than computing with them"
        )
    _check_broadcast(arr, shape, name)
    return arr


def check_score_result(
    result: object, shape: tuple[int, ...], name: str, *, complex_ok: bool = False
) -> npt.NDArray[Any]:
    """A score mod's result as a float64 array of exactly ``shape``, or raise.

    One score in, one score out: a result of another shape, even one that
    broadcasts, would not be elementwise.
    """
    arr = np.asarray(result)
    kinds = "fc" if complex_ok else "f"
    if arr.dtype.kind not in kinds or arr.dtype.itemsize < 8:
        raise TypeError(
            f"{name} must return float64 scores, got dtype {arr.dtype} (shape "
            f"{arr.shape}); a float32 parameter or an integer expression "
            f"would make the float64 oracle lose precision"
        )
    if arr.shape != shape:
        raise ValueError(
            f"{name} returned shape {arr.shape} for scores of shape {shape}; it "
            f"must return one score for each score it is given, elementwise (a "
            f"bias that ignores the score still adds to it: score + bias)"
        )
    return arr


def _check_broadcast(arr: npt.NDArray[Any], shape: tuple[int, ...], name: str) -> None:
    try:
        fits = np.broadcast_shapes(arr.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} returned shape {arr.shape}, which does not broadcast to the "
            f"block of scores it was called for, {shape}; sdpa_ref calls it with "
            f"index grids b (B, 1, 1, 1), h (1, H, 1, 1), q_idx (1, 1, n_q, 1) "
            f"and kv_idx (1, 1, 1, n_block), and a mod must work elementwise "
            f"on them"
        )


# -- combining mask mods: torch.nn.attention.flex_attention.and_masks/or_masks --


def and_masks(*mask_mods: MaskMod) -> MaskMod:
    """The intersection of mask mods: a pair may attend if every mod allows it.

    FlexAttention's ``and_masks``.

    Examples
    --------
    >>> both = and_masks(causal(), lambda b, h, q_idx, kv_idx: kv_idx > 0)
    >>> create_mask(both, None, None, 3, 3)[0, 0].astype(int)
    array([[0, 0, 0],
           [0, 1, 0],
           [0, 1, 1]])
    """
    return _combined(mask_mods, "and_masks", np.True_, operator.and_)


def or_masks(*mask_mods: MaskMod) -> MaskMod:
    """The union of mask mods: a pair may attend if any mod allows it.

    FlexAttention's ``or_masks``.

    Examples
    --------
    >>> either = or_masks(causal(), lambda b, h, q_idx, kv_idx: kv_idx < 2)
    >>> create_mask(either, None, None, 3, 3)[0, 0].astype(int)
    array([[1, 1, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    return _combined(mask_mods, "or_masks", np.False_, operator.or_)


def _combined(
    mask_mods: tuple[MaskMod, ...],
    name: str,
    start: np.bool_,
    join: Callable[[Any, Any], Any],
) -> MaskMod:
    """``start`` joined with each mod's mask in turn; named as ``name``'s mod."""
    for i, mod in enumerate(mask_mods):
        if not callable(mod):
            raise TypeError(f"{name} takes mask mods; argument {i} is {mod!r}")

    def combined(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        result: Any = start
        for mod in mask_mods:
            result = join(result, mod(b, h, q_idx, kv_idx))
        return result

    # Named as PyTorch names them: and_masks returns and_mask, which error
    # messages quote.
    combined.__name__ = name.removesuffix("s")
    combined.__qualname__ = f"{name}.<locals>.{combined.__name__}"
    return combined


def create_mask(
    mask_mod: MaskMod, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int
) -> BoolArray:
    """The boolean mask ``(B, H, Q_LEN, KV_LEN)`` that ``mask_mod`` describes.

    FlexAttention's ``create_mask``, with None for B or H meaning 1. Useful
    to look at a mask; :func:`sdpa_ref.attention` takes the mask mod itself.

    Examples
    --------
    >>> create_mask(causal(offset=1), None, None, 2, 3)[0, 0]
    array([[ True,  True, False],
           [ True,  True,  True]])
    """
    shape = (1 if B is None else B, 1 if H is None else H, Q_LEN, KV_LEN)
    grids = index_grids(shape[:2], np.arange(Q_LEN), np.arange(KV_LEN))
    result = check_mask_result(mask_mod(*grids), shape, "mask_mod")
    return np.broadcast_to(result, shape).copy()


# -- the mask mods ---------------------------------------------------------------


def align_offset(
    n_q: int,
    n_k: int,
    align: str,
    *,
    q_lengths: npt.NDArray[Any] | None = None,
    k_lengths: npt.NDArray[Any] | None = None,
    key_leftpad: npt.NDArray[Any] | None = None,
) -> Offset:
    """How far query ``i``'s diagonal sits from key ``i``: ``i' = i + offset``.

    ``"top_left"`` (PyTorch's ``is_causal``) gives 0. ``"bottom_right"``
    (FlashAttention) lines the last query up with the last key, ``offset =
    n_k - n_q``, from each batch entry's true lengths when they are given:
    ``row_idx + sk - sq`` in ``construct_local_mask`` (testing.py:175-186),
    where ``sk`` and ``sq`` are the padding masks' sums. With left padding
    the keys run from ``key_leftpad[b]`` to ``k_lengths[b]``, so ``sk`` is
    their difference (testing.py:171-174).

    Returns an int, or an int array of shape ``(B,)`` with lengths.

    Examples
    --------
    >>> align_offset(2, 5, "bottom_right")
    3
    >>> align_offset(2, 5, "bottom_right", k_lengths=np.array([5, 4]))
    array([3, 2])
    """
    if align == "top_left":
        return 0
    if q_lengths is None and k_lengths is None and key_leftpad is None:
        return n_k - n_q
    sk = np.asarray(n_k if k_lengths is None else k_lengths)
    if key_leftpad is not None:
        sk = sk - key_leftpad
    sq = np.asarray(n_q if q_lengths is None else q_lengths)
    offsets: npt.NDArray[np.int64] = np.atleast_1d(sk - sq).astype(np.int64)
    return offsets


def _per_batch(value: Offset, b: npt.NDArray[Any]) -> Any:
    """An int, or a (B,) array read at batch entry ``b``."""
    if isinstance(value, np.ndarray):
        return value[b]
    return value


def sliding_window(
    left: int | None, right: int | None = 0, *, offset: Offset = 0, sink_tokens: int = 0
) -> MaskMod:
    """Local attention: query ``i`` sees keys ``i' - left ≤ j ≤ i' + right``.

    ``i' = i + offset``, ``offset`` being an int or one per batch entry.
    ``None`` leaves a side unbounded; ``sliding_window(None, 0)`` is causal
    attention. The first ``sink_tokens`` keys are exempt from the left bound
    (StreamingLLM's attention sinks) but not from the right one.
    FlexAttention's documented sliding window, ``q_idx - kv_idx <= W`` and
    causal (attention-gym's ``generate_sliding_window``), is
    ``sliding_window(W)``.

    FlashAttention's ``construct_local_mask`` (testing.py:185-192) *forbids*
    ``col > row + sk - sq + right`` and, with a left bound, ``col < row + sk -
    sq - left and col >= sink_token_length``; this is its complement. Its
    ``min(..., sk)`` only clips at the key length, which the key padding
    enforces anyway.

    Examples
    --------
    >>> create_mask(sliding_window(1), None, None, 4, 4)[0, 0].astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    >>> create_mask(sliding_window(0, 0, sink_tokens=1), None, None, 4, 4)[0, 0, 3]
    array([ True, False, False,  True])
    """

    def sliding_window_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        aligned = q_idx + _per_batch(offset, b)
        allowed: Any = np.True_
        if right is not None:
            allowed = allowed & (kv_idx <= aligned + right)
        if left is not None:
            allowed = allowed & ((kv_idx >= aligned - left) | (kv_idx < sink_tokens))
        return allowed

    return sliding_window_mask


def causal(offset: Offset = 0) -> MaskMod:
    """Causal attention: query ``i`` sees keys ``j ≤ i + offset``.

    ``offset=0`` is FlexAttention's ``causal_mask``, ``q_idx >= kv_idx``,
    aligned to the top left as PyTorch's ``is_causal``. ``offset = n_k -
    n_q`` aligns it to the bottom right, as FlashAttention does (see
    :func:`align_offset`); an array gives one offset per batch entry. It is
    :func:`sliding_window` with no left bound.

    Examples
    --------
    >>> create_mask(causal(), None, None, 2, 3)[0, 0].astype(int)
    array([[1, 0, 0],
           [1, 1, 0]])
    >>> create_mask(causal(offset=1), None, None, 2, 3)[0, 0].astype(int)
    array([[1, 1, 0],
           [1, 1, 1]])
    """
    return sliding_window(None, 0, offset=offset)


def chunked(size: int, offset: Offset = 0) -> MaskMod:
    """Chunked attention (Llama 4; FlashAttention's ``attention_chunk``).

    Query ``i`` sees only the keys of its own chunk of ``size`` keys, after
    alignment: the chunk starts at ``i' - (i' mod size)``, with the floor
    remainder so negative ``i'`` land in negative chunks, as
    ``construct_chunk_mask`` computes ``col_limit_left_chunk``
    (testing.py:221-225).

    Examples
    --------
    >>> create_mask(chunked(2), None, None, 4, 4)[0, 0].astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [0, 0, 1, 1],
           [0, 0, 1, 1]])
    """

    def chunk_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        aligned = q_idx + _per_batch(offset, b)
        start = aligned - np.mod(aligned, size)
        return (kv_idx >= start) & (kv_idx < start + size)

    return chunk_mask


def prefix_lm(prefix_length: int | npt.NDArray[Any]) -> MaskMod:
    """Prefix LM: every query sees the first ``prefix_length`` keys, the rest causally.

    attention-gym's ``generate_prefix_lm_mask``: ``or_masks(kv_idx <
    prefix_length, causal_mask)``. ``prefix_length`` may be one per batch
    entry, shape (B,).

    Examples
    --------
    >>> create_mask(prefix_lm(2), None, None, 4, 4)[0, 0].astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 1, 0],
           [1, 1, 1, 1]])
    """
    prefix: Offset = (
        np.asarray(prefix_length, dtype=np.int64)
        if np.ndim(prefix_length)
        else int(prefix_length)
    )

    def prefix_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return kv_idx < _per_batch(prefix, b)

    return or_masks(prefix_mask, causal())


def document(document_ids: Any, mask_mod: MaskMod | None = None) -> MaskMod:
    """Document masking: queries see only keys of their own document.

    ``document_ids`` gives each token's document, shape (n,) for one packed
    sequence or (B, n); the same ids serve queries and keys, as in
    FlexAttention's documented ``document_causal`` mask. With ``mask_mod``
    (say :func:`causal`), it applies within each document, on positions
    counted from the document's start, as attention-gym's
    ``generate_doc_mask_mod`` does. A document is a run of equal ids, and
    an id may not come back after another: with ``[0, 0, 1, 0]`` a causal
    mask inside "document 0" would have to choose between the positions of
    the two runs, and one choice lets a query see a later key. Such ids
    raise a ``ValueError``; give each run its own id.

    Examples
    --------
    >>> ids = np.array([0, 0, 1, 1, 1])
    >>> create_mask(document(ids, causal()), None, None, 5, 5)[0, 0].astype(int)
    array([[1, 0, 0, 0, 0],
           [1, 1, 0, 0, 0],
           [0, 0, 1, 0, 0],
           [0, 0, 1, 1, 0],
           [0, 0, 1, 1, 1]])
    """
    ids = np.asarray(document_ids)
    if ids.ndim not in (1, 2) or ids.dtype.kind not in "iu":
        raise TypeError(
            f"document_ids must be integers of shape (n,) or (B, n), got dtype "
            f"{ids.dtype} (shape {ids.shape})"
        )
    # Each token's position within its document: runs of equal ids.
    positions = np.arange(ids.shape[-1])
    starts_here = np.ones(ids.shape, dtype=bool)
    starts_here[..., 1:] = ids[..., 1:] != ids[..., :-1]
    rows = ids.reshape(1 if ids.ndim == 1 else ids.shape[0], ids.shape[-1])
    row_starts = starts_here.reshape(rows.shape)
    for row in range(rows.shape[0]):
        row_ids = rows[row]
        firsts = row_ids[row_starts[row]]
        seen, counts = np.unique(firsts, return_counts=True)
        if np.any(counts > 1):
            again = seen[counts > 1][0]
            where = np.flatnonzero(row_starts[row] & (row_ids == again)).tolist()
            entry = f" in batch entry {row}" if ids.ndim == 2 else ""
            raise ValueError(
                f"document_ids{entry} give id {again} to separate runs of tokens, "
                f"starting at positions {where} (shape {ids.shape}); a document "
                f"must be one run of consecutive tokens: give each run its own id"
            )
    start = np.maximum.accumulate(np.where(starts_here, positions, 0), axis=-1)
    logical = positions - start

    def read(table: npt.NDArray[Any], b: Any, idx: Any) -> Any:
        return table[idx] if table.ndim == 1 else table[b, idx]

    def document_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        same = read(ids, b, q_idx) == read(ids, b, kv_idx)
        if mask_mod is None:
            return same
        inner = mask_mod(b, h, read(logical, b, q_idx), read(logical, b, kv_idx))
        return same & inner

    return document_mask


def key_padding(k_lengths: npt.NDArray[Any]) -> MaskMod:
    """Keys at or past ``k_lengths[b]`` are never attended (varlen batches).

    FlashAttention's ``key_padding_mask`` (testing.py:299-300), with the
    padding at the end of each sequence. Left padding shifts ``kv_idx`` so
    that the first real key is key 0; what lies before it is negative and
    never attended.

    Examples
    --------
    >>> create_mask(key_padding(np.array([1, 3])), 2, None, 1, 3)[:, 0, 0]
    array([[ True, False, False],
           [ True,  True,  True]])
    """
    lengths = np.asarray(k_lengths)

    def key_padding_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return (kv_idx >= 0) & (kv_idx < lengths[b])

    return key_padding_mask


def query_padding(q_lengths: npt.NDArray[Any]) -> MaskMod:
    """Queries at or past ``q_lengths[b]`` attend to nothing.

    Such a query is padding, not an empty row: its output and weights are 0
    whatever ``empty_rows`` says (``query_padding_mask``, testing.py:340-341
    and 358-359).

    Examples
    --------
    >>> create_mask(query_padding(np.array([1])), 1, None, 2, 2)[0, 0]
    array([[ True,  True],
           [False, False]])
    """
    lengths = np.asarray(q_lengths)

    def query_padding_mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return q_idx < lengths[b]

    return query_padding_mask


# -- score mods and their derivatives --------------------------------------------


@runtime_checkable
class Differentiable(Protocol):
    """A score mod that supplies ``d score_mod / d score`` itself."""

    def __call__(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        """The changed scores."""

    def derivative(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        """The derivative of the changed scores with respect to ``score``."""


class _WithDerivative:
    """A user's score mod, its derivative and its parameters' gradients."""

    def __init__(
        self,
        score_mod: ScoreMod,
        derivative: ScoreMod,
        parameter_gradients: Callable[..., Mapping[str, Any]] | None,
    ) -> None:
        self._mod = score_mod
        self._derivative = derivative
        self._parameter_gradients = parameter_gradients
        self.__name__ = getattr(score_mod, "__name__", type(score_mod).__name__)

    def __call__(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return self._mod(score, b, h, q_idx, kv_idx)

    def derivative(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return self._derivative(score, b, h, q_idx, kv_idx)

    def parameter_gradients(  # noqa: PLR0917 (a mod's arguments, and grad)
        self,
        grad: FloatArray,
        score: FloatArray,
        b: Any,
        h: Any,
        q_idx: Any,
        kv_idx: Any,
    ) -> Mapping[str, Any]:
        if self._parameter_gradients is None:
            return {}
        return self._parameter_gradients(grad, score, b, h, q_idx, kv_idx)

    def __repr__(self) -> str:
        return f"with_derivative({self.__name__})"


def with_derivative(
    score_mod: ScoreMod,
    derivative: ScoreMod,
    parameter_gradients: Callable[..., Mapping[str, Any]] | None = None,
) -> ScoreMod:
    """``score_mod`` with its derivative supplied, for a mod that is not analytic.

    ``derivative(score, b, h, q_idx, kv_idx)`` returns ``d score_mod / d
    score`` elementwise (as FlashAttention's CuTe interface takes a
    ``score_mod_bwd``). The backward then uses it instead of complex-step
    differentiation. ``parameter_gradients(grad, score, b, h, q_idx,
    kv_idx)``, optional, returns a dict of the gradients of the loss with
    respect to the mod's own parameters, given ``grad``, the loss's gradient
    with respect to the mod's output on one block; the backward adds them
    up over the blocks into ``Gradients.dscore_mod``.

    Examples
    --------
    A mod with ``np.abs``, which returns the modulus of a complex number, so
    that complex steps see a slope of 1 everywhere and the backward refuses
    them:

    >>> def damped(score, b, h, q_idx, kv_idx):
    ...     return score - 0.1 * np.abs(score)
    >>> def damped_slope(score, b, h, q_idx, kv_idx):
    ...     return 1.0 - 0.1 * np.sign(score)
    >>> mod = with_derivative(damped, damped_slope)
    >>> mod.derivative(np.array([-2.0, 3.0]), 0, 0, 0, 0)
    array([1.1, 0.9])
    """
    if not callable(score_mod) or not callable(derivative):
        raise TypeError(
            f"with_derivative takes a score_mod and its derivative, both callables "
            f"(score, b, h, q_idx, kv_idx); got {score_mod!r} and {derivative!r}"
        )
    return _WithDerivative(score_mod, derivative, parameter_gradients)


class _Softcap:
    """``cap · tanh(score / cap)``, with its exact derivative."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.__name__ = f"softcap_{cap:g}"

    def __call__(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return self.cap * np.tanh(score / self.cap)

    def derivative(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return 1.0 - np.square(np.tanh(score / self.cap))

    def __repr__(self) -> str:
        return f"softcap({self.cap!r})"


def softcap(cap: float) -> ScoreMod:
    """Gemma 2's logit soft-capping: ``score → cap · tanh(score / cap)``.

    attention-gym's ``generate_tanh_softcap``; the ``softcap`` option of
    :func:`sdpa_ref.attention` is this mod. Applied after the scale and
    before any mask or float bias, as ``attention_ref`` does (testing.py:
    297-298, before the padding mask at 299 and ``attn_bias`` at 326-327).
    Its derivative ``1 - tanh²(score / cap)`` is supplied.

    Examples
    --------
    >>> softcap(10.0)(np.array([0.0, 100.0]), 0, 0, 0, 0).round(4)
    array([ 0., 10.])
    >>> softcap(10.0).derivative(np.array([0.0]), 0, 0, 0, 0)
    array([1.])
    """
    cap = float(cap)
    if not np.isfinite(cap) or cap <= 0:
        raise ValueError(f"softcap's cap must be positive and finite, got {cap!r}")
    return _Softcap(cap)


class _LearnedBias:
    """A score mod that adds to each score a multiple of one entry of a learned array.

    The array is the attribute named by ``parameter``, which also names its
    gradient in ``dscore_mod``. A subclass's ``_scatter`` says, for one
    block, which entry each score reads (a flat index into the array,
    broadcastable to the block) and how much ``grad`` there moves that
    entry. The mod's derivative in ``score`` is 1.
    """

    __name__: str
    parameter: str

    def _learned(self) -> FloatArray:
        learned: FloatArray = getattr(self, self.parameter)
        return learned

    def _scatter(
        self, grad: FloatArray, b: Any, h: Any, q_idx: Any, kv_idx: Any
    ) -> tuple[Any, FloatArray]:
        raise NotImplementedError

    def derivative(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return np.ones((1,) * np.ndim(score))

    def parameter_gradients(
        self, grad: FloatArray, score: FloatArray, *position: Any
    ) -> dict[str, FloatArray]:
        # ``position`` is a mod's (b, h, q_idx, kv_idx). d/d entry = Σ grad ·
        # (what the entry is multiplied by) over the scores that read it.
        index, weighted = self._scatter(grad, *position)
        learned = self._learned()
        total = np.bincount(
            np.broadcast_to(index, grad.shape).ravel(),
            weights=weighted.ravel(),
            minlength=learned.size,
        )
        gradient: FloatArray = total.reshape(learned.shape).astype(np.float64)
        return {self.parameter: gradient}

    def __repr__(self) -> str:
        return f"{self.__name__}(<{self._learned().shape} {self.parameter}>)"


class _Alibi(_LearnedBias):
    """``score + slopes[h] · (kv_idx - i')`` or ``- slopes[h] · |kv_idx - i'|``."""

    parameter = "slopes"

    def __init__(self, slopes: FloatArray, offset: Offset, absolute: bool) -> None:
        self.slopes = slopes
        self.offset = offset
        self.absolute = absolute
        self.__name__ = "alibi"

    def _distance(self, b: Any, q_idx: Any, kv_idx: Any) -> Any:
        distance = kv_idx - (q_idx + _per_batch(self.offset, b))
        return -np.abs(distance) if self.absolute else distance

    def _slope(self, b: Any, h: Any) -> Any:
        return self.slopes[h] if self.slopes.ndim == 1 else self.slopes[b, h]

    def __call__(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return score + self._slope(b, h) * self._distance(b, q_idx, kv_idx)

    def _scatter(
        self, grad: FloatArray, b: Any, h: Any, q_idx: Any, kv_idx: Any
    ) -> tuple[Any, FloatArray]:
        # slope[(b,) h] scales the distance.
        index = h if self.slopes.ndim == 1 else b * self.slopes.shape[1] + h
        weighted: FloatArray = grad * self._distance(b, q_idx, kv_idx)
        return index, weighted


def alibi(slopes: Any, *, offset: Offset = 0, absolute: bool = False) -> ScoreMod:
    """ALiBi: a bias linear in the distance between query and key.

    ``score + slopes[h] · (kv_idx - q_idx)``, attention-gym's ``alibi_mod``
    and FlexAttention's notebook (with slopes ``2^(-8(h+1)/H)``): a penalty
    ``slope · distance`` for the keys behind the query, as in Press, Smith
    and Lewis (2022). ``absolute=True`` gives FlashAttention's ``alibi_slopes``,
    ``-slopes[h] · |i + offset - kv_idx|``, symmetric around the diagonal,
    with ``offset = n_k - n_q`` for its bottom-right alignment.
    ``slopes`` has shape (H,) or (B, H). The backward returns the exact
    gradient with respect to the slopes, as ``dscore_mod["slopes"]``.

    Examples
    --------
    >>> q_idx, kv_idx = np.arange(3)[:, None], np.arange(3)[None, :]
    >>> alibi([0.5])(np.zeros((3, 3)), 0, 0, q_idx, kv_idx)
    array([[ 0. ,  0.5,  1. ],
           [-0.5,  0. ,  0.5],
           [-1. , -0.5,  0. ]])
    """
    arr = np.asarray(slopes, dtype=np.float64)
    if arr.ndim not in (1, 2) or not np.isfinite(arr).all():
        raise ValueError(
            f"alibi's slopes must be finite, shape (H,) or (B, H), got shape "
            f"{arr.shape}"
        )
    return _Alibi(arr, offset, bool(absolute))


class _RelativePositionBias(_LearnedBias):
    """``score + table[h, clip(kv_idx - q_idx, -R, R) + R]``."""

    parameter = "table"

    def __init__(self, table: FloatArray) -> None:
        self.table = table
        self.reach = (table.shape[-1] - 1) // 2
        self.__name__ = "relative_position_bias"

    def _column(self, q_idx: Any, kv_idx: Any) -> Any:
        return np.clip(kv_idx - q_idx, -self.reach, self.reach) + self.reach

    def __call__(self, score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        column = self._column(q_idx, kv_idx)
        bias = self.table[column] if self.table.ndim == 1 else self.table[h, column]
        return score + bias

    def _scatter(
        self, grad: FloatArray, b: Any, h: Any, q_idx: Any, kv_idx: Any
    ) -> tuple[Any, FloatArray]:
        # table[(h,) column] is added as it is.
        column = self._column(q_idx, kv_idx)
        width = self.table.shape[-1]
        return (column if self.table.ndim == 1 else h * width + column), grad


def relative_position_bias(table: Any) -> ScoreMod:
    """A learned bias for each relative position ``kv_idx - q_idx``, per head.

    ``table`` has shape (2R + 1,) or (H, 2R + 1); column ``R + r`` holds the
    bias of relative position ``r``, and pairs further than ``R`` apart use
    the last column on their side. A score mod that reads a learned table
    is FlexAttention's way to a trainable bias: its backward returns the
    table's gradient. Here the backward returns it exactly, as
    ``dscore_mod["table"]``.

    Examples
    --------
    >>> mod = relative_position_bias([-1.0, 0.0, 1.0])  # R = 1
    >>> mod(np.zeros((1, 4)), 0, 0, np.array([[1]]), np.arange(4)[None, :])
    array([[-1.,  0.,  1.,  1.]])
    """
    arr = np.asarray(table, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[-1] % 2 != 1 or not np.isfinite(arr).all():
        raise ValueError(
            f"relative_position_bias's table must be finite, of shape (2R + 1,) or "
            f"(H, 2R + 1) with an odd last axis, got shape {arr.shape}"
        )
    return _RelativePositionBias(arr)


def score_mod_derivative(
    mod: ScoreMod,
    score: FloatArray,
    grids: Grids,
    name: str,
    *,
    where: BoolArray | None = None,
) -> FloatArray:
    """``d mod / d score`` on one block: the mod's own, or by complex steps.

    Complex-step
    differentiation evaluates the mod at ``score + 1e-30 i`` and reads the
    derivative from the imaginary part; there is no subtraction, so nothing
    cancels, and the result is exact to float64 rounding for a mod that is
    analytic in ``score``. It is refused, with a ``TypeError`` that says how
    to supply the derivative, when the mod cannot take complex scores, drops
    their imaginary part, changes their real part, or gives a derivative
    that central differences contradict (as ``np.abs(score)`` would).
    ``where``, if given, marks the scores whose derivative is used (allowed,
    with a nonzero gradient); only there may central differences refuse it,
    so the zeros that pad a packed batch or fill a masked key never do.

    Examples
    --------
    >>> g = index_grids((), np.arange(1), np.arange(2))
    >>> s = np.array([[0.0, 2.0]])
    >>> mod = lambda score, b, h, q_idx, kv_idx: np.exp(score)
    >>> score_mod_derivative(mod, s, g, "score_mod") - np.exp(s)
    array([[0., 0.]])
    """
    shape = score.shape
    if isinstance(mod, Differentiable):
        return _supplied_derivative(mod, score, grids, name)
    try:
        with np.errstate(all="ignore"):
            stepped = mod(score + 1j * COMPLEX_STEP, *grids)
    except Exception as exc:  # any failure means: supply the derivative
        raise _refusal(name, f"it raised {type(exc).__name__}: {exc}") from exc
    stepped = np.asarray(stepped)
    if stepped.dtype.kind != "c":
        raise _refusal(
            name,
            f"it returned {stepped.dtype} for complex scores, so it dropped their "
            f"imaginary part (a cast, .real, float(), or a real-only function)",
        )
    stepped = check_score_result(stepped, shape, name, complex_ok=True)
    derivative = stepped.imag / COMPLEX_STEP
    with np.errstate(all="ignore"):
        value = check_score_result(mod(score, *grids), shape, name)
    finite = np.isfinite(value) & np.isfinite(stepped.real)
    if not np.allclose(stepped.real[finite], value[finite], rtol=1e-12, atol=1e-300):
        raise _refusal(name, "its real part at complex scores differs from its value")
    derivative = np.where(finite, derivative, 0.0)
    _check_against_differences(mod, score, grids, derivative, name, where=where)
    result: FloatArray = derivative
    return result


def _supplied_derivative(
    mod: Differentiable, score: FloatArray, grids: Grids, name: str
) -> FloatArray:
    arr = np.asarray(mod.derivative(score, *grids))
    if arr.dtype.kind not in "fiu":
        raise TypeError(
            f"{name}'s derivative must return real numbers, got dtype {arr.dtype} "
            f"(shape {arr.shape})"
        )
    _check_broadcast(arr, score.shape, f"{name}'s derivative")
    derivative: FloatArray = np.broadcast_to(arr.astype(np.float64), score.shape)
    return derivative


def _check_against_differences(
    mod: ScoreMod,
    score: FloatArray,
    grids: Grids,
    derivative: FloatArray,
    name: str,
    *,
    where: BoolArray | None = None,
) -> None:
    """Refuse a complex-step derivative that central differences contradict.

    Non-analytic NumPy functions take complex input without complaint and
    give a wrong derivative (``np.abs`` gives 0); a central difference with
    step 1e-6 · max(1, |s|) is accurate to about 1e-7 here, plus the
    rounding of the mod's values over the step, and a wrong derivative is off
    by order 1.
    """
    step = 1e-6 * np.maximum(1.0, np.abs(np.where(np.isfinite(score), score, 0.0)))
    with np.errstate(all="ignore"):
        up = np.asarray(mod(score + step, *grids), dtype=np.float64)
        down = np.asarray(mod(score - step, *grids), dtype=np.float64)
        central = (up - down) / (2 * step)
        # The difference of two rounded values, divided by the step: a mod
        # whose values are large next to its slope (score + 1e8) leaves the
        # central difference this much rounding error, which no derivative
        # should be refused for.
        noise = (
            4 * np.finfo(np.float64).eps * np.maximum(np.abs(up), np.abs(down)) / step
        )
    usable = np.isfinite(central) & np.isfinite(score)
    if where is not None:
        usable &= np.broadcast_to(where, usable.shape)
    error = np.abs(central - derivative)[usable]
    allowed = (1e-4 * (1.0 + np.abs(derivative)) + noise)[usable]
    if np.any(error > allowed):
        worst = int(np.argmax(error - allowed))
        raise _refusal(
            name,
            f"its complex-step derivative {derivative[usable][worst]:.6g} "
            f"disagrees with a central difference {central[usable][worst]:.6g}: "
            f"it is not analytic in score (np.abs, np.maximum, a comparison)",
        )


def _refusal(name: str, reason: str) -> TypeError:
    return TypeError(
        f"the backward cannot differentiate {name} by complex steps: {reason}. "
        f"Supply its derivative: {name}=sdpa_ref.mods.with_derivative(mod, "
        f"derivative), where derivative(score, b, h, q_idx, kv_idx) returns "
        f"d mod / d score elementwise"
    )
