"""Arrays from anywhere: NumPy, torch tensors, and anything with a protocol.

A kernel test holds torch tensors: bfloat16 or float16, with
``requires_grad``, on a GPU. The oracle takes them as they are. torch is
never imported here: a torch tensor can only exist once torch is imported,
so ``sys.modules`` tells whether an input can be one.

Values are never rounded on the way in. bfloat16 (and any other floating
type NumPy lacks) becomes float32, which holds every bfloat16 value exactly;
float16, float32 and float64 keep their dtype; the caller decides when to
go to float64.
"""

from __future__ import annotations

import sys
from typing import Any, Literal, NamedTuple, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = [
    "FORMATS",
    "LAYOUTS",
    "PRECISIONS",
    "ArrayInput",
    "BoolArray",
    "FloatArray",
    "Format",
    "IntArray",
    "Precision",
    "as_array",
    "from_layout",
    "source_precision",
    "to_layout",
]


class Format(NamedTuple):
    """A binary floating-point format: what rounding to it can do."""

    #: Significant bits ``p``: the stored fraction bits plus the implicit 1.
    bits: int
    #: The exponent of its smallest normal number, ``2**min_exponent``.
    min_exponent: int


#: The one registry of the precisions sdpa_ref knows, narrowest first: every
#: unit roundoff, ulp and smallest normal number derives from it. bfloat16 is
#: float32 with 16 fraction bits cut, so it keeps float32's exponents.
FORMATS = {
    "float16": Format(bits=11, min_exponent=-14),
    "bfloat16": Format(bits=8, min_exponent=-126),
    "float32": Format(bits=24, min_exponent=-126),
    "float64": Format(bits=53, min_exponent=-1022),
}

#: The precisions an input's dtype can name, narrowest first.
PRECISIONS = tuple(FORMATS)

#: The two layouts of q, k and v, heads before or after the sequence axis.
LAYOUTS = ("bhsd", "bshd")

Precision: TypeAlias = Literal["float16", "bfloat16", "float32", "float64"]
FloatArray: TypeAlias = npt.NDArray[np.float64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]
IntArray: TypeAlias = npt.NDArray[np.intp]


class SupportsDLPack(Protocol):
    """Anything that exports its memory through the DLPack protocol."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...


#: What the oracle takes as an array, NumPy's array-likes (lists, scalars,
#: anything with ``__array__``, torch tensors among them) and DLPack exporters.
ArrayInput: TypeAlias = npt.ArrayLike | SupportsDLPack


def as_array(x: object, name: str) -> npt.NDArray[Any]:
    """Return ``x`` as a NumPy array with the same values, or raise naming ``name``.

    NumPy arrays come back as they are. A torch tensor is detached, copied
    to the CPU if it lives elsewhere, and shared with NumPy; bfloat16 and
    the float8 types become float32 (exactly), as NumPy has no such dtype.
    Anything else goes through ``__array__`` (``np.asarray``) or
    ``__dlpack__`` (``np.from_dlpack``, copying to the CPU if needed).

    Examples
    --------
    >>> as_array([1, 2], "q")
    array([1, 2])
    >>> as_array(np.float32(0.5), "scale").dtype
    dtype('float32')
    """
    if isinstance(x, np.ndarray):
        return x
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return _from_torch(x, name)
    if not hasattr(x, "__array__") and hasattr(x, "__dlpack__"):
        return _from_dlpack(x, name)
    try:
        return np.asarray(x)
    except (ValueError, TypeError, RuntimeError) as exc:  # ragged lists, mostly
        if hasattr(x, "__dlpack__"):  # e.g. a GPU array that refuses __array__
            return _from_dlpack(x, name)
        raise TypeError(f"{name} must be a real numeric array; {exc}") from None


def _from_torch(tensor: Any, name: str) -> npt.NDArray[Any]:
    if tensor.device.type == "meta":
        raise TypeError(
            f"{name} is a tensor on the 'meta' device (shape {tuple(tensor.shape)}), "
            f"which has a shape but no values"
        )
    # detach: requires_grad is the caller's business; resolve_*: lazy views.
    tensor = tensor.detach().resolve_conj().resolve_neg()
    if tensor.layout != sys.modules["torch"].strided:
        tensor = tensor.to_dense()
    tensor = tensor.cpu()
    try:
        return np.asarray(tensor.numpy())
    except TypeError:  # a dtype NumPy lacks: bfloat16, float8_*, complex32
        if tensor.is_floating_point():
            return np.asarray(tensor.float().numpy())
        if tensor.is_complex():
            return np.asarray(tensor.cfloat().numpy())
        raise TypeError(
            f"{name} is a torch tensor of dtype {tensor.dtype}, which has no NumPy "
            f"equivalent (shape {tuple(tensor.shape)})"
        ) from None


def _from_dlpack(x: Any, name: str) -> npt.NDArray[Any]:
    try:
        return np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError, ValueError):
        pass
    try:  # on another device: ask the producer for a copy on the CPU
        return np.from_dlpack(x, device="cpu", copy=True)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} ({type(x).__name__}) could not be read through __dlpack__: {exc}"
        ) from None


def source_precision(x: object) -> Precision | None:
    """The precision that ``x``'s own dtype names, before any conversion.

    Returns "bfloat16", "float16", "float32" or "float64" for arrays and
    tensors of those dtypes, and None for anything else (integers, lists).

    Examples
    --------
    >>> source_precision(np.ones(2, np.float16)), source_precision([1.0])
    ('float16', None)
    """
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return None
    name = str(dtype).removeprefix("torch.")
    if name == "float16":
        return "float16"
    if name == "bfloat16":
        return "bfloat16"
    if name == "float32":
        return "float32"
    if name == "float64":
        return "float64"
    return None


def to_layout(
    arr: npt.NDArray[np.float64], layout: str, name: str
) -> npt.NDArray[np.float64]:
    """View ``arr`` of ``layout`` as (..., heads, seqlen, dim), which sdpa_ref uses.

    ``"bshd"``, FlashAttention's (batch, seqlen, heads, dim), swaps the last
    axes but one; no data moves.

    Examples
    --------
    >>> to_layout(np.zeros((2, 5, 3, 4)), "bshd", "q").shape
    (2, 3, 5, 4)
    """
    if layout == "bhsd":
        return arr
    if arr.ndim < 3:
        raise ValueError(
            f"layout='bshd' reads {name} as (..., seqlen, heads, dim) and needs at "
            f"least 3 axes, but {name} has shape {arr.shape}"
        )
    return np.swapaxes(arr, -3, -2)


def from_layout(arr: npt.NDArray[np.float64], layout: str) -> npt.NDArray[np.float64]:
    """The inverse of :func:`to_layout`: a result back in the caller's layout.

    Examples
    --------
    >>> from_layout(np.zeros((2, 3, 5, 4)), "bshd").shape
    (2, 5, 3, 4)
    """
    if layout == "bhsd":
        return arr
    return np.ascontiguousarray(np.swapaxes(arr, -3, -2))
