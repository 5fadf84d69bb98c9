"""Softmax and scaled dot-product attention, dense and tiled, in float64."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Unpack, overload

import numpy as np
import numpy.typing as npt

from ._arrays import (
    ArrayInput,
    BoolArray,
    FloatArray,
    IntArray,
    as_array,
    from_layout,
    to_layout,
)
from ._checks import (
    alignment,
    first_index,
    leftpad_array,
    lengths_array,
    nonnegative_int,
    positive_int,
    real_array,
    require_finite,
    sink_array,
)
from ._options import Align, EmptyRows, Layout, OptionKeywords, Options, check_keywords
from .mods import (
    Grids,
    MaskMod,
    ScoreMod,
    align_offset,
    causal,
    check_mask_result,
    check_score_result,
    chunked,
    create_mask,
    index_grids,
    key_padding,
    query_padding,
    sliding_window,
)
from .mods import softcap as softcap_mod
from .varlen import Packing, pack, pack_lse, unpack, unpack_lse, unpack_rows

__all__ = [
    "Block",
    "Problem",
    "apply_score_mod",
    "attention",
    "causal_mask",
    "column_block",
    "dense_forward",
    "naive_softmax",
    "prepare",
    "row_block",
    "softmax",
    "tiled_attention",
    "tiled_forward",
]


def softmax(x: ArrayInput, axis: int = -1) -> npt.NDArray[np.floating[Any]]:
    """Normalise scores into weights along ``axis``, safely.

    Each row's maximum is subtracted before ``exp``. That shifts every score
    of the row by the same amount, which leaves the weights unchanged, and it
    keeps the largest exponent at ``exp(0) = 1`` so nothing overflows.

    Parameters
    ----------
    x : array_like
        Real scores (logits). ``-inf`` marks a forbidden entry. Floating
        inputs keep their precision; integers become float64.
    axis : int, optional
        The axis to normalise over, the key axis by default.

    Returns
    -------
    numpy.ndarray
        Nonnegative weights of the same shape that sum to 1 along ``axis``.

    Raises
    ------
    ValueError
        If ``x`` holds NaN or ``+inf``, is empty along ``axis``, or has a row
        with no finite entry (every entry ``-inf``).

    Examples
    --------
    The worked example's raw and scaled scores:

    >>> w_raw = softmax([4, 0, 2, -4])
    >>> w_scaled = softmax([2, 0, 1, -2])
    >>> print(f"{w_raw[0]:.3f} -> {w_scaled[0]:.3f}")
    0.867 -> 0.657

    A huge logit stays finite:

    >>> softmax([1000.0, 0.0])
    array([1., 0.])
    """
    x = real_array(x, "x", min_ndim=1)
    if x.shape[axis] == 0:
        raise ValueError(f"x has no entries along axis {axis} (shape {x.shape})")
    if np.isnan(x).any():
        raise ValueError(f"x contains NaN at index {first_index(np.isnan(x))}")
    if np.isposinf(x).any():
        raise ValueError(f"x contains +inf at index {first_index(np.isposinf(x))}")
    row_max = np.max(x, axis=axis, keepdims=True)
    if np.isneginf(row_max).any():
        row = first_index(np.isneginf(row_max))
        raise ValueError(
            f"x has a row with no finite entry along axis {axis} at index {row} "
            f"(shape {x.shape}); the softmax of an all -inf row is undefined"
        )
    weights: npt.NDArray[np.floating[Any]] = np.exp(x - row_max)
    weights /= weights.sum(axis=axis, keepdims=True)
    return weights


def naive_softmax(x: ArrayInput, axis: int = -1) -> npt.NDArray[np.floating[Any]]:
    """Softmax without the max-subtraction, to show why it is needed.

    This is the textbook ``exp(x) / sum(exp(x))``. It is exact in real
    arithmetic and breaks in floating point: once a logit passes the dtype's
    overflow threshold (about 88.72 in float32), ``exp`` gives ``inf`` and
    the row becomes NaN. It is kept for the precision pages; use
    :func:`sdpa_ref.softmax` for anything else.

    Examples
    --------
    >>> naive_softmax([2.0, 0.0, 1.0, -2.0]).round(3)
    array([0.657, 0.089, 0.242, 0.012])
    >>> naive_softmax(np.array([100.0, 0.0], dtype=np.float32))
    array([nan,  0.], dtype=float32)
    """
    x = real_array(x, "x", min_ndim=1)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        weights: npt.NDArray[np.floating[Any]] = e / e.sum(axis=axis, keepdims=True)
    return weights


def causal_mask(n_q: int, n_k: int, align: Align = "top_left") -> BoolArray:
    """Boolean causal mask of shape ``(n_q, n_k)``; True means "may attend".

    Parameters
    ----------
    n_q, n_k : int
        Numbers of queries and keys.
    align : {"top_left", "bottom_right"}
        ``"top_left"`` lets query ``i`` see keys ``j <= i``, as PyTorch's
        ``is_causal``. ``"bottom_right"`` lines the last query up with the
        last key, so query ``i`` sees keys ``j <= i + (n_k - n_q)``: the
        convention of FlashAttention 2.1 and later and of KV-cache decoding,
        where new queries come after the cached keys. The two agree when
        ``n_q == n_k``.

    Examples
    --------
    One new token decoding against three cached keys plus itself:

    >>> causal_mask(1, 4, align="bottom_right")
    array([[ True,  True,  True,  True]])
    >>> causal_mask(1, 4, align="top_left")
    array([[ True, False, False, False]])
    """
    n_q = nonnegative_int(n_q, "n_q")
    n_k = nonnegative_int(n_k, "n_k")
    offset = align_offset(n_q, n_k, alignment(align))
    mask: BoolArray = create_mask(causal(offset), None, None, n_q, n_k)[0, 0]
    return mask


class Block(NamedTuple):
    """One block of the scores: query rows ``rows``, key columns ``start:stop``.

    ``allowed`` is the masks' verdict on exactly these rows and columns (None
    for no mask) and ``grids`` the index grids the mods see there.
    """

    rows: slice
    start: int
    stop: int
    allowed: Any
    grids: Grids | None


def _active_rows(allowed: Any) -> slice | None:
    """The smallest range of query rows with an allowed key, all rows, or None.

    Not worth it above 3/4 of the rows: a range costs a copy of the rows.
    """
    arr = np.asarray(allowed)
    if arr.ndim < 2 or arr.shape[-2] == 1:
        return slice(None) if arr.any() else None
    seen = arr.any(axis=-1).reshape(-1, arr.shape[-2]).any(axis=0)
    hits = np.flatnonzero(seen)
    if hits.size == 0:
        return None
    lo, hi = int(hits[0]), int(hits[-1]) + 1
    if hi - lo > 0.75 * seen.size:
        return slice(None)
    return slice(lo, hi)


def row_block(arr: Any, rows: slice) -> Any:
    """Query rows ``rows`` of an array broadcastable to the scores."""
    if rows == slice(None) or arr is None:
        return arr
    if np.ndim(arr) < 2 or np.shape(arr)[-2] == 1:
        return arr
    return arr[..., rows, :]


@dataclass(frozen=True)
class Problem:
    """Validated, broadcast-ready inputs shared by every code path.

    Each option lives here once: the boolean ones as FlexAttention mask mods
    (see :mod:`sdpa_ref.mods`), the soft-cap as a score mod, the float mask
    as a bias added last, the sink as an extra term of the normaliser,
    dropout as a change of the probabilities. Dense and tiled, forward and
    backward, all call :meth:`logits` and :meth:`drop`. q, k and v are in
    (..., heads, seqlen, dim) order whatever ``layout`` the caller used, and
    padded when the caller packed them; results go back through
    :meth:`to_caller`.
    """

    q: FloatArray  # broadcast to the full batch shape
    k: FloatArray  # key/value heads repeated for grouped-query attention
    v: FloatArray
    scale: float
    empty_rows: EmptyRows
    out_shape: tuple[int, ...]
    # (mod, name): the built-in options' mask mods, then the user's mask_mod
    masks: tuple[tuple[MaskMod, str], ...] = ()
    # (mod, name): the soft-cap, then the user's score_mod, applied in order
    score_mods: tuple[tuple[ScoreMod, str], ...] = ()
    mask_array: BoolArray | None = None  # the boolean mask, sliced per block
    softcap: float | None = None
    bias: FloatArray | None = None  # the float mask, added to the logits
    sink: FloatArray | None = None  # (H, 1, 1), joins each row's normaliser
    dropout_mask: BoolArray | None = None
    dropout_scale: float = 1.0
    q_valid: BoolArray | None = None  # (B, 1, n_q, 1) from q_lengths
    key_leftpad: IntArray | None = None  # (B,): kv_idx counts from here
    layout: Layout = "bhsd"
    packing: Packing | None = None  # how the caller packed a varlen batch
    # the caller's q, k, v shapes, in (..., heads, seqlen, dim) order
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def n_k(self) -> int:
        """Number of keys."""
        return int(self.k.shape[-2])

    @property
    def n_q(self) -> int:
        """Number of queries."""
        return int(self.q.shape[-2])

    @property
    def batch(self) -> tuple[int, ...]:
        """The leading (batch, head) axes of the scores."""
        return self.out_shape[:-2]

    def grids(self, start: int, stop: int) -> Grids:
        """The index grids that mods see for key columns ``start:stop``.

        With ``key_leftpad``, key positions count from each sequence's first
        real key, as ``attention_ref`` shifts its ``col_idx`` (testing.py:
        171-174); keys before it get negative positions.
        """
        grids = index_grids(self.batch, np.arange(self.n_q), np.arange(start, stop))
        if self.key_leftpad is None:
            return grids
        shift = self.key_leftpad.reshape(-1, *(1,) * (len(self.batch) + 1))
        return grids._replace(kv_idx=grids.kv_idx - shift)

    def allowed(self, start: int, stop: int, grids: Grids | None = None) -> Any:
        """Where key columns ``start:stop`` may be attended, or None if everywhere.

        A boolean array broadcastable to the block's scores, for every query:
        the mask array's columns and every mask mod, called once on the
        block's index grids.
        """
        if self.mask_array is None and not self.masks:
            return None
        grids = self.grids(start, stop) if grids is None else grids
        shape = (*self.batch, self.n_q, stop - start)
        allowed = None
        if self.mask_array is not None:
            allowed = column_block(self.mask_array, start, stop)
        for mod, name in self.masks:
            result = check_mask_result(_call(mod, grids, name), shape, name)
            allowed = result if allowed is None else allowed & result
        return allowed

    def block(self, start: int, stop: int, *, skip: bool = True) -> Block | None:
        """Key columns ``start:stop``, with the masks evaluated once for them.

        With ``skip``, the block keeps only the range of query rows that may
        attend to at least one of its keys, and is None if none may: the
        rows and blocks that FlexAttention's block mask lets a kernel skip.
        Skipped rows contribute nothing to the softmax, exactly.
        """
        needs_grids = bool(self.masks or self.score_mods)
        grids = self.grids(start, stop) if needs_grids else None
        allowed = self.allowed(start, stop, grids)
        rows = slice(None)
        if skip and allowed is not None:
            active = _active_rows(allowed)
            if active is None:
                return None
            rows = active
        if rows != slice(None):
            if grids is not None:
                grids = grids._replace(q_idx=grids.q_idx[..., rows, :])
            allowed = row_block(allowed, rows)
        return Block(rows, start, stop, allowed, grids)

    @property
    def mask_mods(self) -> tuple[Callable[[Any, Any], Any], ...]:
        """The masks as one ``(q_idx, kv_idx)`` callable, for older callers.

        ``kv_idx`` must be a contiguous range of columns, ``(1, n)``.
        """
        if self.mask_array is None and not self.masks:
            return ()

        def allowed(q_idx: Any, kv_idx: Any) -> Any:
            return self.allowed(int(kv_idx[0, 0]), int(kv_idx[0, -1]) + 1)

        return (allowed,)

    def logits(
        self,
        q_scaled: FloatArray,
        k_t: FloatArray,
        block: Block,
        *,
        keep_inputs: bool = False,
    ) -> tuple[FloatArray, list[FloatArray]]:
        """Final logits of one block, and each score mod's input.

        The order is ``attention_ref``'s (flash_attn/utils/testing.py:291-327)
        and FlexAttention's: scale, the score mods (the soft-cap first), then
        the masks, then the float mask. A mask before the soft-cap would be
        undone by it: ``cap · tanh(-inf)`` is ``-cap``, not ``-inf``. With
        ``keep_inputs``, the scores each score mod was applied to come back
        too, for the backward's chain rule.
        """
        with np.errstate(over="ignore", invalid="ignore"):  # _check_row_max
            scores: FloatArray = np.matmul(
                q_scaled[..., block.rows, :], k_t[..., block.start : block.stop]
            )
        inputs: list[FloatArray] = []
        for mod, name in self.score_mods:
            if keep_inputs:
                inputs.append(scores)
            scores = apply_score_mod(mod, scores, block.grids, name)
        if block.allowed is not None:
            np.copyto(scores, -np.inf, where=~block.allowed)
        if self.bias is not None:
            scores += self.piece(self.bias, block)
        return scores, inputs

    def piece(self, arr: npt.NDArray[Any], block: Block) -> npt.NDArray[Any]:
        """The block's rows and columns of an array broadcastable to the scores."""
        piece: npt.NDArray[Any] = row_block(
            column_block(arr, block.start, block.stop), block.rows
        )
        return piece

    def drop(self, probs: FloatArray, block: Block) -> FloatArray:
        """Dropout of one block's ``probs``: ``P ∘ mask / (1 - p)``.

        A new array; ``probs`` itself stays the weights before dropout, which
        is what FlashAttention returns (testing.py:351-360).
        """
        if self.dropout_mask is None:
            return probs
        keep = self.piece(self.dropout_mask, block)
        return np.where(keep, probs * self.dropout_scale, 0.0)

    def padded_rows(self) -> BoolArray:
        """Boolean ``(*batch, n_q)``: queries at or past ``q_lengths``."""
        if self.q_valid is None:
            return np.zeros((*self.batch, self.n_q), dtype=bool)
        return np.broadcast_to(~self.q_valid[..., 0], (*self.batch, self.n_q))

    def to_caller(self, arr: FloatArray, side: str = "q") -> FloatArray:
        """A (..., heads, seqlen, dim) result in the caller's layout (and packing).

        ``side`` says whose tokens a packed result runs over: "q" for the
        output and dq, "k" for dk and dv.
        """
        if self.packing is not None:
            arr = pack(arr, self.packing, side)
        return from_layout(arr, self.layout)

    def lse_to_caller(self, lse: FloatArray) -> FloatArray:
        """The log-sum-exp, ``(..., heads, n_q)``, or ``(heads, total_q)`` packed."""
        if self.packing is not None:
            return pack_lse(lse, self.packing)
        return lse

    def from_caller(self, x: ArrayInput, name: str) -> FloatArray:
        """An array of the output's shape, in (..., heads, seqlen, dim) order."""
        arr = real_array(x, name, dtype=np.float64)
        if self.packing is not None:
            heads, d_v = self.out_shape[-3], self.out_shape[-1]
            return unpack_rows(
                to_layout(arr, self.layout, name), self.packing, name, (heads, d_v)
            )
        expected, shape = self.out_shape, "(..., n_q, d_v)"
        if self.layout == "bshd":
            *batch, heads, n_q, d_v = expected
            expected, shape = (*batch, n_q, heads, d_v), "(..., n_q, H, d_v)"
        if arr.shape != expected:
            raise ValueError(
                f"{name} must have the output's shape {shape} = {expected}, got "
                f"{arr.shape}"
            )
        return to_layout(arr, self.layout, name)

    def lse_from_caller(self, lse: ArrayInput) -> FloatArray:
        """The forward's log-sum-exp, in :meth:`lse_to_caller`'s shape, checked."""
        arr = real_array(lse, "lse", dtype=np.float64)
        if self.packing is not None:
            return unpack_lse(arr, self.packing, self.out_shape[-3])
        expected = (*self.batch, self.n_q)
        if arr.shape != expected:
            raise ValueError(
                f"lse must have the shape (..., n_q) = {expected} of the forward's "
                f"rows (the same in either layout), got {arr.shape}"
            )
        return arr


def _call(mod: Callable[..., Any], args: tuple[Any, ...], name: str) -> Any:
    """Call a mod; an index out of range becomes an error that names it."""
    try:
        return mod(*args)
    except IndexError as exc:
        sizes = ", ".join(
            f"{n} {a.shape}" for n, a in zip(Grids._fields, args[-4:], strict=True)
        )
        raise ValueError(
            f"{name} raised IndexError ({exc}) on the index grids {sizes}: does an "
            f"array it reads have an entry for every batch entry, head and "
            f"position?"
        ) from exc


def apply_score_mod(
    mod: ScoreMod, scores: FloatArray, grids: Grids | None, name: str
) -> FloatArray:
    """``mod(scores, *grids)``, checked, as a new array of the scores' shape."""
    assert grids is not None  # logits builds them for score mods
    with np.errstate(over="ignore", invalid="ignore"):  # _check_row_max
        result = _call(mod, (scores, *grids), name)
    checked = check_score_result(result, scores.shape, name)
    if checked.flags.writeable and not np.shares_memory(checked, scores):
        return checked
    return np.array(checked, dtype=np.float64)


def prepare(q: ArrayInput, k: ArrayInput, v: ArrayInput, options: Options) -> Problem:
    """Check q, k and v against each other and against ``options``.

    The one entry of every code path: the dense and tiled forward and
    backward passes, the KV cache, and the testing helpers' emulations. A
    packed batch (``cu_seqlens_q``, ``cu_seqlens_k``) is padded here, one
    batch entry per sequence, with each sequence's lengths.

    Examples
    --------
    >>> p = prepare(np.ones((2, 5, 3, 4)), np.ones((2, 7, 1, 4)),
    ...             np.ones((2, 7, 1, 6)), Options(layout="bshd"))
    >>> p.out_shape, p.shapes["k"]
    ((2, 3, 5, 6), (2, 1, 7, 4))
    """
    q, k, v = (
        to_layout(
            real_array(a, name, min_ndim=2, dtype=np.float64), options.layout, name
        )
        for a, name in ((q, "q"), (k, "k"), (v, "v"))
    )
    shapes = f"q {q.shape}, k {k.shape}, v {v.shape}"
    if options.layout == "bshd":
        shapes += " as (..., heads, seqlen, dim) from layout='bshd'"
    if options.check_finite:
        for name, arr in (("q", q), ("k", k), ("v", v)):
            require_finite(arr, name)
    packing = None
    q_lengths_in, k_lengths_in = options.q_lengths, options.k_lengths
    if options.cu_seqlens_q is not None:
        q, k, v, q_lengths_in, k_lengths_in, packing = unpack(
            q, k, v, options.cu_seqlens_q, options.cu_seqlens_k, options.seqused_k
        )
        shapes += f", packed into {len(q)} sequences: padded {q.shape}, {k.shape}"
    original = {"q": q.shape, "k": k.shape, "v": v.shape}
    problems = (  # the first that holds is the one reported
        (
            q.shape[-1] != k.shape[-1],
            f"q and k must share the last axis d_k, got d_k = {q.shape[-1]} and "
            f"{k.shape[-1]}",
        ),
        (q.shape[-1] == 0, "q and k have zero width, d_k = 0"),
        (v.shape[-1] == 0, "v has zero width, d_v = 0"),
        (
            k.shape[-2] != v.shape[-2],
            f"k and v must hold the same number of keys n_k on axis -2, got "
            f"{k.shape[-2]} and {v.shape[-2]}",
        ),
        (k.shape[-2] == 0, "there are no keys, n_k = 0"),
    )
    for holds, problem in problems:
        if holds:
            raise ValueError(f"{problem} ({shapes})")
    k, v = _group_heads(q, k, v, shapes)
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch, head) axes do not broadcast: {shapes}"
        ) from None
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores_shape = (*batch, n_q, n_k)
    # A broadcast view costs nothing and gives every score block the full
    # batch shape, so the in-place updates below never meet a smaller array.
    q = np.broadcast_to(q, (*batch, n_q, q.shape[-1]))

    mask = _check_mask(options.mask, "mask", scores_shape)
    dropout_mask = _check_mask(options.dropout_mask, "dropout_mask", scores_shape)
    lengths = _Lengths(
        lengths_array(q_lengths_in, "q_lengths", n_q, batch, shapes),
        lengths_array(k_lengths_in, "k_lengths", n_k, batch, shapes),
        None,
    )
    lengths = lengths._replace(
        key_leftpad=leftpad_array(
            options.key_leftpad, n_k if lengths.k is None else lengths.k, batch, shapes
        )
    )
    masks, q_valid = _mask_mods(options, (n_q, n_k), lengths)
    score_mods: list[tuple[ScoreMod, str]] = []
    if options.softcap is not None:
        score_mods.append((softcap_mod(options.softcap), "softcap"))
    if options.score_mod is not None:
        score_mods.append((options.score_mod, "score_mod"))
    return Problem(
        q=q,
        k=k,
        v=v,
        scale=1.0 / np.sqrt(q.shape[-1]) if options.scale is None else options.scale,
        empty_rows=options.empty_rows,
        out_shape=(*batch, n_q, v.shape[-1]),
        masks=masks,
        score_mods=tuple(score_mods),
        mask_array=mask if mask is not None and mask.dtype == bool else None,
        softcap=options.softcap,
        bias=mask if mask is not None and mask.dtype != bool else None,
        sink=sink_array(options.sink_logits, batch, shapes),
        dropout_mask=dropout_mask,
        dropout_scale=1.0 / (1.0 - options.dropout_p),
        q_valid=q_valid,
        key_leftpad=lengths.key_leftpad,
        layout=options.layout,
        packing=packing,
        shapes=original,
    )


class _Lengths(NamedTuple):
    q: IntArray | None
    k: IntArray | None
    key_leftpad: IntArray | None


def _mask_mods(
    options: Options, sizes: tuple[int, int], lengths: _Lengths
) -> tuple[tuple[tuple[MaskMod, str], ...], BoolArray | None]:
    """The boolean options as mask mods, the user's mask_mod last; and q_valid."""
    n_q, n_k = sizes
    left, right = options.window if options.window is not None else (None, None)
    if options.is_causal:
        right = 0  # attention_ref: `if causal: window_size = (window_size[0], 0)`
    offset = align_offset(
        n_q,
        n_k,
        options.align,
        q_lengths=lengths.q,
        k_lengths=lengths.k,
        key_leftpad=lengths.key_leftpad,
    )
    masks: list[tuple[MaskMod, str]] = []
    if left is not None or right is not None:
        name = "is_causal" if options.window is None else "window"
        masks.append(
            (
                sliding_window(
                    left, right, offset=offset, sink_tokens=options.sink_tokens
                ),
                name,
            )
        )
    if options.chunk is not None:
        masks.append((chunked(options.chunk, offset), "chunk"))
    if lengths.k is not None or lengths.key_leftpad is not None:
        end = np.full(1, n_k) if lengths.k is None else lengths.k
        start = 0 if lengths.key_leftpad is None else lengths.key_leftpad
        masks.append((key_padding(end - start), "k_lengths"))
    q_valid = None
    if lengths.q is not None:
        masks.append((query_padding(lengths.q), "q_lengths"))
        q_valid = np.arange(n_q)[:, None] < lengths.q.reshape(-1, 1, 1, 1)
    if options.mask_mod is not None:
        masks.append((options.mask_mod, "mask_mod"))
    return tuple(masks), q_valid


def column_block(arr: npt.NDArray[Any], start: int, stop: int) -> npt.NDArray[Any]:
    """Key columns ``start:stop`` of an array, or all of them if it has one."""
    if arr.shape[-1] == 1:
        return arr
    return arr[..., start:stop]


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts to exactly ``target``."""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _group_heads(
    q: FloatArray, k: FloatArray, v: FloatArray, shapes: str
) -> tuple[FloatArray, FloatArray]:
    """Repeat shared key/value heads for grouped- and multi-query attention.

    With ``H_q`` query heads and ``H_kv`` key/value heads on axis -3, query
    head ``h`` reads key/value head ``h // (H_q // H_kv)``, as PyTorch's
    ``enable_gqa``. A head axis of size 1 on either side is ordinary
    broadcasting; ``H_kv == 1`` is multi-query attention.
    """
    if q.ndim < 3 or k.ndim < 3:
        return k, v
    h_q, h_kv = q.shape[-3], k.shape[-3]
    if v.ndim >= 3 and v.shape[-3] != h_kv:
        raise ValueError(
            f"k and v must have the same number of heads on axis -3, got {h_kv} "
            f"and {v.shape[-3]} ({shapes})"
        )
    if h_kv in (h_q, 1) or h_q == 1:  # equal, or plain broadcasting
        return k, v
    if h_q % h_kv:
        raise ValueError(
            f"q has {h_q} heads on axis -3 but k and v have {h_kv}; grouped-query "
            f"attention needs the query heads to be a multiple of the key/value "
            f"heads ({shapes})"
        )
    group = h_q // h_kv
    v = np.repeat(v, group, axis=-3) if v.ndim >= 3 else v
    return np.repeat(k, group, axis=-3), v


def _check_mask(
    mask: ArrayInput | None, name: str, scores_shape: tuple[int, ...]
) -> npt.NDArray[Any] | None:
    """``mask`` (already checked by :class:`Options`) if it fits the scores."""
    if mask is None:
        return None
    arr = as_array(mask, name)
    if not _broadcasts_to(arr.shape, scores_shape):
        raise ValueError(
            f"{name} with shape {arr.shape} does not broadcast to the scores' "
            f"shape {scores_shape} (..., heads, n_q, n_k), which is the same in "
            f"either layout"
        )
    return arr


def empty_row_error(empty: BoolArray) -> ValueError:
    where = first_index(empty)
    return ValueError(
        f"query {where[-1]} (batch index {where[:-1]}) has no allowed key: every "
        f"logit in its row is -inf after masking. Pass empty_rows='zero' (the "
        f"output 0 of FlashAttention, and from PyTorch 2.5 of its math backend "
        f"and its CUDA memory-efficient kernel) or empty_rows='nan' (the "
        f"textbook softmax)"
    )


def _check_row_max(row_max: FloatArray, p: Problem) -> None:
    # Inputs are finite, so NaN or +inf here means q·k overflowed float64,
    # or a score mod made it.
    bad = np.isnan(row_max) | np.isposinf(row_max)
    if bad.any():
        mods = [name for _, name in p.score_mods if name == "score_mod"]
        cause = ", the score_mod returned NaN or +inf" if mods else ""
        raise ValueError(
            f"the scaled scores hold NaN or +inf in row {first_index(bad[..., 0])}: "
            f"q·k overflowed float64{cause}, or non-finite input got past "
            f"check_finite=False"
        )


def _fill_empty(arrays: list[FloatArray], empty: BoolArray, policy: str) -> None:
    fill = 0.0 if policy == "zero" else np.nan
    for arr in arrays:
        arr[np.broadcast_to(empty[..., None], arr.shape)] = fill


@overload
def attention(
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    *,
    return_weights: Literal[False] = ...,
    return_lse: Literal[False] = ...,
    **options: Unpack[OptionKeywords],
) -> FloatArray: ...


@overload
def attention(
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    *,
    return_weights: bool = ...,
    return_lse: bool = ...,
    **options: Unpack[OptionKeywords],
) -> FloatArray | tuple[FloatArray, ...]: ...


@check_keywords()
def attention(
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    *,
    return_weights: bool = False,
    return_lse: bool = False,
    **options: Unpack[OptionKeywords],
) -> FloatArray | tuple[FloatArray, ...]:
    """Scaled dot-product attention, ``softmax(q kᵀ · scale + mask) v``.

    Every array may be a NumPy array, a torch tensor of any dtype (bfloat16
    included, with or without ``requires_grad``, on any device), or anything
    with ``__array__`` or ``__dlpack__``; torch is never imported by
    sdpa_ref. The results are NumPy float64.

    Parameters
    ----------
    q : array_like, shape (..., n_q, d_k)
        Queries; (..., n_q, H, d_k) with ``layout="bshd"``.
    k : array_like, shape (..., n_k, d_k)
        Keys.
    v : array_like, shape (..., n_k, d_v)
        Values. ``n_q != n_k`` and ``d_v != d_k`` are both fine. Leading axes
        broadcast. If axis -3 holds heads and q has ``H_q`` of them while k
        and v have ``H_kv``, with ``H_q % H_kv == 0``, query head ``h`` uses
        key/value head ``h // (H_q // H_kv)`` (grouped- and multi-query
        attention, PyTorch's ``enable_gqa``).
    mask : array_like of bool or float, optional
        Broadcastable to the scores, ``(..., n_q, n_k)``, in either layout
        (as FlashAttention's ``attn_bias``). Boolean: True means "may
        attend". Floating: added to the logits, ``-inf`` forbids.
    mask_mod : callable, optional
        FlexAttention's ``mask_mod(b, h, q_idx, kv_idx) -> bool``, True
        where a pair may attend; called on broadcast NumPy index grids, once
        per block of keys (see :mod:`sdpa_ref.mods` for the contract and
        ready mods). Combines with every other mask.
    score_mod : callable, optional
        FlexAttention's ``score_mod(score, b, h, q_idx, kv_idx) -> score``,
        applied to the scaled logits (after ``softcap``, before the masks),
        written with NumPy. The backward differentiates it by complex steps
        unless it supplies its derivative (:func:`sdpa_ref.mods.with_derivative`).
    is_causal : bool
        Query ``i`` sees keys ``j <= i'`` (a right window bound of 0); top-left
        aligned by default, as PyTorch. Combines with ``mask``.
    scale : float, optional
        Multiplies ``q kᵀ``. ``None`` means ``1 / sqrt(d_k)``; ``scale=1.0``
        is unscaled attention.
    empty_rows : {"raise", "zero", "nan"}
        What a query with no allowed key gets: an error naming the row; an
        output (and weights) of 0, as FlashAttention gives and, from
        PyTorch 2.5, PyTorch's math backend and CUDA memory-efficient kernel;
        or NaN, the textbook softmax of an all ``-inf`` row.
    check_finite : bool
        Reject NaN and infinity in q, k and v, as SciPy does.
    align : {"top_left", "bottom_right"}
        Where query ``i``'s diagonal lies, for ``is_causal``, ``window`` and
        ``chunk``: at key ``i`` (PyTorch's ``is_causal``), or at key ``i +
        n_k - n_q`` (FlashAttention), from each batch entry's true lengths
        when ``q_lengths``, ``k_lengths``, ``key_leftpad`` or ``cu_seqlens_q``
        are given. Mods see the raw indices and align themselves.
    window : (int or None, int or None), optional
        ``(left, right)``: query ``i`` sees keys ``i' - left <= j <= i' +
        right``, ``i'`` being ``i`` aligned; None leaves a side unbounded.
        FlashAttention's ``window_size``, with None for its -1.
    sink_tokens : int
        The first ``sink_tokens`` keys are exempt from the window's left bound
        (StreamingLLM). Needs a left bound.
    chunk : int, optional
        Query ``i`` sees only the keys of its own chunk of ``chunk`` keys,
        after alignment (Llama 4; FlashAttention's ``attention_chunk``).
    softcap : float, optional
        Logits become ``softcap · tanh(logits / softcap)`` after the scale and
        before the masks and a float ``mask`` (Gemma 2).
    sink_logits : array_like, shape (H,), optional
        One logit per query head that joins each row's softmax normaliser
        without a value (gpt-oss). A row whose keys are all masked then gets
        weights and output 0, whatever ``empty_rows`` says.
    q_lengths : array_like of int, shape (B,), optional
        For 4-D inputs: batch entry ``b`` has ``q_lengths[b]`` real queries.
        Those at or past it are padding: output, weights and gradients 0,
        and a log-sum-exp of ``-inf``.
    k_lengths : array_like of int, shape (B,), optional
        For 4-D inputs: batch entry ``b`` has ``k_lengths[b]`` real keys;
        those at or past it are never attended.
    key_leftpad : array_like of int, shape (B,), optional
        For 4-D inputs: the real keys of batch entry ``b`` start at
        ``key_leftpad[b]`` and end at ``k_lengths[b]`` (or ``n_k``); keys
        before are left padding, never attended, and mods see key positions
        counted from the first real key (``attention_ref``'s ``key_leftpad``,
        FlashAttention's ``cache_leftpad``).
    cu_seqlens_q, cu_seqlens_k : array_like of int, shape (B + 1,), optional
        A packed batch, as ``flash_attn_varlen_func`` takes it: q, k and v
        are ``(total, heads, dim)`` with ``layout="bshd"`` (``(heads,
        total, dim)`` with "bhsd"), and sequence ``b`` holds tokens
        ``cu_seqlens[b]`` to ``cu_seqlens[b + 1]``. Every option and mod
        applies per sequence (``b`` is the sequence, positions count from
        its start); the output comes back packed like q, the log-sum-exp
        as ``(heads, total_q)``, the weights padded to ``(B, heads,
        max_seqlen_q, max_seqlen_k)``; ``mask`` and ``dropout_mask`` are in
        that padded shape. See :mod:`sdpa_ref.varlen`.
    seqused_k : array_like of int, shape (B,), optional
        With ``cu_seqlens_k``: only the first ``seqused_k[b]`` keys of
        sequence ``b``'s slot are used (FlashAttention 3).
    dropout_mask : array_like of bool, optional
        True = keep; broadcastable to the scores, ``(..., n_q, n_k)``, in
        either layout. The output is ``(P ∘ dropout_mask) v / (1 -
        dropout_p)``; the weights returned are ``P`` before dropout, as
        FlashAttention returns them.
    dropout_p : float
        The dropout probability in [0, 1) that ``dropout_mask`` was drawn
        with. sdpa_ref draws no random numbers, so ``dropout_p > 0`` needs a
        mask.
    layout : {"bhsd", "bshd"}
        How q, k, v and the output hold their axes: ``"bhsd"`` is (batch,
        heads, seqlen, dim), as PyTorch's SDPA; ``"bshd"`` is
        FlashAttention's (batch, seqlen, heads, dim). Masks, weights and the
        log-sum-exp keep the scores' order, (..., heads, n_q, n_k) and
        (..., heads, n_q), in both, as FlashAttention returns them.
    return_weights : bool
        Also return the attention weights, shape ``(..., n_q, n_k)``.
    return_lse : bool
        Also return each row's log-sum-exp, shape ``(..., n_q)``, natural log,
        over the final logits and the sink; ``-inf`` for an empty row.

    Returns
    -------
    numpy.ndarray or tuple
        The output, shape ``(..., n_q, d_v)``, float64; then the weights if
        ``return_weights``, then the log-sum-exp if ``return_lse``.

    Examples
    --------
    Query Q0 of the worked example at width 4 scores [4, 0, 2, -4]; scaled
    attention divides by √4 = 2 before the softmax:

    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(4)
    >>> out, w = attention(Q[:1], K, V, return_weights=True)
    >>> w.round(3)
    array([[0.657, 0.089, 0.242, 0.012]])
    >>> out, w = attention(Q[:1], K, V, scale=1.0, return_weights=True)
    >>> w.round(3)
    array([[0.867, 0.016, 0.117, 0.   ]])

    A window of one key to the left, bottom-right aligned, as a decoding step
    of FlashAttention sees it: the last query reads the last two keys.

    >>> _, w = attention(Q[:1], K, V, window=(1, 0), align="bottom_right",
    ...                  return_weights=True)
    >>> w.round(3)
    array([[0.   , 0.   , 0.953, 0.047]])
    """
    _check_flags(return_weights=return_weights, return_lse=return_lse)
    p = prepare(q, k, v, Options(**options))
    out, weights, lse = dense_forward(p, want_weights=return_weights)
    return _results(
        p.to_caller(out), weights, p.lse_to_caller(lse), return_weights, return_lse
    )


def _check_flags(**flags: object) -> None:
    for name, flag in flags.items():
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(f"{name} must be True or False, got {flag!r}")


def _results(
    out: FloatArray,
    weights: FloatArray | None,
    lse: FloatArray,
    return_weights: bool,
    return_lse: bool,
) -> FloatArray | tuple[FloatArray, ...]:
    extra = [a for a, flag in ((weights, return_weights), (lse, return_lse)) if flag]
    return (out, *(a for a in extra if a is not None)) if extra else out


def dense_forward(
    p: Problem, *, want_weights: bool
) -> tuple[FloatArray, FloatArray | None, FloatArray]:
    """Output, weights (or None) and log-sum-exp, all keys at once.

    In the (..., heads, seqlen, dim) order of :class:`Problem`.
    """
    out, weights, lse, _ = _dense(p, want_weights=want_weights, keep_logits=False)
    return out, weights, lse


def dense_forward_and_logits(
    p: Problem,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Output, log-sum-exp and the logits (masked, before the softmax).

    For a backward that would otherwise compute the same logits again, as
    :func:`sdpa_ref.backward.gradients` does given them.
    """
    out, _, lse, logits = _dense(p, want_weights=False, keep_logits=True)
    assert logits is not None
    return out, lse, logits


def _dense(
    p: Problem, *, want_weights: bool, keep_logits: bool
) -> tuple[FloatArray, FloatArray | None, FloatArray, FloatArray | None]:
    with np.errstate(over="ignore", invalid="ignore"):  # _check_row_max reports it
        # Scaling q (n_q x d_k numbers) instead of the scores (n_q x n_k)
        # saves a whole pass over the largest array.
        q_scaled = p.q * p.scale
    everything = p.block(0, p.n_k, skip=False)
    assert everything is not None  # without skip there is always a block
    scores, _ = p.logits(q_scaled, np.swapaxes(p.k, -1, -2), everything)
    logits = scores.copy() if keep_logits else None
    row_max = scores.max(axis=-1, keepdims=True)
    _check_row_max(row_max, p)
    if p.sink is not None:
        # attention_ref's `logits_or_sinks_max` (testing.py:332-336).
        row_max = np.maximum(row_max, p.sink)
    no_logit = np.isneginf(row_max)
    row_max[no_logit] = 0.0  # exp(-inf - 0) = 0 rather than NaN
    # In place from here on: no second n_q x n_k temporary.
    scores -= row_max
    np.exp(scores, out=scores)
    norm = scores.sum(axis=-1, keepdims=True)
    if p.sink is not None:
        norm += np.exp(p.sink - row_max)
    with np.errstate(divide="ignore"):
        lse = (row_max + np.log(norm))[..., 0]
    empty = _empty_rows(p, lse)
    norm[norm == 0] = 1.0  # empty or padded rows: their exps are all 0
    if p.dropout_mask is None:
        out = np.matmul(scores, p.v)
        out /= norm
        if want_weights:
            scores /= norm
    else:
        scores /= norm
        out = np.matmul(p.drop(scores, everything), p.v)
    weights = scores if want_weights else None
    if empty is not None:
        _fill_empty([a for a in (out, weights) if a is not None], empty, p.empty_rows)
    return out, weights, lse, logits


_dense_forward = dense_forward  # the name older callers import


def _empty_rows(p: Problem, lse: FloatArray) -> BoolArray | None:
    """Rows with no key and no sink, after padded queries get lse = -inf.

    Returns None if there are none, else the boolean ``(*batch, n_q)`` array;
    raises under ``empty_rows="raise"``. Padded queries are not empty rows:
    they are not there.
    """
    padded = p.padded_rows()
    if padded.any():
        lse[padded] = -np.inf
    if p.sink is not None:
        return None
    empty = np.isneginf(lse) & ~padded
    if not empty.any():
        return None
    if p.empty_rows == "raise":
        raise empty_row_error(empty)
    return empty


@check_keywords()
def tiled_attention(
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    *,
    block_size: int = 128,
    return_lse: bool = False,
    **options: Unpack[OptionKeywords],
) -> Any:
    """Attention over key/value blocks with an online softmax, as FlashAttention.

    The result equals :func:`attention` to about 1e-12 in float64, but no more
    than ``n_q x block_size`` scores (per batch entry) exist at any time. For
    each block of keys, the running row maximum ``m`` is updated, the running
    sum ``l`` and the output accumulator are rescaled by ``exp(m_old - m_new)``,
    and the block's contribution is added. Every mask is built one block at a
    time; a sink starts the running maximum and sum at ``(sink, 1)``.

    The options ``mask`` to ``layout`` mean what they mean for
    :func:`attention`.

    Parameters
    ----------
    q, k, v
        As for :func:`attention`.
    block_size : int
        Keys per block, at least 1.
    return_lse : bool
        Also return each row's log-sum-exp, ``m + log l``, as FlashAttention's
        forward saves it for the backward pass: shape ``(..., H, n_q)`` in
        either layout.

    Returns
    -------
    numpy.ndarray or tuple
        The output, shape ``(..., n_q, d_v)``, float64; with ``return_lse``,
        the pair ``(output, lse)``.

    Examples
    --------
    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(64)
    >>> dense = attention(Q, K, V)
    >>> tiled = tiled_attention(Q, K, V, block_size=3)
    >>> bool(np.abs(dense - tiled).max() < 1e-12)
    True
    """
    _check_flags(return_lse=return_lse)
    block_size = positive_int(block_size, "block_size")
    p = prepare(q, k, v, Options(**options))
    out, lse = tiled_forward(p, block_size)
    out = p.to_caller(out)
    return (out, p.lse_to_caller(lse)) if return_lse else out


def tiled_forward(p: Problem, block_size: int) -> tuple[FloatArray, FloatArray]:
    """Output and log-sum-exp over key blocks, in :class:`Problem`'s order."""
    batch = p.batch
    if p.sink is None:
        running_max = np.full((*batch, p.n_q, 1), -np.inf)
        running_sum = np.zeros((*batch, p.n_q, 1))
    else:
        # The sink is a key with logit s_h and no value: fold it in first.
        running_max = np.broadcast_to(p.sink, (*batch, p.n_q, 1)).copy()
        running_sum = np.ones((*batch, p.n_q, 1))
    acc = np.zeros(p.out_shape)
    k_t = np.swapaxes(p.k, -1, -2)
    with np.errstate(over="ignore", invalid="ignore"):
        q_scaled = p.q * p.scale
    for start in range(0, p.n_k, block_size):
        block = p.block(start, min(start + block_size, p.n_k))
        if block is None:  # no query may see these keys
            continue
        rows = block.rows
        scores, _ = p.logits(q_scaled, k_t, block)
        block_max = scores.max(axis=-1, keepdims=True)
        _check_row_max(block_max, p)
        old_max = running_max[..., rows, :]
        new_max = np.maximum(old_max, block_max)
        # A row that has seen no allowed key yet keeps a -inf maximum; shift it
        # by 0 so that exp gives 0 instead of exp(-inf + inf) = NaN.
        shift = np.where(np.isneginf(new_max), 0.0, new_max)
        rescale = np.exp(old_max - shift)
        scores -= shift
        np.exp(scores, out=scores)
        running_sum[..., rows, :] *= rescale
        running_sum[..., rows, :] += scores.sum(axis=-1, keepdims=True)
        acc[..., rows, :] *= rescale
        acc[..., rows, :] += np.matmul(
            p.drop(scores, block), p.v[..., block.start : block.stop, :]
        )
        running_max[..., rows, :] = new_max
    with np.errstate(divide="ignore"):
        shift = np.where(np.isneginf(running_max), 0.0, running_max)
        lse = (shift + np.log(running_sum))[..., 0]
    empty = _empty_rows(p, lse)
    running_sum[running_sum == 0] = 1.0
    acc /= running_sum
    if empty is not None:
        _fill_empty([acc], empty, p.empty_rows)
    return acc, lse


_Problem = Problem  # the name older callers import
