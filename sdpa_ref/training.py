"""Train one attention layer with and without the √d_k divisor.

The task is associative recall. A sequence holds ``n_pairs`` key–value pairs,
one pair per position, then a query key; the target is the value paired with
that key. Each pair is embedded as ``x_i = E_key[key_i] + E_val[value_i]``
and the query as ``x_q = E_key[query]``, with the key table alone (no value
embedding). One attention layer with learned ``W_Q``, ``W_K`` and ``W_V``
reads the pairs from the query, and a readout ``W_out`` maps its output to
logits over the values; the loss is the cross-entropy. To answer, the query
has to give its matching pair more weight than the others; a model that
ignores the query can do no better than :func:`baselines`' query-blind
numbers.

Only the width of the queries and keys, ``d_k``, changes between arms; the
values have the same width ``d_v`` (a field of :class:`Setting`) in every
arm, so the arms differ only where the scale acts.

Initialisation: embeddings N(0, 1), as PyTorch's ``nn.Embedding``, and every
weight matrix drawn from an untruncated normal N(0, gain² / fan_in), so that
at ``gain = 1`` a projection keeps the size of its input. The optimiser is
Adam with fixed hyperparameters for every arm.

Every gradient of the attention comes from :func:`sdpa_ref.attention_backward`;
this module writes the rest of the chain rule (embeddings, projections,
readout, cross-entropy) in NumPy.
"""

from __future__ import annotations

import functools
import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import scales
from ._checks import positive_int
from .backward import attention_backward
from .core import attention, softmax
from .published import (  # the published numbers this module uses or names
    ADAM,
)
from .random_model import SEED, standard_score_row
from .scales import scale_factor
from .spread import entropy, softmax_jacobian, softmax_jacobian_norm

__all__ = [
    "ADAM",
    "ARM_SCALES",
    "BAND_COVERAGE",
    "DEFAULT_SETTINGS",
    "GRAD_METHODS",
    "JACOBIAN_FLOOR",
    "LONG_RUN",
    "N_PRED_ROWS",
    "ONE_HOT",
    "PARAMETERS",
    "SCALES",
    "SEEDS",
    "STEPS",
    "TOP_ROWS",
    "WIDTHS",
    "WINDOW",
    "History",
    "InitRows",
    "LongRun",
    "Setting",
    "Task",
    "arm_range",
    "baselines",
    "blind_threshold",
    "early_one_hot",
    "final_rows",
    "first_grad_ratios",
    "first_score_step",
    "first_step_below",
    "grad_ratio_checks",
    "gradients",
    "init_params",
    "init_qk_variances",
    "init_row_summary",
    "init_rows",
    "init_score_std",
    "long_run_summary",
    "measured_grad_ratios",
    "predicted_grad_ratio",
    "predicted_grad_ratio_band",
    "run_experiment",
    "runs_above_threshold",
    "sample_batch",
    "scaled_scores",
    "train",
    "window_means",
]

#: The factors compared, 1/√d_k (the paper's), 1 (none) and 1/d_k (μP's),
#: by name: the names in :data:`sdpa_ref.scales.FIXED`, reordered to put the
#: paper's first.
SCALES = ("sqrt", *(name for name in scales.FIXED if name != "sqrt"))
#: Head widths of the queries and keys.
WIDTHS = (16, 64, 256)
#: One training run per seed and arm; the seed fixes the data and the init.
SEEDS = (0, 1, 2)
#: Adam steps per run.
STEPS = 150
#: The learned arrays, in the order the gradients are returned.
PARAMETERS = ("key_embedding", "value_embedding", "w_q", "w_k", "w_v", "w_out")
#: How :func:`predicted_grad_ratio` turns rows of scores into one number.
GRAD_METHODS = ("rms", "rms-spectral", "mean-spectral", "page")
#: Rows of scores behind :func:`predicted_grad_ratio` and its band.
N_PRED_ROWS = 20_000
#: The share of one-batch ratios that :func:`predicted_grad_ratio_band` spans.
BAND_COVERAGE = 0.9
#: Loss threshold of :func:`first_step_below` in the summary, nats.
ONE_NAT = 1.0
#: Steps per point in the training curves (ten batches, 160 rows).
WINDOW = 10
#: A row whose top weight is at least this counts as one-hot.
ONE_HOT = 0.99
#: A softmax Jacobian with a smaller Frobenius norm passes back almost nothing.
JACOBIAN_FLOOR = 1e-3
#: The share of rows whose part of the gradient :func:`init_row_summary` reports.
TOP_ROWS = 0.1


@dataclass(frozen=True)
class Task:
    """Associative recall: ``n_pairs`` pairs drawn from the vocabularies."""

    n_pairs: int = 8
    n_keys: int = 32
    n_values: int = 16
    batch: int = 16


@dataclass(frozen=True)
class Setting:
    """The model's size and the hyperparameters shared by every arm.

    ``W_Q`` and ``W_K`` are drawn with standard deviation
    ``gain · d_k**qk_width_power / √d_model``, the same standard normals
    for every setting and scale of one seed and width. ``gain`` multiplies
    the scores at initialisation by ``gain²``; ``qk_width_power = -1/4``
    multiplies them by ``d_k**(-1/2)``, so that unscaled scores start exactly
    where the 1/√d_k arm's start.
    """

    d_model: int = 256
    d_v: int = 32
    lr: float = ADAM["lr"]
    gain: float = 1.0
    qk_width_power: float = 0.0
    task: Task = Task()

    def qk_std_factor(self, d_k):
        """What multiplies the N(0, 1/d_model) draws of ``W_Q`` and ``W_K``.

        Examples
        --------
        >>> Setting(gain=2.0).qk_std_factor(64)
        2.0
        >>> Setting(qk_width_power=-0.25).qk_std_factor(16)
        0.5
        """
        return float(self.gain * d_k**self.qk_width_power)

    def heads(self, d_k):
        """How many heads of width ``d_k`` fill ``d_model`` (``d_k = d_model / h``).

        Examples
        --------
        >>> [Setting().heads(d) for d in WIDTHS]
        [16, 4, 1]
        """
        d_k = positive_int(d_k, "d_k")
        if self.d_model % d_k:
            raise ValueError(f"d_k must divide d_model = {self.d_model}, got {d_k}")
        return self.d_model // d_k


class History(NamedTuple):
    """One training run, one entry per step (before that step's update).

    ``loss`` is the batch's mean cross-entropy in nats, ``accuracy`` the
    fraction of queries whose top logit is the right value, ``entropy`` the
    mean entropy of the query's attention row in nats, ``match_weight`` the
    mean attention weight on the pair the query asks for,
    ``one_hot`` the share of queries whose top weight is at least
    :data:`ONE_HOT`, ``wrong_top`` the share whose top weight lands on a
    wrong key (any pair but the asked one), ``wrong_one_hot`` the share
    whose top weight does both, and ``grad_norm_q`` the Frobenius norm of
    the loss's gradient with respect to ``W_Q``.
    """

    loss: np.ndarray
    accuracy: np.ndarray
    entropy: np.ndarray
    match_weight: np.ndarray
    one_hot: np.ndarray
    wrong_top: np.ndarray
    wrong_one_hot: np.ndarray
    grad_norm_q: np.ndarray


def init_score_std(d_k, scale, setting=Setting()):
    """Standard deviation of the scaled scores at initialisation.

    Query coordinates are sums of ``d_model`` products of an N(0, 1)
    embedding coordinate and an N(0, c²/d_model) weight, with ``c`` from
    :meth:`Setting.qk_std_factor`, so they have variance ``c²``; a pair's
    embedding is the sum of two, so its key coordinates have variance
    ``2 c²``. Then ``q·k`` has standard deviation ``√(2 d_k) c²`` (the
    random model's ``√d_k``, with these variances), times the scale.

    Examples
    --------
    >>> print(f"{init_score_std(64, 'none'):.2f} {init_score_std(64, 'sqrt'):.3f}")
    11.31 1.414
    >>> matched = Setting(qk_width_power=-0.25)
    >>> print(f"{init_score_std(64, 'none', matched):.3f}")
    1.414
    """
    c = setting.qk_std_factor(d_k)
    return float(scale_factor(scale, d_k) * np.sqrt(2 * d_k) * c**2)


def init_params(d_k, rng, setting=Setting()):
    """Initial weights of one model: embeddings N(0, 1), matrices N(0, c²/fan_in).

    ``c`` is 1 except for ``W_Q`` and ``W_K``, where it is
    :meth:`Setting.qk_std_factor`. ``rng`` is a pair of generators: the
    first draws everything whose shape does not depend on ``d_k``, so that
    the arms of one seed share it; the second draws ``W_Q`` and ``W_K``, so
    that the arms of one seed and width share their standard normals.

    Examples
    --------
    >>> rngs = (np.random.default_rng(0), np.random.default_rng(1))
    >>> params = init_params(64, rngs)
    >>> params["w_q"].shape
    (256, 64)
    """
    shared, per_width = rng
    task, d = setting.task, setting.d_model
    params = {
        "key_embedding": shared.standard_normal((task.n_keys, d)),
        "value_embedding": shared.standard_normal((task.n_values, d)),
        "w_v": shared.standard_normal((d, setting.d_v)) / np.sqrt(d),
        "w_out": shared.standard_normal((setting.d_v, task.n_values))
        / np.sqrt(setting.d_v),
    }
    factor = setting.qk_std_factor(d_k) / np.sqrt(d)
    for name in ("w_q", "w_k"):
        params[name] = per_width.standard_normal((d, d_k)) * factor
    return {name: params[name] for name in PARAMETERS}


def sample_batch(rng, task=Task(), steps=None):
    """Recall problems: keys, values, the position asked for, and the target.

    The keys of a sequence are distinct; values may repeat. The query is one
    of the sequence's keys, and the target its value. With ``steps``, every
    array gets a leading axis of that length: one batch per step, drawn one
    after the other, so that the first batches do not depend on ``steps``
    (a short run sees the same batches as the start of a long one).

    Examples
    --------
    >>> keys, values, asked, target = sample_batch(np.random.default_rng(0))
    >>> bool(np.all(values[np.arange(16), asked] == target))
    True
    >>> short = sample_batch(np.random.default_rng(0), steps=2)[0]
    >>> long = sample_batch(np.random.default_rng(0), steps=5)[0]
    >>> bool(np.array_equal(short, long[:2]))
    True
    """
    if steps is not None:
        batches = [sample_batch(rng, task) for _ in range(steps)]
        return tuple(np.stack(arrays) for arrays in zip(*batches, strict=True))
    lead = (task.batch,)
    keys = np.argsort(rng.random((*lead, task.n_keys)), axis=-1)[..., : task.n_pairs]
    values = rng.integers(task.n_values, size=(*lead, task.n_pairs))
    asked = rng.integers(task.n_pairs, size=lead)
    target = np.take_along_axis(values, asked[..., None], axis=-1)[..., 0]
    return keys, values, asked, target


def scaled_scores(params, batch, scale):
    """The query's scaled scores against its sequence's pairs.

    Same stacked arguments as :func:`gradients`; the scores that its
    attention call turns into weights.

    Returns
    -------
    numpy.ndarray, shape (models, batch, 1, n_pairs)

    Examples
    --------
    >>> rngs = (np.random.default_rng(0), np.random.default_rng(1))
    >>> params = {n: p[None] for n, p in init_params(16, rngs).items()}
    >>> batch = [a[None] for a in sample_batch(np.random.default_rng(2))]
    >>> scaled_scores(params, batch, "sqrt").shape
    (1, 16, 1, 8)
    """
    keys, values, asked, _ = batch
    n_models, n_batch = keys.shape[:2]
    d_k = params["w_q"].shape[2]
    scale_factor(scale, d_k)  # one of the experiment's scales, which only multiply
    rows = np.arange(n_models)[:, None]
    asked_keys = np.take_along_axis(keys, asked[..., None], -1)[..., 0]
    query = params["key_embedding"][rows, asked_keys]  # (models, batch, d_model)
    flat_keys = keys.reshape(n_models, -1)
    flat_values = values.reshape(n_models, -1)
    # Project the vocabularies, then look the pairs up: a pair's key is the
    # sum of its key's and its value's projected embeddings.
    key_table = params["key_embedding"] @ params["w_k"]
    value_table = params["value_embedding"] @ params["w_k"]
    k = key_table[rows, flat_keys] + value_table[rows, flat_values]
    k = k.reshape(n_models, n_batch, -1, d_k)
    q = (query @ params["w_q"])[:, :, None, :]
    return scales.scaled_scores(q, k, scale)


def gradients(params, batch, scale):
    """Loss, gradients of every parameter, and what the step measures.

    Every array has a leading axis of models trained side by side, which
    share only the shapes: ``params[name]`` has shape ``(models, ...)`` and
    the batch's arrays ``(models, batch, ...)``.

    Parameters
    ----------
    params : dict of numpy.ndarray
        :func:`init_params`' arrays, stacked along a new first axis.
    batch : tuple
        :func:`sample_batch`'s arrays, stacked along a new first axis.
    scale : {"sqrt", "none", "linear"}

    Returns
    -------
    loss : numpy.ndarray, shape (models,)
        Mean cross-entropy, nats.
    grads : dict of numpy.ndarray
        One per parameter, same shapes.
    stats : dict
        ``accuracy``, ``entropy`` (mean, nats) and ``match_weight`` (the
        mean weight on the asked pair), shape (models,);
        ``q``, ``k``, ``v``, ``d_out`` and ``scale``, the attention call's
        inputs; ``attention``, the :class:`sdpa_ref.Gradients` it returned.

    Examples
    --------
    >>> rngs = (np.random.default_rng(0), np.random.default_rng(1))
    >>> params = {n: p[None] for n, p in init_params(16, rngs).items()}
    >>> batch = [a[None] for a in sample_batch(np.random.default_rng(2))]
    >>> loss, grads, stats = gradients(params, batch, "sqrt")
    >>> grads["w_q"].shape
    (1, 256, 16)
    """
    keys, values, asked, target = batch
    n_models, n_batch = keys.shape[:2]
    n_keys = params["key_embedding"].shape[1]
    n_values = params["value_embedding"].shape[1]
    d_k = params["w_q"].shape[2]
    d_v = params["w_v"].shape[2]
    factor = scale_factor(scale, d_k)
    # Embedding lookups as one-hot products, so that their gradients are
    # products too (a scatter-add would loop in Python's time).
    # A pair's embedding is the sum of two rows of the stacked vocabularies,
    # so it is one row of pair_hot @ table, with two ones per row.
    table = np.concatenate([params["key_embedding"], params["value_embedding"]], axis=1)
    pair_hot = np.concatenate(
        [_one_hot(keys, n_keys), _one_hot(values, n_values)], axis=-1
    ).reshape(n_models, -1, n_keys + n_values)
    asked_hot = _one_hot(np.take_along_axis(keys, asked[..., None], -1)[..., 0], n_keys)
    query = asked_hot @ params["key_embedding"]  # (models, batch, d_model)

    def heads(x, width):  # (models, batch * n, width) -> (models, batch, n, width)
        return x.reshape(n_models, n_batch, -1, width)

    rows = np.arange(n_models)[:, None]
    key_rows = keys.reshape(n_models, -1)
    value_rows = values.reshape(n_models, -1) + n_keys

    def project(w):
        # Projecting the vocabularies' rows (48) costs less than projecting
        # the batch's pairs (128); then each pair adds up its two rows.
        projected = table @ w
        return projected[rows, key_rows] + projected[rows, value_rows]

    q = heads(query @ params["w_q"], d_k)  # one query per sequence
    k = heads(project(params["w_k"]), d_k)
    v = heads(project(params["w_v"]), d_v)
    out, weights = attention(q, k, v, scale=factor, return_weights=True)
    mixture = out[:, :, 0, :]
    logits = mixture @ params["w_out"]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, target[..., None], -1)[..., 0]
    loss = -picked.mean(axis=-1)

    # Cross-entropy's gradient with respect to the logits: softmax - one-hot.
    d_logits = (softmax(logits) - _one_hot(target, n_values)) / n_batch
    d_out = (d_logits @ np.swapaxes(params["w_out"], 1, 2))[:, :, None, :]
    att = attention_backward(q, k, v, d_out, scale=factor)

    def flat(x):  # (models, batch, n, width) -> (models, batch * n, width)
        return x.reshape(n_models, -1, x.shape[-1])

    def t(x):
        return np.swapaxes(x, 1, 2)

    d_q = flat(att.dq)
    # The chain rule through project(): to the vocabularies' rows, then to
    # the projection and to the rows' embeddings.
    d_table = np.zeros_like(table)
    grads = {}
    for name, d_proj in (("w_k", flat(att.dk)), ("w_v", flat(att.dv))):
        d_rows = t(pair_hot) @ d_proj
        grads[name] = t(table) @ d_rows
        d_table += d_rows @ t(params[name])
    d_table[:, :n_keys] += t(asked_hot) @ (d_q @ t(params["w_q"]))
    grads["key_embedding"] = d_table[:, :n_keys]
    grads["value_embedding"] = d_table[:, n_keys:]
    grads["w_q"] = t(query) @ d_q
    grads["w_out"] = t(mixture) @ d_logits
    grads = {name: grads[name] for name in PARAMETERS}
    weights = weights[:, :, 0, :]  # (models, batch, n_pairs)
    wrong = weights.argmax(axis=-1) != asked
    one_hot = weights.max(axis=-1) >= ONE_HOT
    stats = {
        "accuracy": (logits.argmax(axis=-1) == target).mean(axis=-1),
        "entropy": entropy(weights).mean(axis=-1),
        "match_weight": np.take_along_axis(weights, asked[..., None], -1)[..., 0].mean(
            axis=-1
        ),
        "one_hot": one_hot.mean(axis=-1),
        "wrong_top": wrong.mean(axis=-1),
        "wrong_one_hot": (wrong & one_hot).mean(axis=-1),
        "q": q,
        "k": k,
        "v": v,
        "d_out": d_out,
        "scale": factor,
        "attention": att,
    }
    return loss, grads, stats


def _one_hot(indices, n):
    return np.eye(n)[indices]


def _generators(seed):
    """Three independent streams for a seed: shared init, per-width init, data."""
    streams = np.random.SeedSequence([SEED, seed]).spawn(3)
    return [np.random.default_rng(s) for s in streams]


def _train_side_by_side(d_k, scale, models, steps, *, longer=None):
    """Train one model per ``(seed, setting)`` pair at once.

    The models share only shapes (their widths and task), so NumPy runs
    them as one stack; each has its own data, initialisation and learning
    rate, and its numbers do not depend on the others.

    Parameters
    ----------
    longer : tuple of (int, int), optional
        ``(index, total)``: after ``steps``, model ``index`` alone goes on
        from where it stands, with the same optimiser state and the next
        batches of its own data, to ``total`` steps.

    Returns
    -------
    histories : list of History
    score_steps : numpy.ndarray, shape (models,)
        How far the first Adam update moved each model's scaled scores on
        its first batch: their change's standard deviation.
    continued : History or None
        With ``longer``, that model's whole run, ``total`` steps; its first
        ``steps`` entries are its entries in ``histories``.
    """
    steps = positive_int(steps, "steps")
    inits, batches, streams = [], [], []
    for seed, setting in models:
        shared, per_width, data = _generators(seed)
        inits.append(init_params(d_k, (shared, per_width), setting))
        batches.append(sample_batch(data, setting.task, steps))
        streams.append(data)
    shapes = {name: inits[0][name].shape for name in PARAMETERS}
    flat = np.array(
        [np.concatenate([p[name].ravel() for name in PARAMETERS]) for p in inits]
    )
    data = [np.stack([b[i] for b in batches]) for i in range(4)]  # (models, steps, ...)
    lr = np.array([setting.lr for _, setting in models])[:, None]
    state = _AdamState(flat, shapes, lr)
    record, score_steps = state.run(data, scale, 0)
    histories = [History(*record[:, i]) for i in range(len(models))]
    if longer is None:
        return histories, score_steps, None
    index, total = longer
    if not (0 <= index < len(models)) or total <= steps:
        raise ValueError(
            f"longer must name one of the {len(models)} models and more than "
            f"{steps} steps, got {longer!r}"
        )
    seed, setting = models[index]
    more = sample_batch(streams[index], setting.task, total - steps)
    later, _ = state.select(index).run([a[None] for a in more], scale, steps)
    whole = np.concatenate([record[:, index : index + 1], later], axis=2)
    return histories, score_steps, History(*whole[:, 0])


class _AdamState:
    """Stacked parameters and Adam's moments, updated in place step by step.

    Every parameter is a view into one flat array per model, so that Adam
    updates them all in a few whole-array operations.
    """

    def __init__(self, flat, shapes, lr, moments=None):
        self.flat, self.shapes, self.lr = flat, shapes, lr
        self.first, self.second = (
            moments
            if moments is not None
            else (np.zeros_like(flat), np.zeros_like(flat))
        )
        self.params, offset = {}, 0
        for name in PARAMETERS:
            size = math.prod(shapes[name])
            block = flat[:, offset : offset + size]
            self.params[name] = block.reshape(len(flat), *shapes[name])
            offset += size
        assert all(np.shares_memory(p, flat) for p in self.params.values())

    def select(self, index):
        """A copy of model ``index`` alone, with its moments, to train further."""
        part = slice(index, index + 1)
        return _AdamState(
            self.flat[part].copy(),
            self.shapes,
            self.lr[part],
            (self.first[part].copy(), self.second[part].copy()),
        )

    def run(self, data, scale, start):
        """Adam steps ``start + 1`` onwards, one per batch of ``data``.

        Returns each step's :class:`History` fields, shape (fields, models,
        steps), and, if ``start`` is 0, the first step's score steps.
        """
        n_models, steps = self.flat.shape[0], data[0].shape[1]
        grad, work = np.zeros_like(self.flat), np.zeros_like(self.flat)
        first, second, flat = self.first, self.second, self.flat
        b1, b2, eps = ADAM["beta1"], ADAM["beta2"], ADAM["eps"]
        record = np.empty((len(History._fields), n_models, steps))
        score_steps = None
        for i in range(steps):
            t = start + i
            batch = [a[:, i] for a in data]
            loss, grads, stats = gradients(self.params, batch, scale)
            record[:, :, i] = (
                loss,
                stats["accuracy"],
                stats["entropy"],
                stats["match_weight"],
                stats["one_hot"],
                stats["wrong_top"],
                stats["wrong_one_hot"],
                np.sqrt((grads["w_q"] ** 2).sum(axis=(1, 2))),
            )
            if t == 0:
                before = stats["scale"] * (stats["q"] @ np.swapaxes(stats["k"], 2, 3))
            offset = 0
            for name in PARAMETERS:
                size = grads[name][0].size
                grad[:, offset : offset + size] = grads[name].reshape(n_models, -1)
                offset += size
            # Adam with bias correction, in the order of computation that Kingma
            # and Ba give after their Algorithm 1 (§2), in place. The moments are
            # kept divided by (1 - beta1) and (1 - beta2), which saves two passes
            # over the parameters; the constants move into the step and epsilon.
            step_size = self.lr * (np.sqrt(1 - b2 ** (t + 1)) / (1 - b1 ** (t + 1)))
            first *= b1
            first += grad
            second *= b2
            np.square(grad, out=work)
            second += work
            np.sqrt(second, out=work)
            work += eps / np.sqrt(1 - b2)
            np.divide(first, work, out=work)
            work *= step_size * ((1 - b1) / np.sqrt(1 - b2))
            flat -= work
            if t == 0:
                moved = scaled_scores(self.params, batch, scale) - before
                score_steps = moved.reshape(n_models, -1).std(axis=1)
        return record, score_steps


def train(d_k, scale, *, seed, steps=STEPS, setting=Setting()):
    """Train the recall model with Adam and record every step.

    Parameters
    ----------
    d_k : int
        Width of the queries and keys.
    scale : {"sqrt", "none", "linear"}
        Multiply ``q·k`` by ``1/√d_k``, 1 or ``1/d_k``.
    seed : int
        Fixes the initialisation and the batches. Arms with the same seed
        see the same batches and share every initial weight but ``W_Q`` and
        ``W_K``, whose shapes depend on ``d_k``; arms with the same seed and
        width share those too, up to :meth:`Setting.qk_std_factor`.
    steps : int
        Adam steps.
    setting : Setting
        Model size, learning rate and initialisation of ``W_Q`` and ``W_K``.

    Returns
    -------
    History
        Arrays of length ``steps``. The same arguments give identical arrays.

    Examples
    --------
    >>> h = train(16, "sqrt", seed=0, steps=3)
    >>> h.loss.shape
    (3,)
    >>> print(f"{h.entropy[0]:.2f} nats, at most {np.log(8):.2f}")
    1.61 nats, at most 2.08
    """
    scale_factor(scale, d_k)  # check the arguments before any work
    return _train_side_by_side(d_k, scale, [(seed, setting)], steps)[0][0]


def first_score_step(d_k, scale, *, seed, setting=Setting()):
    """How far the first Adam update moves the scaled scores.

    The standard deviation, over the first batch's rows and keys, of the
    change in the scaled scores that the first update makes. Adam's first
    step moves every weight with a nonzero gradient by almost exactly the
    learning rate, so this depends on the scale and the size of ``W_Q`` and
    ``W_K``, not on the size of the gradient.

    Examples
    --------
    Without the divisor the step is close to √64 = 8 times the scaled one:

    >>> scaled = first_score_step(64, "sqrt", seed=0)
    >>> print(f"{first_score_step(64, 'none', seed=0) / scaled:.1f}")
    7.8
    """
    scale_factor(scale, d_k)
    return float(_train_side_by_side(d_k, scale, [(seed, setting)], 1)[1][0])


def first_grad_ratios(d_k, scale, setting=Setting(), seeds=SEEDS):
    """``|∇W_Q|`` at initialisation over the 1/√d_k arm's, and why.

    For each seed, the gradient of the first batch's loss with respect to
    ``W_Q`` at the initial weights, the one the runs take their first step
    with (:func:`run_experiment`'s ``init_grad_ratio``), over the same for
    the 1/√d_k arm, which shares the seed's weights and batch. A query's
    gradient is ``scale · Σ_j (∂L/∂s_j) k_j``, so the ratio is the product
    of two factors: ``chain``, the ratio of the two scales, which the chain
    rule multiplies in (√d_k without the divisor), and
    ``through_softmax``, what is left: the ratio of what the score
    gradients, the upstream gradient passed through the softmax, make of
    the same keys and queries.

    Returns
    -------
    dict
        ``ratio`` and ``through_softmax``, one per seed, and ``chain``, a
        float; ``ratio = chain · through_softmax``.

    Examples
    --------
    >>> r = first_grad_ratios(256, "none")
    >>> r["chain"]
    16.0
    >>> print(f"{r['ratio'].mean():.2f} = 16 x {r['through_softmax'].mean():.2f}")
    5.42 = 16 x 0.34
    """
    chain = scale_factor(scale, d_k) / scale_factor("sqrt", d_k)
    inits, batches = [], []
    for seed in seeds:
        shared, per_width, data = _generators(seed)
        inits.append(init_params(d_k, (shared, per_width), setting))
        batches.append(sample_batch(data, setting.task))
    params = {name: np.stack([p[name] for p in inits]) for name in PARAMETERS}
    batch = [np.stack([b[i] for b in batches]) for i in range(4)]

    def norms(name):
        grad = gradients(params, batch, name)[1]["w_q"]
        return np.sqrt((grad**2).sum(axis=(1, 2)))

    ratio = norms(scale) / norms("sqrt")
    ratio.setflags(write=False)
    return {"ratio": ratio, "chain": chain, "through_softmax": ratio / chain}


def _partitions(n, largest=None):
    """The ways to write ``n`` as a sum of positive parts, largest first."""
    largest = n if largest is None else largest
    if n == 0:
        yield ()
        return
    for part in range(min(n, largest), 0, -1):
        for rest in _partitions(n - part, part):
            yield (part, *rest)


def baselines(task=Task()):
    """Loss and accuracy of two models that ignore the query, computed exactly.

    *Chance* predicts every value with probability ``1 / n_values``: its
    loss is ``ln n_values`` and it is right once in ``n_values``.

    *Query-blind* is the best a model can do that sees the sequence's pairs
    but not which key the query repeats. The asked pair is uniform over the
    ``n_pairs`` positions, so the target is value ``v`` with probability
    ``c_v / n_pairs``, where ``c_v`` counts the pairs holding ``v``.
    Predicting exactly that distribution minimises the expected
    cross-entropy, which is then the entropy of the in-sequence frequencies;
    its top value is right with probability ``max_v c_v / n_pairs``. Both are
    averaged over the values a sequence can hold (independent and uniform,
    as :func:`sample_batch` draws them), grouped by their multiset of counts,
    an integer partition of ``n_pairs``, each with its exact probability.

    Returns
    -------
    dict
        ``chance_loss``, ``chance_accuracy``, ``blind_loss`` (nats) and
        ``blind_accuracy``.

    Examples
    --------
    >>> b = baselines()
    >>> print(f"{b['blind_loss']:.3f} nats, {b['blind_accuracy']:.1%}")
    1.798 nats, 25.8%
    >>> print(f"{b['chance_loss']:.3f} nats, {b['chance_accuracy']:.2%}")
    2.773 nats, 6.25%
    """
    n, n_values = task.n_pairs, task.n_values
    loss = accuracy = 0.0
    for counts in _partitions(n):
        if len(counts) > n_values:
            continue
        same_size = Counter(counts).values()
        # Distinct values for the groups, then the positions of each group.
        values = math.perm(n_values, len(counts)) // math.prod(
            math.factorial(m) for m in same_size
        )
        positions = math.factorial(n) // math.prod(math.factorial(c) for c in counts)
        p = values * positions / n_values**n
        freq = np.array(counts) / n
        loss += p * float(-(freq * np.log(freq)).sum())
        accuracy += p * counts[0] / n
    return {
        "chance_loss": float(np.log(n_values)),
        "chance_accuracy": 1 / n_values,
        "blind_loss": loss,
        "blind_accuracy": accuracy,
    }


class InitRows(NamedTuple):
    """Per-row quantities of the model at initialisation, one entry per row.

    ``score_spread`` is the standard deviation of the row's scaled scores
    (over its ``n_pairs`` keys, with ``n_pairs - 1`` in the denominator);
    ``jacobian_norm`` the Frobenius norm of the softmax Jacobian at the row's
    weights; ``grad_share`` the row's own term of ``|∇W_Q|²``,
    ``|x_b|² |δq_b|²`` (``x_b`` the query's embedding, ``δq_b`` its query's
    gradient), as a share of the sum of these terms over all the rows.
    """

    score_spread: np.ndarray
    jacobian_norm: np.ndarray
    grad_share: np.ndarray


def init_rows(d_k, scale, setting=Setting(), seeds=SEEDS, steps=STEPS):
    """Every row of the runs' batches, at the runs' initial weights.

    For each seed, the first ``steps`` batches that its runs train on, all
    seen by the initial model at once; the rows of all seeds, pooled.

    Returns
    -------
    InitRows
        Arrays of ``len(seeds) * steps * batch`` rows.

    Examples
    --------
    >>> rows = init_rows(16, "sqrt", seeds=(0,), steps=2)
    >>> rows.jacobian_norm.shape
    (32,)
    >>> print(f"{rows.grad_share.sum():.3f}")
    1.000
    """
    spreads, norms, terms = [], [], []
    for seed in seeds:
        shared, per_width, data = _generators(seed)
        init = init_params(d_k, (shared, per_width), setting)
        params = {name: array[None] for name, array in init.items()}
        batches = sample_batch(data, setting.task, steps)
        batch = [a.reshape(1, -1, *a.shape[2:]) for a in batches]
        _, _, stats = gradients(params, batch, scale)
        scores = stats["scale"] * (stats["q"] @ np.swapaxes(stats["k"], 2, 3))
        scores = scores[0, :, 0, :]
        spreads.append(scores.std(axis=-1, ddof=1))
        jacobians = softmax_jacobian(softmax(scores))
        norms.append(np.linalg.norm(jacobians, axis=(-2, -1)))
        keys, _, asked, _ = batch
        asked_keys = np.take_along_axis(keys, asked[..., None], -1)[0, :, 0]
        query = init["key_embedding"][asked_keys]
        dq = stats["attention"].dq[0, :, 0, :]
        terms.append((query**2).sum(axis=-1) * (dq**2).sum(axis=-1))
    terms = np.concatenate(terms)
    return InitRows(np.concatenate(spreads), np.concatenate(norms), terms / terms.sum())


def init_row_summary(rows, floor=JACOBIAN_FLOOR, top=TOP_ROWS):
    """Medians and shares that say how many rows carry the gradient.

    Parameters
    ----------
    rows : InitRows
    floor : float
        A Jacobian whose Frobenius norm is below ``floor`` counts as vanished.
    top : float
        The share of rows, those with the largest ``grad_share``, whose part
        of the summed ``grad_share`` is reported.

    Returns
    -------
    dict
        ``jacobian_median``; ``below_floor``, the share of rows under
        ``floor``; ``top_share``, the part of the sum carried by the top
        ``top`` of rows; ``spread_median``, ``spread_q1`` and
        ``spread_q3``, the median and quartiles of ``score_spread``.

    Examples
    --------
    >>> rows = InitRows(np.array([1.0, 2.0, 3.0, 4.0]),
    ...                 np.array([1e-5, 1e-4, 0.2, 0.4]),
    ...                 np.array([0.0, 0.1, 0.2, 0.7]))
    >>> s = init_row_summary(rows, top=0.25)
    >>> print(s["below_floor"], s["top_share"], s["spread_median"])
    0.5 0.7 2.5
    """
    n_top = max(1, round(top * rows.grad_share.size))
    largest = np.sort(rows.grad_share)[::-1][:n_top]
    q1, median, q3 = np.quantile(rows.score_spread, [0.25, 0.5, 0.75])
    return {
        "jacobian_median": float(np.median(rows.jacobian_norm)),
        "below_floor": float(np.mean(rows.jacobian_norm < floor)),
        "top_share": float(largest.sum() / rows.grad_share.sum()),
        "spread_median": float(median),
        "spread_q1": float(q1),
        "spread_q3": float(q3),
    }


def window_means(values, width):
    """Means over consecutive windows of ``width`` steps, along the last axis.

    One batch of 16 rows makes a noisy loss or accuracy; a window of ten
    steps averages 160 rows.

    Examples
    --------
    >>> window_means([3.0, 1.0, 2.0, 0.0], 2).tolist()
    [2.0, 1.0]
    """
    values = np.asarray(values, dtype=float)
    width = positive_int(width, "width")
    if values.shape[-1] % width:
        raise ValueError(
            f"width must divide the number of steps, got width={width} "
            f"for {values.shape[-1]} steps"
        )
    return values.reshape(*values.shape[:-1], -1, width).mean(axis=-1)


def final_rows(steps=STEPS, task=Task()):
    """How many fresh rows one seed's final loss and accuracy average over.

    The summary's final numbers are the mean over the last tenth of the
    steps, each a fresh batch.

    Examples
    --------
    >>> final_rows(150)
    240
    """
    return max(1, positive_int(steps, "steps") // 10) * task.batch


def blind_threshold(n_rows, level=0.01, task=Task()):
    """The accuracy over ``n_rows`` fresh rows that ignoring the query rarely beats.

    A model that does not use the query is right on each fresh row with
    probability at most the query-blind cap (:func:`baselines`), whatever it
    learned from earlier rows, so its number of right answers is at most
    binomial with that probability. This is the smallest accuracy ``k /
    n_rows`` such that such a count reaches ``k`` with probability below
    ``level``, computed exactly.

    Examples
    --------
    >>> print(f"{blind_threshold(240):.1%}")
    32.9%
    """
    n_rows = positive_int(n_rows, "n_rows")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    p = baselines(task)["blind_accuracy"]
    tail = 1.0  # P(count >= k), from k = 0 up
    for k in range(n_rows + 1):
        if tail < level:
            return k / n_rows
        tail -= math.comb(n_rows, k) * p**k * (1 - p) ** (n_rows - k)
    return 1.0


def runs_above_threshold(result, settings=None, level=0.01, scales=None):
    """How many runs show, by their final accuracy, that they use the query.

    A run counts if its final accuracy (the mean over the last tenth of the
    steps, :func:`final_rows` fresh rows) reaches :func:`blind_threshold`:
    a model that ignores the query gets there with probability below
    ``level``.

    Returns
    -------
    dict
        ``above`` and ``runs``, counted over ``settings`` and ``scales``
        (by default all), every width and seed; ``threshold``, the accuracy
        they are held to.

    Examples
    --------
    >>> r = run_experiment(widths=(16,), seeds=(0,), steps=10,
    ...                    settings={"main": Setting()})
    >>> c = runs_above_threshold(r)
    >>> print(c["above"], c["runs"], f"{c['threshold']:.1%}")
    0 3 56.2%
    """
    task = next(iter(result["settings"].values())).task
    steps = result["steps"]
    threshold = blind_threshold(final_rows(steps, task), level, task)
    tail = max(1, steps // 10)
    above = runs = 0
    for name in result["runs"] if settings is None else settings:
        for scale, by_width in result["runs"][name].items():
            if scales is not None and scale not in scales:
                continue
            for arrays in by_width.values():
                final = arrays["accuracy"][:, -tail:].mean(axis=1)
                above += int((final >= threshold).sum())
                runs += final.size
    return {"above": above, "runs": runs, "threshold": threshold}


def early_one_hot(result, setting, scale, d_k, steps=(11, 20)):
    """Rows gone one-hot early in training, and the part of them on a wrong key.

    Means over the seeds and over steps ``steps[0]`` to ``steps[1]``
    (counted from 1, both included) of :class:`History`'s ``one_hot`` and
    ``wrong_one_hot``.

    Returns
    -------
    dict
        ``one_hot`` and ``wrong_one_hot``, shares of all rows, and
        ``wrong_part``, their ratio (NaN if no row went one-hot).

    Examples
    --------
    >>> r = run_experiment(widths=(16,), seeds=(0,), steps=2,
    ...                    settings={"main": Setting()})
    >>> early_one_hot(r, "main", "linear", 16, steps=(1, 2))["one_hot"]
    0.0
    """
    first, last = steps
    arrays = result["runs"][setting][scale][d_k]
    one_hot = float(arrays["one_hot"][:, first - 1 : last].mean())
    wrong = float(arrays["wrong_one_hot"][:, first - 1 : last].mean())
    return {
        "one_hot": one_hot,
        "wrong_one_hot": wrong,
        "wrong_part": wrong / one_hot if one_hot else float("nan"),
    }


def long_run_summary(result):
    """The long run's accuracy where the grid stops, and at its own end.

    Each accuracy is a mean over a tenth of the steps, as in the summary:
    ``at_grid_end``, the last tenth of the grid's steps (the grid's own
    final number for that seed); ``final``, the last tenth of the long
    run; ``previous``, the tenth before it, which says whether it was still
    rising. ``rank_at_grid_end`` places the long run's seed among all the
    seeds of its arm at the end of the grid: 1 if none did better, so that
    a reader can tell whether the seed taken further was a typical one.

    Returns
    -------
    list of dict
        One per width: ``d_k``, ``at_grid_end``, ``previous``, ``final``,
        ``rank_at_grid_end``.

    Examples
    --------
    >>> r = run_experiment(widths=(16,), scales=("none",), seeds=(0,), steps=10,
    ...     settings={"main": Setting()}, long_run=LongRun("main", "none", 0, 2))
    >>> row = long_run_summary(r)[0]
    >>> row["d_k"], row["at_grid_end"] == r["summary"][0]["accuracy"]
    (16, True)
    >>> row["rank_at_grid_end"]
    1
    """
    long = result["long"]
    if long is None:
        raise ValueError("result has no long run: run_experiment(long_run=...)")
    grid_tail = max(1, result["steps"] // 10)
    tail = max(1, long["steps"] // 10)
    rows = []
    spec = long["run"]
    for d_k, arrays in long["runs"].items():
        accuracy = arrays["accuracy"]
        grid_end = result["steps"]
        at_grid_end = float(accuracy[grid_end - grid_tail : grid_end].mean())
        seeds = result["runs"][spec.setting][spec.scale][d_k]["accuracy"]
        seed_ends = seeds[:, grid_end - grid_tail : grid_end].mean(axis=1)
        rows.append(
            {
                "d_k": d_k,
                "at_grid_end": at_grid_end,
                "rank_at_grid_end": 1 + int((seed_ends > at_grid_end).sum()),
                "previous": float(accuracy[-2 * tail : -tail].mean()),
                "final": float(accuracy[-tail:].mean()),
            }
        )
    return rows


def init_qk_variances(d_k, setting=Setting(), seeds=SEEDS, steps=STEPS):
    """Measured variance of query and key coordinates at initialisation.

    The runs' own initial ``W_Q`` and ``W_K`` applied to every batch of the
    runs with these seeds, pooled. :func:`init_score_std` assumes
    ``c²`` for the queries and ``2 c²`` for the keys (a pair is the sum of
    two embeddings), with ``c`` from :meth:`Setting.qk_std_factor`.

    Returns
    -------
    tuple of float
        Variance of the query coordinates, then of the key coordinates.

    Examples
    --------
    >>> q, k = init_qk_variances(64, seeds=(0,), steps=4)
    >>> print(f"{q:.1f} {k:.1f}")
    0.9 2.0
    """
    queries, keys = [], []
    for seed in seeds:
        shared, per_width, data = _generators(seed)
        p = init_params(d_k, (shared, per_width), setting)
        key_ids, value_ids, asked, _ = sample_batch(data, setting.task, steps)
        pairs = p["key_embedding"][key_ids] + p["value_embedding"][value_ids]
        asked_ids = np.take_along_axis(key_ids, asked[..., None], -1)[..., 0]
        queries.append((p["key_embedding"][asked_ids] @ p["w_q"]).ravel())
        keys.append((pairs @ p["w_k"]).ravel())
    return float(np.concatenate(queries).var()), float(np.concatenate(keys).var())


def _row_amplitudes(d_k, scale, setting, *, norm, rows, n_rows):
    """``scale · √d_k · |J|`` per row of scores drawn at the predicted spread."""
    sizes = _jacobian_sizes(
        init_score_std(d_k, scale, setting), setting.task.n_pairs, norm, rows, n_rows
    )
    return scale_factor(scale, d_k) * np.sqrt(d_k) * sizes


@functools.lru_cache(maxsize=256)
def _jacobian_sizes(spread, n_pairs, norm, rows, n_rows):
    """The Jacobian's norm per row of scores stretched to ``spread``.

    Cached: the 1/√d_k arm has the same spread at every width, and the
    spectral norm takes an eigenvalue problem per row.
    """
    if rows == "page":
        base = standard_score_row(n_pairs)[None, :]
    else:
        base = np.random.default_rng(SEED).standard_normal((n_rows, n_pairs))
    weights = softmax(spread * base)
    if norm == "spectral":
        sizes = softmax_jacobian_norm(weights)
    else:
        sizes = np.linalg.norm(softmax_jacobian(weights), axis=(-2, -1))
    sizes.setflags(write=False)
    return sizes


def predicted_grad_ratio(
    d_k, scale, setting=Setting(), *, method="rms", n_rows=N_PRED_ROWS
):
    """The prediction of ``|∇W_Q|`` at init, relative to the √d_k arm's.

    The gradient is a sum over the batch's rows, ``∇W_Q = Σ_b x_b dq_bᵀ``
    (``x_b`` the query's embedding, ``dq_b`` its query's gradient). Its
    squared norm is ``Σ_b |x_b|² |dq_b|²`` plus cross terms between rows,
    which average to zero because different rows' ``dq`` are independent
    with mean zero; so ``|∇W_Q|`` grows like the *root mean square* of
    ``|dq_b|`` over rows, not like their mean. Each
    ``dq_b = scale · Σ_j (∂L/∂s_j) k_j``, and the score gradients are
    ``J g``: the upstream gradient ``g`` on the weights passed through the
    softmax Jacobian ``J``. With keys of equal length ``|k| ∝ √d_k`` in
    nearly orthogonal directions, ``|dq_b| ≈ scale · |k| · |J g|``, and for
    a ``g`` with independent entries of equal variance the mean of
    ``|J g|²`` is proportional to ``|J|_F²``, the squared Frobenius norm.
    The result is divided by the same quantity for the 1/√d_k arm at the
    same width and setting, so the constants all arms share cancel.

    Parameters
    ----------
    d_k : int
    scale : {"sqrt", "none", "linear"}
    setting : Setting
    method : {"rms", "rms-spectral", "mean-spectral", "page"}
        ``"rms"``, the derivation above: the root mean square of
        ``scale · √d_k · |J|_F`` over ``n_rows`` seeded rows of independent
        N(0, 1) scores, not standardised, stretched to the spread that
        :func:`init_score_std` predicts. ``"rms-spectral"`` uses the
        spectral norm, the most ``J`` can stretch any ``g``, instead;
        ``"mean-spectral"`` also averages instead of taking the root mean
        square. ``"page"`` is the saturation page's curve: one fixed row
        (:func:`sdpa_ref.random_model.standard_score_row`, standardised to mean 0 and
        standard deviation 1), stretched the same way, spectral norm.
    n_rows : int

    Examples
    --------
    >>> predicted_grad_ratio(64, "sqrt")
    1.0
    >>> print(f"{predicted_grad_ratio(256, 'none'):.2f}")
    6.18
    >>> print(f"{predicted_grad_ratio(256, 'none', method='mean-spectral'):.2f}")
    3.16
    >>> print(f"{predicted_grad_ratio(256, 'none', method='page'):.1e}")
    1.2e-08
    >>> print(f"{predicted_grad_ratio(256, 'linear'):.3f}")
    0.056
    """
    if method not in GRAD_METHODS:
        raise ValueError(f"method must be one of {GRAD_METHODS}, got {method!r}")
    norm = "frobenius" if method == "rms" else "spectral"
    rows = "page" if method == "page" else "random"

    def aggregate(name):
        a = _row_amplitudes(d_k, name, setting, norm=norm, rows=rows, n_rows=n_rows)
        return a.mean() if method == "mean-spectral" else np.sqrt((a**2).mean())

    return float(aggregate(scale) / aggregate("sqrt"))


def predicted_grad_ratio_band(
    d_k,
    scale,
    setting=Setting(),
    *,
    batch=None,
    quantiles=None,
    n_rows=N_PRED_ROWS,
):
    """How far one batch's ratio may stray from :func:`predicted_grad_ratio`.

    The measured ratio comes from one batch of ``batch`` rows, a few of
    which can carry most of the gradient. This splits the ``"rms"``
    method's rows into batches of that size, takes each batch's root mean
    square for both arms on the same rows (arms of one seed and width share
    ``W_Q`` and ``W_K``, so their scores are proportional), and returns the
    quantiles of the batches' ratios: by default the middle
    :data:`BAND_COVERAGE` of them.

    Examples
    --------
    >>> low, high = predicted_grad_ratio_band(256, "none")
    >>> print(f"{low:.2f} {high:.2f}")
    1.37 9.13
    """
    batch = setting.task.batch if batch is None else positive_int(batch, "batch")
    if quantiles is None:
        quantiles = ((1 - BAND_COVERAGE) / 2, (1 + BAND_COVERAGE) / 2)
    n_rows = n_rows // batch * batch
    if n_rows == 0:
        raise ValueError(f"n_rows must hold at least one batch of {batch}")

    def batch_rms(name):
        a = _row_amplitudes(
            d_k, name, setting, norm="frobenius", rows="random", n_rows=n_rows
        )
        return np.sqrt((a.reshape(-1, batch) ** 2).mean(axis=1))

    ratios = batch_rms(scale) / batch_rms("sqrt")
    return tuple(float(q) for q in np.quantile(ratios, quantiles))


def first_step_below(loss, threshold=ONE_NAT):
    """The first step (counting from 1) whose loss is at most ``threshold``.

    ``loss`` has steps along its last axis; a run that never gets there
    gives ``inf``.

    Examples
    --------
    >>> float(first_step_below([3.0, 1.2, 0.9, 1.1]))
    3.0
    >>> first_step_below([[3.0, 0.5], [3.0, 2.0]]).tolist()
    [2.0, inf]
    """
    below = np.asarray(loss) <= threshold
    steps = np.argmax(below, axis=-1) + 1.0
    return np.where(below.any(axis=-1), steps, np.inf)


class LongRun(NamedTuple):
    """One run of the grid continued past its steps, at every width.

    ``setting``, ``scale`` and ``seed`` name the run; it goes on, from where
    the grid leaves it, to ``factor`` times the grid's steps in all.
    """

    setting: str
    scale: str
    seed: int
    factor: int


#: The grid measures how fast each arm learns in a fixed budget of steps;
#: this run says what the slowest arm does after it: the main setting's
#: unscaled arm, first seed, to four times the steps.
LONG_RUN = LongRun("main", "none", 0, 4)


def run_experiment(
    widths=WIDTHS,
    scales=SCALES,
    seeds=SEEDS,
    steps=STEPS,
    *,
    settings=None,
    only=None,
    long_run=None,
):
    """Every arm, every seed, in every setting, and the time it took.

    Parameters
    ----------
    widths, scales, seeds, steps
        The grid.
    settings : dict of str to Setting, optional
        Named settings; by default :data:`DEFAULT_SETTINGS`: the main one,
        a smaller learning rate, and the control whose unscaled scores start
        where the 1/√d_k arm's do.
    only : dict of str to tuple of str, optional
        The scales a setting runs, if not all of ``scales``; by default
        :data:`ARM_SCALES` when ``settings`` is the default, else none.
    long_run : LongRun, optional
        One run to continue past ``steps`` at every width; by default
        :data:`LONG_RUN` when ``settings`` is the default, else none. It
        costs one model's steps beyond ``steps``: the grid's run is
        continued, not repeated.

    Returns
    -------
    dict
        ``runs[setting][scale][d_k]`` is a dict of arrays of shape
        ``(len(seeds), steps)``, one per :class:`History` field, and
        ``score_step``, :func:`first_score_step` per seed;
        ``summary`` holds one row per setting and arm: for ``loss``,
        ``accuracy``, ``entropy`` and ``match_weight`` the mean over seeds
        of the mean of the last 10 % of steps, with ``_min`` and ``_max``
        over seeds; ``steps_to_1_nat_min`` and ``_max`` from
        :func:`first_step_below`; ``score_step`` (with ``_min`` and
        ``_max``), how far the first Adam step moved the scores; and the
        entropy and ``|∇W_Q|`` at step 1, with that gradient over the same
        seed's 1/√d_k arm's (``init_grad_ratio``, with ``_min`` and ``_max``;
        NaN where the setting has no such arm). ``prediction[method][setting][scale]``
        holds :func:`predicted_grad_ratio` per width for every
        :data:`GRAD_METHODS`, and ``prediction["band"][setting][scale]``
        :func:`predicted_grad_ratio_band`'s two quantiles per width, shape
        (2, widths), for the settings with a 1/√d_k arm; ``n_runs`` counts
        the runs; ``seconds`` is the wall time of the training. ``long`` is
        None without ``long_run``; with it, a dict of ``run`` (the
        :class:`LongRun`), ``steps`` (its steps in all) and ``runs[d_k]``,
        one array of that length per :class:`History` field, whose first
        ``steps`` entries are the grid's run.
    """
    if settings is None:
        settings = DEFAULT_SETTINGS
        only = ARM_SCALES if only is None else only
        long_run = LONG_RUN if long_run is None else long_run
    only = {} if only is None else only
    arm_scales = {name: tuple(only.get(name, scales)) for name in settings}
    if long_run is not None:
        long_run = LongRun(*long_run)
        if (
            long_run.setting not in settings
            or long_run.scale not in arm_scales[long_run.setting]
            or long_run.seed not in seeds
            or positive_int(long_run.factor, "long_run.factor") < 2
        ):
            raise ValueError(
                f"long_run must name a setting, scale and seed of the grid and "
                f"a factor of at least 2, got {long_run!r}"
            )
    long_runs = {}
    start = time.perf_counter()
    by_arm = {}
    n_runs = 0
    for scale in scales:
        names = [name for name in settings if scale in arm_scales[name]]
        models = [(seed, settings[name]) for name in names for seed in seeds]
        if not models:
            continue
        longer = None
        if long_run is not None and scale == long_run.scale:
            index = names.index(long_run.setting) * len(seeds)
            index += list(seeds).index(long_run.seed)
            longer = (index, long_run.factor * steps)
        for d_k in widths:
            histories, score_steps, continued = _train_side_by_side(
                d_k, scale, models, steps, longer=longer
            )
            if continued is not None:
                long_runs[d_k] = {f: getattr(continued, f) for f in History._fields}
            n_runs += len(models)
            for i, name in enumerate(names):
                part = slice(i * len(seeds), (i + 1) * len(seeds))
                by_arm[name, scale, d_k] = (histories[part], score_steps[part])
    seconds = time.perf_counter() - start
    runs = {
        name: {
            scale: {
                d_k: {
                    **{
                        field: np.array(
                            [getattr(h, field) for h in by_arm[name, scale, d_k][0]]
                        )
                        for field in History._fields
                    },
                    "score_step": by_arm[name, scale, d_k][1],
                }
                for d_k in widths
            }
            for scale in arm_scales[name]
        }
        for name in settings
    }
    summary = [
        _summary_row(name, scale, d_k, by_scale, steps)
        for name, by_scale in runs.items()
        for scale in by_scale
        for d_k in widths
    ]
    predicted = [name for name in settings if "sqrt" in arm_scales[name]]
    prediction = {
        method: {
            name: {
                scale: np.array(
                    [
                        predicted_grad_ratio(d, scale, settings[name], method=method)
                        for d in widths
                    ]
                )
                for scale in arm_scales[name]
            }
            for name in predicted
        }
        for method in GRAD_METHODS
    }
    prediction["band"] = {
        name: {
            scale: np.array(
                [predicted_grad_ratio_band(d, scale, settings[name]) for d in widths]
            ).T
            for scale in arm_scales[name]
        }
        for name in predicted
    }
    return {
        "runs": runs,
        "summary": summary,
        "prediction": prediction,
        "widths": tuple(widths),
        "scales": tuple(scales),
        "seeds": tuple(seeds),
        "steps": steps,
        "n_runs": n_runs,
        "settings": dict(settings),
        "seconds": seconds,
        "long": None
        if long_run is None
        else {
            "run": long_run,
            "steps": long_run.factor * steps,
            "runs": long_runs,
        },
    }


def _summary_row(name, scale, d_k, by_scale, steps):
    arrays = by_scale[scale][d_k]
    tail = max(1, steps // 10)
    row = {"setting": name, "scale": scale, "d_k": d_k}
    for field in ("loss", "accuracy", "entropy", "match_weight"):
        final = arrays[field][:, -tail:].mean(axis=1)
        row[field] = float(final.mean())
        row[f"{field}_min"] = float(final.min())
        row[f"{field}_max"] = float(final.max())
    reached = first_step_below(arrays["loss"], ONE_NAT)
    row["steps_to_1_nat_min"] = float(reached.min())
    row["steps_to_1_nat_max"] = float(reached.max())
    first_step = arrays["score_step"]
    row["score_step"] = float(first_step.mean())
    row["score_step_min"] = float(first_step.min())
    row["score_step_max"] = float(first_step.max())
    row["init_grad_norm_q"] = float(arrays["grad_norm_q"][:, 0].mean())
    row["init_entropy"] = float(arrays["entropy"][:, 0].mean())
    ratio = _init_grad_ratios(by_scale, d_k, arrays)
    row["init_grad_ratio"] = float(ratio.mean())
    row["init_grad_ratio_min"] = float(ratio.min())
    row["init_grad_ratio_max"] = float(ratio.max())
    return row


def _init_grad_ratios(runs_of_setting, d_k, arrays):
    """Per seed, |∇W_Q| at step 1 over the same seed's 1/√d_k arm's."""
    if "sqrt" not in runs_of_setting:
        return np.full(len(arrays["grad_norm_q"]), np.nan)
    reference = runs_of_setting["sqrt"][d_k]["grad_norm_q"][:, 0]
    return arrays["grad_norm_q"][:, 0] / reference


def arm_range(summary, setting, scale, field, widths=None):
    """The lowest ``field_min`` and highest ``field_max`` of an arm over widths.

    Examples
    --------
    >>> rows = [{"setting": "main", "scale": "sqrt", "d_k": d, "loss_min": lo,
    ...          "loss_max": hi} for d, lo, hi in [(16, 0.1, 0.3), (64, 0.2, 0.5)]]
    >>> arm_range(rows, "main", "sqrt", "loss")
    (0.1, 0.5)
    """
    rows = [
        r
        for r in summary
        if r["setting"] == setting
        and r["scale"] == scale
        and (widths is None or r["d_k"] in widths)
    ]
    if not rows:
        raise ValueError(f"no rows for setting {setting!r} and scale {scale!r}")
    return (
        min(r[f"{field}_min"] for r in rows),
        max(r[f"{field}_max"] for r in rows),
    )


def measured_grad_ratios(result, setting, scale):
    """Per width and seed, ``|∇W_Q|`` at step 1 over the same seed's 1/√d_k arm's.

    Returns
    -------
    numpy.ndarray, shape (widths, seeds)

    Examples
    --------
    >>> r = run_experiment(widths=(16,), seeds=(0,), steps=1,
    ...                    settings={"main": Setting()})
    >>> measured_grad_ratios(r, "main", "sqrt")
    array([[1.]])
    """
    runs = result["runs"][setting]
    return np.array(
        [
            runs[scale][d]["grad_norm_q"][:, 0] / runs["sqrt"][d]["grad_norm_q"][:, 0]
            for d in result["widths"]
        ]
    )


def grad_ratio_checks(result, settings=("main",), scales=("none", "linear")):
    """How the ``"rms"`` prediction and its band meet the measured ratios.

    Returns
    -------
    dict
        ``cases``, the (setting, scale, width) triples; ``inside_range``,
        how many have :func:`predicted_grad_ratio` between their lowest and
        highest seed; ``inside_by_method``, the same count for each of
        :data:`GRAD_METHODS`, so that a reader can see whether the measured
        ratios tell the predictions apart; ``ratios``, how many measured
        ratios there are, and ``outside_band``, how many of them lie outside
        :func:`predicted_grad_ratio_band`'s quantiles.

    Examples
    --------
    >>> r = run_experiment(widths=(16,), seeds=(0, 1), steps=1,
    ...                    settings={"main": Setting()})
    >>> checks = grad_ratio_checks(r, settings=("main",))
    >>> checks["cases"], checks["ratios"]
    (2, 4)
    """
    cases = ratios = outside = 0
    inside = dict.fromkeys(GRAD_METHODS, 0)
    for name in settings:
        for scale in scales:
            measured = measured_grad_ratios(result, name, scale)
            low, high = result["prediction"]["band"][name][scale]
            for i, seeds in enumerate(measured):
                cases += 1
                for method in GRAD_METHODS:
                    predicted = result["prediction"][method][name][scale][i]
                    inside[method] += int(seeds.min() <= predicted <= seeds.max())
                ratios += seeds.size
                outside += int(((seeds < low[i]) | (seeds > high[i])).sum())
    return {
        "cases": cases,
        "inside_range": inside["rms"],
        "inside_by_method": inside,
        "ratios": ratios,
        "outside_band": outside,
    }


#: The main setting (Adam's suggested learning rate, 0.001), a smaller
#: learning rate, and the control, whose ``W_Q`` and ``W_K`` are d_k^(-1/4)
#: times the main ones, so that unscaled scores start exactly where the main
#: 1/√d_k arm's start.
DEFAULT_SETTINGS = {
    "main": Setting(),
    "smaller lr": Setting(lr=3e-4),
    "matched init": Setting(qk_width_power=-0.25),
}
#: The scales each of the other settings runs; the smaller learning rate
#: compares the two divisors, the control runs only the unscaled arm.
ARM_SCALES = {"smaller lr": ("sqrt", "linear"), "matched init": ("none",)}
