r"""Layouts: one averaging operator per layer kind, and the born row of any stack of them.

Chapter :ref:`ch-layouts`.  A layer is full causal, sliding (window ``w``), chunked (chunk
``c``) or full with a sink logit ``s``; each acts on a row in :math:`O(L)` by block-wise
prefix sums in log space, mixed with the residual as :math:`(1-\alpha) I + \alpha K`.
:func:`layout_influence` of an all-full layout is :func:`posbias_nb.theory.causal.influence`.
Pure numerics; nothing imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.special import gammainc, gammaln

from .._validate import exact_fraction, positive_int, unit_interval_float
from .causal import _log_alpha_terms, binomial_weights, density
from .causal import influence  # noqa: F401  (the doctests compare with it)

__all__ = [
    "LAYER_KINDS",
    "Layer",
    "Layout",
    "parse_layout",
    "layer_matrix",
    "dense_last_row",
    "layout_influence",
    "log_layout_influence",
    "sliding_row",
    "irwin_hall_row",
    "sink_row",
    "sink_kept_mass",
    "hybrid_bulk_row",
]


LAYER_KINDS = ("full", "sliding", "chunked")


@dataclass(frozen=True)
class Layer:
    r"""One layer kind of a layout, at initialization (uniform attention over its keys).
    Chapter :ref:`ch-layouts`, :eq:`eq-layer-kernel`.

    Row :math:`i` (1-indexed) of the layer's averaging operator :math:`K` puts weight
    :math:`1/(n_i + e^s)` on each of its :math:`n_i` keys (:eq:`eq-layer-kernel`):

    * ``"full"``: keys :math:`1..i`;
    * ``"sliding"`` with window ``size`` :math:`w`: the last :math:`w` keys,
      :math:`\max(1, i-w+1)..i`, self included;
    * ``"chunked"`` with chunk ``size`` :math:`c`: the keys of :math:`i`'s chunk up to :math:`i`,
      :math:`c\lfloor (i-1)/c \rfloor + 1 .. i`.

    ``sink`` is the logit :math:`s` of a learned attention sink (GPT-OSS): a key with no value
    that takes :math:`e^s/(n_i + e^s)` of row :math:`i`, so the row sums to less than 1.  ``None``:
    no sink (the row sums to 1).

    Raises
    ------
    ValueError
        An unknown kind (named), a window or chunk below 1, a size given to ``"full"`` or
        missing for the others, a sink logit that is not finite.
    """

    kind: str = "full"
    size: int | None = None
    sink: float | None = None

    def __post_init__(self):
        if self.kind not in LAYER_KINDS:
            raise ValueError(f"unknown layer kind {self.kind!r}: use one of "
                             f"{', '.join(LAYER_KINDS)}")
        if self.kind == "full":
            if self.size is not None:
                raise ValueError(f"a full layer takes no size, got {self.size!r}")
        else:
            if self.size is None:
                raise ValueError(f"a {self.kind} layer needs its size (window or chunk)")
            object.__setattr__(self, "size", positive_int(f"{self.kind} size", self.size))
        if self.sink is not None:
            s = float(self.sink)
            if not np.isfinite(s) or abs(s) > 700:
                raise ValueError(f"a sink logit must be finite and at most 700 in size (e^s "
                                 f"in float64), got {self.sink!r}")
            object.__setattr__(self, "sink", s)

    def __str__(self) -> str:
        out = self.kind if self.size is None else f"{self.kind}:{self.size}"
        return out if self.sink is None else f"{out}@{self.sink!r}"  # repr: round-trips


_FULL = Layer()


@dataclass(frozen=True)
class Layout:
    """The layers of a model, from the input (layer 1) to the output, as :class:`Layer` kinds
    (chapter :ref:`ch-layouts`).

    ``str(layout)`` writes the compact form that :func:`parse_layout` reads (runs of equal
    layers as ``N*kind``).  ``Layout.full(H)`` is the seed papers' layout.
    """

    layers: tuple

    def __post_init__(self):
        layers = tuple(self.layers)
        if not layers:
            raise ValueError("a layout needs at least one layer")
        for x in layers:
            if not isinstance(x, Layer):
                raise ValueError(f"a layout's layers are theory.Layer objects, got {x!r}")
        object.__setattr__(self, "layers", layers)

    @classmethod
    def full(cls, depth: int) -> "Layout":
        return cls((_FULL,) * positive_int("depth", depth))

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def depth(self) -> int:
        return len(self.layers)

    @property
    def n_full(self) -> int:
        """Layers that reach the whole prefix (full, with or without a sink)."""
        return sum(x.kind == "full" for x in self.layers)

    def reach(self) -> int | None:
        """How far back (in tokens) the last position can be influenced; None: unbounded.

        Sliding layers reach :math:`w-1` each; a full layer reaches everything; a chunked
        layer reaches back to its chunk start, which depends on the position (None).
        """
        if any(x.kind != "sliding" for x in self.layers):
            return None
        return sum(x.size - 1 for x in self.layers)

    def __str__(self) -> str:
        parts, run = [], []
        for x in self.layers:
            if run and x != run[-1]:
                parts.append(_run_text(run))
                run = []
            run.append(x)
        parts.append(_run_text(run))
        return ",".join(parts)


def _run_text(run) -> str:
    return str(run[0]) if len(run) == 1 else f"{len(run)}*{run[0]}"


def _parsed(part: str, cast, what: str, text: str):
    """``cast(part)``, or a ValueError naming the bad part of layout ``text``."""
    try:
        return cast(part)
    except ValueError:
        raise ValueError(f"bad {what} {part!r} in layout {text!r}") from None


def parse_layout(spec, depth: int | None = None) -> Layout:
    """Read a layout from its compact text: comma-separated items ``[N*]kind[:size][@sink]``
    (chapter :ref:`ch-layouts`).

    ``kind`` is ``full``, ``sliding`` (``size`` = window) or ``chunked`` (``size`` = chunk);
    ``@s`` adds a sink of logit ``s``.  With ``depth`` the pattern is repeated, layer by layer,
    until it has ``depth`` layers (cut where ``depth`` ends, as Gemma's ``layer_types``), so
    ``parse_layout("5*sliding:512,full", 18)`` is Gemma-3-270M's layout.

    Raises
    ------
    ValueError
        An empty spec or item, an unknown kind (named), a bad count, size or sink.

    Examples
    --------
    >>> str(parse_layout("sliding:4,full", depth=5))
    'sliding:4,full,sliding:4,full,sliding:4'
    >>> parse_layout("2*chunked:8@0.5").layers[1]
    Layer(kind='chunked', size=8, sink=0.5)
    """
    if isinstance(spec, Layout):
        pattern = list(spec.layers)
    else:
        text = str(spec).strip()
        if not text:
            raise ValueError("empty layout: write e.g. 'full', 'sliding:64' or "
                             "'5*sliding:512,full'")
        pattern = []
        for item in text.split(","):
            item = item.strip()
            if not item:
                raise ValueError(f"empty item in layout {text!r}")
            count, sink, size = 1, None, None
            if "*" in item:
                n, item = item.split("*", 1)
                count = positive_int("layer count", _parsed(n, int, "layer count", text))
            if "@" in item:
                item, sv = item.split("@", 1)
                sink = _parsed(sv, float, "sink logit", text)
            kind = item
            if ":" in item:
                kind, sz = item.split(":", 1)
                size = _parsed(sz, int, "size", text)
            pattern += [Layer(kind.strip(), size, sink)] * count
    if depth is not None:
        depth = positive_int("depth", depth)
        pattern = [pattern[i % len(pattern)] for i in range(depth)]
    return Layout(tuple(pattern))


def _as_layout(layout, name: str = "layout") -> Layout:
    if isinstance(layout, Layout):
        return layout
    if isinstance(layout, Layer):
        return Layout((layout,))
    if isinstance(layout, str):
        return parse_layout(layout)
    raise ValueError(f"{name} must be a theory.Layout, a Layer or a layout string, got "
                     f"{layout!r}")


def _keys(layer: Layer, L: int) -> np.ndarray:
    """Number of keys n_i of each row i = 1..L (int array)."""
    i = np.arange(1, L + 1)
    if layer.kind == "full":
        return i
    if layer.kind == "sliding":
        return np.minimum(i, layer.size)
    return i - layer.size * ((i - 1) // layer.size)


def layer_matrix(layer, L: int, exact: bool = False):
    r"""The dense :math:`L \times L` averaging operator of one layer kind, :eq:`eq-layer-kernel`
    (chapter :ref:`ch-layouts`).

    For tests and small figures (``O(L^2)``); :func:`layout_influence` never forms it.
    ``exact=True``: a list of lists of :class:`fractions.Fraction` (a sink's :math:`e^s` is
    taken as the exact rational value of its float64).
    """
    if not isinstance(layer, Layer):
        lay = _as_layout(layer)
        if lay.depth != 1:
            raise ValueError(f"layer_matrix takes one layer, got a layout of {lay.depth}: "
                             f"{lay}")
        layer = lay.layers[0]
    L = positive_int("L", L)
    n = _keys(layer, L)
    c = 0.0 if layer.sink is None else float(np.exp(layer.sink))
    if exact:
        cf = Fraction(c)
        K = [[Fraction(0)] * L for _ in range(L)]
        for i in range(L):
            w = 1 / (int(n[i]) + cf)
            for j in range(i - int(n[i]) + 1, i + 1):
                K[i][j] = w
        return K
    K = np.zeros((L, L))
    for i in range(L):
        K[i, i - n[i] + 1:i + 1] = 1.0 / (n[i] + c)
    return K


def dense_last_row(layout, L: int, alpha) -> list:
    r"""The last row of the dense product :math:`\prod_t ((1-\alpha) I + \alpha K_t)` of a
    layout's layers, in exact rationals: the :math:`O(L^2 H)` oracle that chapter
    :ref:`ch-layouts` holds :func:`layout_influence` (``exact=True``) to, built from each
    layer's dense matrix (:func:`layer_matrix`) and nothing of the prefix-sum code.

    ``layout`` is a :class:`Layout` or its text (:func:`parse_layout`); ``alpha`` an exact
    rational in :math:`[0, 1]` (a :class:`fractions.Fraction`, an int, or a string such as
    ``"2/7"``).  Returns a list of ``L`` :class:`fractions.Fraction`.

    Raises
    ------
    ValueError
        A bad layout, ``L < 1``, or ``alpha`` outside :math:`[0, 1]` or not exact.

    >>> dense_last_row("2*full", 3, 1)
    [Fraction(11, 18), Fraction(5, 18), Fraction(1, 9)]
    """
    lay = _as_layout(layout)
    L = positive_int("L", L)
    a = exact_fraction("alpha", alpha)
    v = [Fraction(0)] * (L - 1) + [Fraction(1)]
    for layer in reversed(lay.layers):
        K = layer_matrix(layer, L, exact=True)
        v = [(1 - a) * v[j] + a * sum(v[i] * K[i][j] for i in range(L)) for j in range(L)]
    return v


def _log_cumsum_blocks(u: np.ndarray, b: int, reverse: bool) -> np.ndarray:
    """Log of sums of exp(u) accumulated inside aligned blocks of ``b`` (no subtraction)."""
    n = len(u)
    pad = (-n) % b
    U = np.concatenate([u, np.full(pad, -np.inf)]).reshape(-1, b)
    if reverse:
        out = np.logaddexp.accumulate(U[:, ::-1], axis=1)[:, ::-1]
    else:
        out = np.logaddexp.accumulate(U, axis=1)
    return out.reshape(-1)[:n]


def _log_denominators(layer: Layer, L: int, slope: float = 0.0) -> np.ndarray:
    r"""log of each row's normalizer: :math:`\ln(Z_i + e^s)`, :math:`Z_i = \sum_{d < n_i}
    e^{-m d}` (``n_i`` for slope :math:`m = 0`)."""
    n = _keys(layer, L).astype(float)
    if slope == 0.0:
        logz = np.log(n)
    else:
        logz = np.log(-np.expm1(-slope * n)) - np.log(-np.expm1(-slope))
    if layer.sink is None:
        return logz
    return np.logaddexp(logz, layer.sink)


def _log_apply(log_v: np.ndarray, layer: Layer, slope: float = 0.0) -> np.ndarray:
    r"""log of :math:`v K` for the row vector :math:`v = e^{\log v}`, in O(L).

    :math:`(vK)_j = \sum_{i \in R_j} v_i e^{-m(i-j)} / (Z_i + e^s)` over the rows :math:`i`
    whose keys hold :math:`j`: all :math:`i \ge j` (full), :math:`j..j+w-1` (sliding),
    :math:`j`..the end of its chunk (chunked); :math:`m` is an ALiBi slope (0 at
    initialization: uniform weights).  Sums of non-negative terms only, in log space: suffix
    sums for full; block-wise suffix and prefix sums (the two pieces of a window that straddles a
    block border) for sliding and chunked, so no sum is ever a difference.
    """
    L = len(log_v)
    j = np.arange(L)
    with np.errstate(divide="ignore"):
        u = log_v - _log_denominators(layer, L, slope)
    if slope:
        u = u - slope * j
    if layer.kind == "full":
        out = np.logaddexp.accumulate(u[::-1])[::-1]
    else:
        b = layer.size
        suffix = _log_cumsum_blocks(u, b, reverse=True)
        if layer.kind == "chunked":
            out = suffix
        else:  # window [j, j+w-1] = suffix of j's block + prefix of the next block to j+w-1
            prefix = _log_cumsum_blocks(np.concatenate([u, np.full(b, -np.inf)]), b,
                                        reverse=False)
            nxt = np.where(j % b == 0, -np.inf, prefix[j + b - 1])
            out = np.logaddexp(suffix, nxt)
    return out + slope * j if slope else out


def _exact_apply(v: list, layer: Layer) -> list:
    L = len(v)
    n = _keys(layer, L)
    c = Fraction(0) if layer.sink is None else Fraction(float(np.exp(layer.sink)))
    u = [v[i] / (int(n[i]) + c) for i in range(L)]
    suffix = [Fraction(0)] * (L + 1)  # suffix[j] = sum_{i >= j} u_i, exact
    for i in range(L - 1, -1, -1):
        suffix[i] = suffix[i + 1] + u[i]
    if layer.kind == "full":
        return suffix[:L]
    b = layer.size
    if layer.kind == "sliding":
        return [suffix[j] - suffix[min(j + b, L)] for j in range(L)]
    return [suffix[j] - suffix[min((j // b + 1) * b, L)] for j in range(L)]


def log_layout_influence(layout, L: int, alpha=1.0) -> np.ndarray:
    r"""Natural log of the last row of :math:`N_H \cdots N_1`,
    :math:`N_t = (1-\alpha) I + \alpha K_t`, for a layout of layer kinds (:eq:`eq-layout-row`).

    Chapter :ref:`ch-layouts`.  ``O(L)`` per layer, in log space, by block-wise prefix sums;
    ``alpha`` is a float or one value per layer.  Entries that are exactly zero (beyond a
    sliding stack's reach) come back as ``-inf``.
    """
    layout = _as_layout(layout)
    L = positive_int("L", L)
    alphas = _layer_alphas(alpha, layout.depth)
    v = np.full(L, -np.inf)
    v[-1] = 0.0
    with np.errstate(divide="ignore"):
        for layer, a in zip(reversed(layout.layers), reversed(alphas)):
            keep, mix = _log_alpha_terms(a)
            if a == 0.0:
                continue
            Kv = _log_apply(v, layer)
            v = Kv + mix if a == 1.0 else np.logaddexp(v + keep, Kv + mix)
    return v


def _layer_alphas(alpha, depth: int) -> list:
    if np.ndim(alpha) == 0 and not isinstance(alpha, (list, tuple)):
        return [unit_interval_float("alpha", alpha)] * depth
    alphas = [unit_interval_float("alpha", a) for a in alpha]
    if len(alphas) != depth:
        raise ValueError(f"alpha has {len(alphas)} values for a layout of {depth} layers")
    return alphas


def layout_influence(layout, L: int, alpha=1.0, exact: bool = False):
    r"""The born influence row of a layout: the last row of :math:`N_H \cdots N_1` with
    :math:`N_t = (1-\alpha) I + \alpha K_t` and :math:`K_t` the averaging operator of layer
    :math:`t`'s kind (:class:`Layer`, :eq:`eq-layer-kernel`, :eq:`eq-layout-row`).

    Chapter :ref:`ch-layouts`.  ``theory.influence(L, H, alpha)`` is the all-full case,
    ``layout_influence(Layout.full(H), L, alpha)``.

    Parameters
    ----------
    layout : Layout, Layer or str
        The layers from input to output (a string is read by :func:`parse_layout`).
    L : int
        Sequence length.
    alpha : float, or one per layer
        Attention share of each layer; with ``exact=True`` read as an exact fraction.
    exact : bool
        True: a list of :class:`fractions.Fraction` (exact rational arithmetic; a sink's
        :math:`e^s` is the exact value of its float64).  False: a float64 array, computed in log
        space, ``O(L)`` per layer (:func:`log_layout_influence`).

    Raises
    ------
    ValueError
        A bad layout, ``L < 1``, ``alpha`` outside [0, 1] or of the wrong length.

    Examples
    --------
    >>> layout_influence("2*sliding:2", 4, exact=True)
    [Fraction(0, 1), Fraction(1, 4), Fraction(1, 2), Fraction(1, 4)]
    >>> bool(np.allclose(layout_influence("3*full", 50, 0.5), influence(50, 3, 0.5)))
    True
    """
    if not exact:
        return np.exp(log_layout_influence(layout, L, alpha))
    layout = _as_layout(layout)
    L = positive_int("L", L)
    if np.ndim(alpha) == 0 and not isinstance(alpha, (list, tuple)):
        alphas = [exact_fraction("alpha", alpha)] * layout.depth
    else:
        alphas = [exact_fraction("alpha", a) for a in alpha]
        if len(alphas) != layout.depth:
            raise ValueError(f"alpha has {len(alphas)} values for a layout of "
                             f"{layout.depth} layers")
    v = [Fraction(0)] * L
    v[-1] = Fraction(1)
    for layer, a in zip(reversed(layout.layers), reversed(alphas)):
        Kv = _exact_apply(v, layer)
        v = [(1 - a) * x + a * y for x, y in zip(v, Kv)]
    return v


def _uniform_sum_pmf(m: int, w: int, exact: bool):
    """pmf of the sum of ``m`` independent uniforms on {0, ..., w-1}, k = 0..m(w-1).

    Exact: inclusion-exclusion, :math:`w^{-m}\\sum_r (-1)^r \\binom{m}{r}
    \\binom{k - rw + m - 1}{m - 1}`.  Float: repeated convolution with the box (non-negative
    sums only, no cancellation).
    """
    from math import comb

    n = m * (w - 1) + 1
    if exact:
        if m == 0:
            return [Fraction(1)]
        out = []
        for k in range(n):
            s = sum((-1) ** r * comb(m, r) * comb(k - r * w + m - 1, m - 1)
                    for r in range(k // w + 1))
            out.append(Fraction(s, w ** m))
        return out
    p = np.ones(1)
    box = np.full(w, 1.0 / w)
    for _ in range(m):
        p = np.convolve(p, box)
    return p


def sliding_row(L: int, depth: int, window: int, alpha=1.0, exact: bool = False):
    r"""The born row of ``depth`` sliding-window layers of window :math:`w`, by its closed form
    :eq:`eq-sliding-row`: the binomial mixture, over the number :math:`m` of layers that
    attend, of the law of a sum of :math:`m` uniform steps on :math:`\{0, \dots, w-1\}`,

    .. math:: v_{L-k} = \sum_{m=0}^{H} \binom{H}{m} \alpha^m (1-\alpha)^{H-m}\, P(S_m = k).

    Chapter :ref:`ch-layouts`.  Equal to :func:`layout_influence` of ``depth*sliding:w`` at every
    position :math:`j \ge w` (every row a walk visits there has its full window), and exactly 0
    beyond the reach :math:`H(w-1)`.  Entries at :math:`j < w` (the start, where the first rows
    have fewer keys) are those of an infinitely long context and do not sum to the row there.
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    w = positive_int("window", window)
    if exact:
        a = exact_fraction("alpha", alpha)
        from math import comb
        out = [Fraction(0)] * L
        for m in range(depth + 1):
            wt = comb(depth, m) * a ** m * (1 - a) ** (depth - m)
            if wt == 0:
                continue
            for k, p in enumerate(_uniform_sum_pmf(m, w, True)[:L]):
                out[L - 1 - k] += wt * p
        return out
    a = unit_interval_float("alpha", alpha)
    out = np.zeros(L)
    wts = binomial_weights(depth, a)
    p = np.ones(1)  # the law of S_m, built one step at a time and cut at L
    box = np.full(w, 1.0 / w)
    for m in range(depth + 1):
        if m:
            p = np.convolve(p, box)[:L]
        if wts[m]:
            out[L - len(p):] += wts[m] * p[::-1]
    return out


def irwin_hall_row(L: int, depth: int, window: int, alpha=1.0) -> np.ndarray:
    r"""The continuum form of :func:`sliding_row`: each discrete sum :math:`S_m` replaced by
    :math:`w` times an Irwin–Hall variable, centred to the same mean,
    :math:`P(S_m = k) \approx f_m\big((k + m/2)/w\big)/w` (:eq:`eq-irwin-hall`).

    Chapter :ref:`ch-layouts`.  The :math:`m = 0` term (no layer attends) stays the spike
    :math:`(1-\alpha)^H` at the last token, :math:`m = 1` is exact; the error of the rest falls
    as :math:`w` grows (the variances differ by :math:`m/12`, a relative :math:`O(1/w^2)`).

    Validity: the :math:`O(1/w^2)` holds in the bulk of the row, at the positions that carry a
    fixed share of its largest value (the chapter's figure: at least 1/1000 of it; there the
    largest relative error of 6 layers at :math:`\alpha = 1/2`, :math:`w = L/20`, is 0.032 at
    :math:`L = 256`, 0.0017 at 1024 and 0.0001 at 4096).  At the edge of the support, where
    the exact row is a few discrete steps from 0, the continuum density does not approximate
    it at any :math:`w`: the largest relative error over all positions of positive influence
    stays about 1.02 at every :math:`L` (``tests/unit/numerics/test_layouts.py`` checks both).
    """
    from scipy.stats import irwinhall

    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    w = positive_int("window", window)
    a = unit_interval_float("alpha", alpha)
    k = np.arange(L)[::-1].astype(float)  # k = L - j
    out = np.zeros(L)
    wts = binomial_weights(depth, a)
    out[-1] += wts[0]
    for m in range(1, depth + 1):
        if wts[m] == 0:
            continue
        out += wts[m] * irwinhall(m).pdf((k + m / 2) / w) / w
    return out


def _sink_t(L: int, j, c: float):
    return np.log((L + c) / (np.asarray(j, dtype=float) + c))


def sink_row(L: int, depth: int, sink: float, alpha=1.0) -> np.ndarray:
    r"""The continuum row of ``depth`` full layers with a sink of logit :math:`s`
    (:eq:`eq-sink-row`): with :math:`c = e^s` and :math:`t_j = \ln\frac{L + c}{j + c}`,

    .. math:: v_j \approx \frac{1}{L + c} \sum_{m=1}^{H} \binom{H}{m} \alpha^m
              (1-\alpha)^{H-m} \frac{t_j^{m-1}}{(m-1)!} + (1-\alpha)^H \delta_{jL}.

    Chapter :ref:`ch-layouts`.  The Cesàro row (:func:`density` over :math:`L`) with
    :math:`\ln(L/j)` replaced by :math:`t_j`: the sink flattens the primacy arm over the first
    :math:`\sim c` tokens and leaves the spike as it was.
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    c = float(np.exp(float(sink)))
    t = _sink_t(L, np.arange(1, L + 1), c)
    wts = binomial_weights(depth, a)
    out = np.zeros(L)
    out[-1] += wts[0]
    for m in range(1, depth + 1):
        if wts[m] == 0:
            continue
        out += wts[m] * np.exp((m - 1) * np.log(np.maximum(t, 1e-300)) - gammaln(m)) / (L + c)
    return out


def sink_kept_mass(L: int, depth: int, sink: float, alpha=1.0) -> float:
    r"""The share of the last row that the sinks leave, by the continuum law (:eq:`eq-sink-mass`):
    :math:`(1-\alpha)^H + \sum_{m \ge 1} \binom{H}{m}\alpha^m(1-\alpha)^{H-m}\,
    P(\Gamma_m \le T)` with :math:`T = \ln\frac{L + c}{c}`, :math:`c = e^s`.

    Chapter :ref:`ch-layouts`: a path of :math:`m` attending layers keeps its mass only while
    its log-position :math:`t = \ln\frac{L+c}{x+c}` has not run past :math:`T` (the continuum
    walk reaching :math:`x = 0`); the rest is absorbed by the sinks.  Without a sink
    (:math:`c \to 0`) :math:`T = \infty` and nothing is lost; the error is that of the
    continuum near the first tokens, and falls as :math:`L` and :math:`c` grow.
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    c = float(np.exp(float(sink)))
    T = float(np.log((L + c) / c))
    wts = binomial_weights(depth, a)
    return float(wts[0] + sum(wts[m] * gammainc(m, T) for m in range(1, depth + 1)))


def hybrid_bulk_row(layout, L: int, alpha=1.0) -> np.ndarray:
    r"""The leading form of a hybrid layout's row far from both ends (:eq:`eq-hybrid-bulk`):
    the continuum density of its :math:`H_g` full layers alone,
    :math:`v_j \approx \rho_{H_g}(j/L)/L` (:func:`density`).

    Chapter :ref:`ch-layouts`.  A sliding or chunked layer moves a walk by at most its window
    (or chunk), a vanishing share of :math:`L`, so in the continuum it is the identity; only the
    full layers carry influence across the context.  The error is :math:`O(w/L)`.

    Raises
    ------
    ValueError
        A layout with no full layer, or with a sink (:func:`sink_row` covers sinks).
    """
    layout = _as_layout(layout)
    L = positive_int("L", L)
    if any(x.sink is not None for x in layout.layers):
        raise ValueError("hybrid_bulk_row covers layouts without sinks")
    g = layout.n_full
    if g == 0:
        raise ValueError(f"layout {layout} has no full layer: its row is local (sliding "
                         "or chunked layers only; sliding_row gives a sliding stack), there "
                         "is no bulk")
    return density(np.arange(1, L + 1) / L, g, alpha) / L
