r"""Attention at a finite logit scale: how far random initial logits take a layer from uniform.

Chapter :ref:`ch-born-scales`.  The seed theory assumes that at initialization every logit of a
causal attention row is equal, so row :math:`i` averages keys :math:`1..i` with weight
:math:`1/i` (the Cesàro matrix :math:`M`).  A real initialiser draws the query and key matrices
at random, so the logits are random too.  This module measures the consequence in three pieces.

1. **The logit scale** (:func:`logit_scale`, exact).  In a pre-norm block without QK-norm the
   input of the attention has norm :math:`\sqrt d`; with :math:`W_q, W_k` drawn iid
   :math:`N(0, \sigma_q^2)`, :math:`N(0, \sigma_k^2)`, a logit
   :math:`\mathrm{scale}\cdot q \cdot k` has mean 0 and standard deviation
   :math:`g = \sigma_q \sigma_k\, d \sqrt{d_h}\, \mathrm{scale}`, which is :math:`\sigma^2 d`
   for the standard scale :math:`d_h^{-1/2}` whatever the head width.  With QK-norm (RMSNorm of
   each head's query and key, unit gain) it is :math:`\sqrt{d_h}\, \mathrm{scale}` whatever
   :math:`\sigma`.

2. **One softmax row** (:func:`participation_limit`, :func:`kl_limit`, exact large-:math:`n`
   limits; :func:`softmax_uniformity`, Monte Carlo at finite :math:`n`).  With :math:`n` iid
   :math:`N(0, g^2)` logits, the law of large numbers and :math:`E e^{s} = e^{g^2/2}`,
   :math:`E e^{2s} = e^{2g^2}`, :math:`E\, s e^{s} = g^2 e^{g^2/2}` give the participation
   ratio :math:`n_\mathrm{eff}/n = 1/(n \sum_j p_j^2) \to e^{-g^2}` and
   :math:`\mathrm{KL}(p \,\|\, \mathrm{uniform}) \to g^2/2` nats.

3. **The operator model** (:func:`random_rollout`).  Each of ``depth`` independent layers has a
   random causal attention matrix :math:`A_t` (softmax of iid Gaussian logits of std :math:`g`,
   with an optional per-key component shared by every query), mixed with the residual as
   :math:`R_t = (1-\alpha) I + \alpha A_t`; the last row of :math:`R_H \cdots R_1` is one random
   influence profile.  Because the logits of a row are exchangeable, :math:`E[A_t] = M` exactly,
   and the layers are independent, so the *mean* profile is the seed theory's
   :func:`~posbias_nb.theory.causal.influence` at every :math:`g`, exactly; :math:`g` only sets
   the scatter of one network's profile around it.

What is derived and what is modelled: piece 1 and the limits of piece 2 are exact consequences
of the stated distributions.  The iid-logit assumption behind pieces 2 and 3 is a *model*: real
logits of one query share its content and position (the same :math:`q` meets every key, and
tokens repeat), so real rows are not exchangeable and their scatter is not independent.

Pure numerics (numpy); nothing imports torch.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .._validate import nonnegative_float, positive_float, positive_int, unit_interval_float

__all__ = [
    "logit_scale",
    "participation_limit",
    "kl_limit",
    "softmax_uniformity",
    "random_rollout",
]

# entries of one work array of random_rollout (a batch of draws' packed lower triangles)
_BATCH_ENTRIES = 1 << 21
# a shift of the logits of a whole draw is used only while every row's max lies within this of
# the draw's max: exp(-_SHIFT) ~ 1e-304 stays a normal float64, so no row's largest term underflows
_SHIFT = 700.0


def _seed(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)) \
            or value < 0:
        raise ValueError(f"seed must be an integer >= 0, got {value!r}")
    return int(value)


def logit_scale(sigma_q, sigma_k, d: int, d_h: int, *, scale=None, qk_norm: bool = False) -> float:
    r"""Standard deviation :math:`g` of one attention logit at initialization.

    Chapter :ref:`ch-born-scales`.  The input of the attention is RMS-normalised (norm
    :math:`\sqrt d`, a pre-norm block), :math:`W_q, W_k \in \mathbb{R}^{d_h \times d}` are iid
    :math:`N(0, \sigma_q^2)` and :math:`N(0, \sigma_k^2)`, and the logit is
    :math:`\mathrm{scale}\cdot q \cdot k`.

    * Without QK-norm, given the inputs, :math:`q` and :math:`k` are independent with iid
      coordinates of variance :math:`\sigma_q^2 d` and :math:`\sigma_k^2 d`, so (exactly)
      :math:`g = \sigma_q \sigma_k\, d \sqrt{d_h}\, \mathrm{scale}`; for the standard
      :math:`\mathrm{scale} = d_h^{-1/2}` that is :math:`\sigma_q \sigma_k d`
      (:math:`\sigma^2 d`) whatever the head width.
    * With QK-norm (RMSNorm of each head's :math:`q` and :math:`k`, unit gain at init, its
      :math:`\epsilon` neglected), :math:`q` and :math:`k` are independent isotropic vectors of
      norm :math:`\sqrt{d_h}`, so :math:`q \cdot k = d_h \cos\theta` with
      :math:`E \cos^2\theta = 1/d_h`: :math:`g = \sqrt{d_h}\, \mathrm{scale}` whatever
      :math:`\sigma` (Gemma-3: :math:`\mathrm{scale}` = ``query_pre_attn_scalar ** -0.5``).  A
      zero :math:`\sigma` makes :math:`q` or :math:`k` zero, which RMSNorm keeps at zero: then
      :math:`g = 0`.

    Both are exact second moments; the logit itself is not Gaussian (a sum of :math:`d_h`
    products), which :func:`softmax_uniformity` and :func:`random_rollout` model it as.

    Parameters
    ----------
    sigma_q, sigma_k : float
        Standard deviations of the entries of :math:`W_q` and :math:`W_k`, finite and >= 0.
    d : int
        Model width (the residual stream), >= 1.
    d_h : int
        Head width, >= 1.
    scale : float, optional
        The logit's multiplier, > 0; default :math:`d_h^{-1/2}`.
    qk_norm : bool
        Whether queries and keys are RMS-normalised per head.

    Returns
    -------
    float
        :math:`g`, the standard deviation of a logit (its mean is 0).

    Raises
    ------
    ValueError
        For a negative or non-finite sigma, a width that is not an integer >= 1, or a scale
        that is not a positive finite number.

    Examples
    --------
    >>> round(logit_scale(0.02, 0.02, 4096, 128), 6)  # sigma^2 d
    1.6384
    >>> logit_scale(0.02, 0.02, 4096, 256, scale=256 ** -0.5, qk_norm=True)
    1.0
    """
    sq = nonnegative_float("sigma_q", sigma_q)
    sk = nonnegative_float("sigma_k", sigma_k)
    d = positive_int("d", d)
    d_h = positive_int("d_h", d_h)
    c = d_h ** -0.5 if scale is None else positive_float("scale", scale)
    if not isinstance(qk_norm, (bool, np.bool_)):
        raise ValueError(f"qk_norm must be True or False, got {qk_norm!r}")
    if qk_norm:
        return 0.0 if sq == 0.0 or sk == 0.0 else math.sqrt(d_h) * c
    return sq * sk * d * math.sqrt(d_h) * c


def participation_limit(g) -> float:
    r"""Large-:math:`n` limit of the participation ratio :math:`n_\mathrm{eff}/n` of a softmax row.

    Chapter :ref:`ch-born-scales`.  With :math:`n` iid logits :math:`s_j \sim N(0, g^2)` and
    :math:`p = \mathrm{softmax}(s)`, :math:`n_\mathrm{eff} = 1/\sum_j p_j^2` and

    .. math::

        \frac{n_\mathrm{eff}}{n}
        = \frac{\big(\tfrac1n \sum_j e^{s_j}\big)^2}{\tfrac1n \sum_j e^{2 s_j}}
        \to \frac{(E e^{s})^2}{E e^{2s}} = \frac{e^{g^2}}{e^{2 g^2}} = e^{-g^2}

    almost surely (law of large numbers).  Exact given iid Gaussian logits; that the logits are
    iid is the model (see the module docstring).

    Raises
    ------
    ValueError
        If ``g`` is not a finite number >= 0.

    Examples
    --------
    >>> participation_limit(0.0)
    1.0
    >>> round(participation_limit(1.0), 6)
    0.367879
    """
    g = nonnegative_float("g", g)
    return math.exp(-g * g)


def kl_limit(g) -> float:
    r"""Large-:math:`n` limit of the KL divergence (nats) of a softmax row from uniform.

    Chapter :ref:`ch-born-scales`.  With :math:`n` iid logits :math:`s_j \sim N(0, g^2)`,
    :math:`\mathrm{KL} = \sum_j p_j \log(n p_j)
    = \frac{\frac1n\sum_j s_j e^{s_j}}{\frac1n\sum_j e^{s_j}} - \log \frac1n \sum_j e^{s_j}
    \to \frac{E\, s e^{s}}{E e^{s}} - \log E e^{s} = g^2 - \frac{g^2}{2} = \frac{g^2}{2}`
    (Stein's lemma: :math:`E\, s e^{s} = g^2 E e^{s}`).  Exact given iid Gaussian logits; that
    the logits are iid is the model.

    Raises
    ------
    ValueError
        If ``g`` is not a finite number >= 0.

    Examples
    --------
    >>> kl_limit(1.0)
    0.5
    """
    g = nonnegative_float("g", g)
    return 0.5 * g * g


def softmax_uniformity(g, n: int, draws: int = 200, seed: int = 0) -> dict:
    r"""Monte Carlo uniformity of one softmax row of ``n`` iid :math:`N(0, g^2)` logits.

    Chapter :ref:`ch-born-scales`.  The finite-:math:`n` companion of
    :func:`participation_limit` (:math:`e^{-g^2}`) and :func:`kl_limit` (:math:`g^2/2`): their
    means over ``draws`` independent rows, with standard errors.  At finite :math:`n` both
    carry an :math:`O(1/n)` bias whose constant grows like :math:`e^{4g^2}`, so the limits are
    reached only for :math:`n \gg e^{4 g^2}`.  The iid Gaussian logits are the model.

    At ``g = 0`` the row is exactly uniform and the result is exactly ``1`` and ``0``.  The
    same arguments give the same numbers bit for bit (``np.random.default_rng(seed)``, draws
    in a fixed order).

    Parameters
    ----------
    g : float
        Standard deviation of a logit, finite and >= 0 (see :func:`logit_scale`).
    n : int
        Number of keys in the row, >= 1.
    draws : int
        Number of independent rows, >= 2.
    seed : int
        Seed of the generator, >= 0.

    Returns
    -------
    dict
        ``participation`` and ``participation_se``: mean and standard error of
        :math:`n_\mathrm{eff}/n = 1/(n\sum_j p_j^2)`; ``kl`` and ``kl_se``: those of
        :math:`\mathrm{KL}(p\,\|\,\mathrm{uniform})` in nats; ``participation_limit`` and
        ``kl_limit``: the large-:math:`n` limits; and ``g``, ``n``, ``draws``, ``seed``.

    Raises
    ------
    ValueError
        For ``g`` not finite and >= 0, ``n < 1``, ``draws < 2``, ``seed < 0`` (or any count
        that is not an integer).

    Examples
    --------
    >>> r = softmax_uniformity(0.0, 16, draws=4)
    >>> r["participation"], r["kl"]
    (1.0, 0.0)
    """
    g = nonnegative_float("g", g)
    n = positive_int("n", n)
    draws = positive_int("draws", draws, minimum=2)
    seed = _seed(seed)
    rng = np.random.default_rng(seed)
    part = np.empty(draws)
    kl = np.empty(draws)
    rows = max(1, _BATCH_ENTRIES // n)
    for lo in range(0, draws, rows):
        hi = min(draws, lo + rows)
        s = g * rng.standard_normal((hi - lo, n))
        s -= s.max(axis=1, keepdims=True)
        e = np.exp(s)
        z1 = e.sum(axis=1)
        z2 = (e * e).sum(axis=1)
        # n_eff / n = Z1^2 / (n Z2); KL = sum_j p_j s_j - log Z1 + log n (s shifted by its max)
        part[lo:hi] = z1 * z1 / (n * z2)
        kl[lo:hi] = (e * s).sum(axis=1) / z1 - np.log(z1) + math.log(n)
    return {
        "participation": float(part.mean()),
        "participation_se": float(part.std(ddof=1) / math.sqrt(draws)),
        "kl": float(kl.mean()),
        "kl_se": float(kl.std(ddof=1) / math.sqrt(draws)),
        "participation_limit": math.exp(-g * g),
        "kl_limit": 0.5 * g * g,
        "g": g, "n": n, "draws": draws, "seed": seed,
    }


def _layer_alphas(alpha, depth: int) -> list:
    if np.ndim(alpha) == 0 and not isinstance(alpha, (list, tuple)):
        return [unit_interval_float("alpha", alpha)] * depth
    alphas = [unit_interval_float("alpha", a) for a in alpha]
    if len(alphas) != depth:
        raise ValueError(f"alpha must be a number or one value per layer ({depth}), "
                         f"got {len(alphas)} values: {alpha!r}")
    return alphas


def random_rollout(L: int, depth: int, g, alpha=1.0, *, draws: int = 1, seed: int = 0,
                   shared=0.0) -> np.ndarray:
    r"""Influence rows of stacks of random causal attention layers: one row per draw.

    Chapter :ref:`ch-born-scales`.  For each draw, ``depth`` independent layers; in layer
    :math:`t` query :math:`i` (1-indexed) attends to keys :math:`1..i` with the softmax of the
    logits

    .. math::

        s_{ij} = g\,\big(\sqrt{1-\rho}\;\eta_{ij} + \sqrt{\rho}\;\xi_j\big),
        \qquad \eta_{ij}, \xi_j \text{ iid } N(0, 1),

    where :math:`\rho` = ``shared`` is the share of a per-layer, per-key component that every
    query sees (a "loud key" for everyone).  With :math:`R_t = (1-\alpha_t) I + \alpha_t A_t`,
    the result is the last row of :math:`R_H \cdots R_1`, computed by the row recursion
    :math:`v \leftarrow (1-\alpha_t) v + \alpha_t\, v A_t` from :math:`e_L`, top layer first;
    no product of two :math:`L \times L` matrices is ever formed.

    Exact: within a row the logits are exchangeable (iid given :math:`\xi`, and :math:`\xi`
    iid), so :math:`E[A_t] = M` (the Cesàro matrix), and :math:`v` is independent of
    :math:`A_t`; hence the mean row is the last row of
    :math:`\prod_t ((1-\alpha_t) I + \alpha_t M)`, which is
    :func:`~posbias_nb.theory.causal.influence` ``(L, depth, alpha)`` for a scalar ``alpha``,
    at every ``g`` and ``shared``.  At ``g = 0`` every draw equals it.  A model: that the
    logits are Gaussian and independent of content and position (real logits share both).

    Parameters
    ----------
    L : int
        Sequence length, >= 1.
    depth : int
        Number of layers, >= 0 (``0`` gives :math:`e_L`).
    g : float
        Standard deviation of a logit, finite and >= 0 (see :func:`logit_scale`).
    alpha : float or sequence of float
        Attention share of each layer in [0, 1]: one number, or ``depth`` numbers (layer 1,
        the input's, first).
    draws : int
        Number of independent stacks, >= 1.
    seed : int
        Seed, >= 0.  Draw ``k`` uses its own generator, spawned from
        ``np.random.SeedSequence(seed)``: the same arguments give the same array bit for bit,
        and the first rows do not depend on ``draws``.  The random numbers do not depend on
        ``g``, ``alpha`` or ``shared`` either (common random numbers across them).
    shared : float
        :math:`\rho \in [0, 1]`, the share of the logit variance common to all queries.

    Returns
    -------
    numpy.ndarray
        Shape ``(draws, L)``, float64; row ``k`` is draw ``k``'s influence (it sums to 1).

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0``, ``g`` not finite and >= 0, an ``alpha`` outside [0, 1]
        or of the wrong length, ``draws < 1``, ``seed < 0``, ``shared`` outside [0, 1].

    Examples
    --------
    >>> from posbias_nb.theory import influence
    >>> bool(np.allclose(random_rollout(8, 3, 0.0, 0.5)[0], influence(8, 3, 0.5)))
    True
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    g = nonnegative_float("g", g)
    alphas = _layer_alphas(alpha, depth)
    draws = positive_int("draws", draws)
    seed = _seed(seed)
    rho = unit_interval_float("shared", shared)

    # the causal lower triangle, packed row by row: entry (i, j), j <= i, at i(i+1)/2 + j
    lengths = np.arange(1, L + 1)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    T = int(L * (L + 1) // 2)
    cols = np.arange(T) - np.repeat(starts, lengths)
    c_eta, c_xi = g * math.sqrt(1.0 - rho), g * math.sqrt(rho)

    gens = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(draws)]
    out = np.empty((draws, L))
    batch = max(1, _BATCH_ENTRIES // T)
    for lo in range(0, draws, batch):
        b = min(draws, lo + batch) - lo
        v = np.zeros((b, L))
        v[:, -1] = 1.0
        s = np.empty((b, T))
        xi = np.empty((b, L))
        offsets = (np.arange(b) * L)[:, None]
        flat_cols = (cols[None, :] + offsets).ravel()
        for a in reversed(alphas):  # top layer first
            for k in range(b):
                gens[lo + k].standard_normal(out=s[k])
                gens[lo + k].standard_normal(out=xi[k])
            if a == 0.0:
                continue
            s *= c_eta
            if c_xi:
                s += c_xi * np.take(xi, cols, axis=1)
            # a stable softmax: shift each row by its max; when every row max lies within
            # _SHIFT of the draw's top, one shift per draw is as safe (no row underflows) and
            # spares a pass over the triangle
            m = np.maximum.reduceat(s, starts, axis=1)
            top = m.max(axis=1)
            if np.all(top - m.min(axis=1) < _SHIFT):
                s -= top[:, None]
            else:
                s -= np.repeat(m, lengths, axis=1)
            np.exp(s, out=s)
            w = v / np.add.reduceat(s, starts, axis=1)  # v_i / Z_i
            s *= np.repeat(w, lengths, axis=1)
            vA = np.bincount(flat_cols, weights=s.ravel(), minlength=b * L).reshape(b, L)
            v = vA if a == 1.0 else (1.0 - a) * v + a * vA
        out[lo:lo + b] = v
    return out
