r"""Residual-aware attention rollout: the structural theory of position bias.

A transformer layer with a residual stream mixes each token with its attention output,
:math:`x \leftarrow (1-\lambda_t)\,x + \lambda_t\,A_t x`, where :math:`A_t` is a row-stochastic
attention kernel (row ``i`` says how much token ``i`` reads from each token ``j``) and
:math:`\lambda_t \in [0, 1]` is the attention share of layer ``t`` (Herasimchyk et al., 2026;
the rollout of Abnar and Zuidema, 2020, is the case :math:`\lambda_t = \tfrac12`).  Layer 1 acts
first on the input, so the whole stack is

.. math::
    P = R_T R_{T-1} \cdots R_1, \qquad R_t = (1-\lambda_t) I + \lambda_t A_t ,

and the *influence* of input position ``j`` on the last output is :math:`P_{Lj}`, the last row
of :math:`P`.  The attention-only rollout of Wu et al. (2025) is :math:`\lambda_t = 1`.
Chapters :ref:`ch-rollout` (:eq:`eq-rollout`), :ref:`ch-infinite-depth` and :ref:`ch-prediction`.

Conventions of ``rollout``
--------------------------
* Positions are 1-indexed in formulas and 0-indexed in arrays: ``row[j-1]`` is position ``j``.
* Layers are 1-indexed in formulas: ``lambdas[t-1]`` and ``kernels[t-1]`` belong to layer ``t``,
  and layer 1 is the one next to the input.
* :func:`rollout` never multiplies two matrices: it pulls the unit vector :math:`e_L^\top`
  through the stack from the output side, :math:`v \leftarrow v R_t` for
  :math:`t = T, T-1, \dots, 1`, which costs :math:`O(T L^2)` (and :math:`O(L^2)` memory for
  one shared kernel).  Only ``full=True`` and :func:`rollout_path`, which return whole matrices,
  pay :math:`O(T L^3)`.
* A kernel is accepted when it is a finite, square, nonnegative matrix (entries above
  ``-1e-12``) whose rows sum to 1 within ``1e-9``.

Everything here is pure numerics; nothing imports torch.

Modules
-------
Every public name below is importable from ``posbias_nb.rollout`` itself; the modules are where
each one lives.

* :mod:`posbias_nb.rollout.kernels`: the attention kernels (:func:`uniform_causal`,
  :func:`bidirectional`, :func:`sliding_window`, :func:`alibi_slopes`, :func:`alibi`,
  :func:`content`, :func:`positional_kernel`, :func:`matched_diag`, :func:`content_diag`).
* :mod:`posbias_nb.rollout.schedules`: the shares :math:`\lambda_t` (:func:`constant`,
  :func:`power_law`, :func:`check_lambdas`).
* :mod:`posbias_nb.rollout.core`: :func:`rollout` and :func:`rollout_path`.
* :mod:`posbias_nb.rollout.depth`: deep stacks (:class:`Control`, :func:`deltas`,
  :func:`control`, :func:`steps_law`, :func:`poisson_rollout`, :func:`keep_path`,
  :func:`collapse_bound`).
* :mod:`posbias_nb.rollout.published`: the authors' published configurations, read from the
  packaged JSON only (:data:`PUBLISHED_MODELS`, :func:`published_configs`,
  :func:`published_head_dims`, :func:`published_schedules`, :func:`replay`).
* :mod:`posbias_nb.rollout.explorer`: the reference side of the book's interactive explorer
  (the rows the page's JavaScript must reproduce).
"""
from __future__ import annotations

from .core import layout_rollout, log_layout_rollout, rollout, rollout_path
from .depth import Control, collapse_bound, control, deltas, keep_path, poisson_rollout, steps_law
from .kernels import (
    alibi,
    alibi_slopes,
    bidirectional,
    content,
    content_diag,
    layout_kernels,
    matched_diag,
    positional_kernel,
    sliding_window,
    uniform_causal,
)
from .published import (
    PUBLISHED_MODELS,
    published_configs,
    published_head_dims,
    published_schedules,
    replay,
)
from .schedules import check_lambdas, constant, power_law

# The order of the API page (autodoc lists the members in the order of __all__).
__all__ = [
    # kernels
    "uniform_causal",
    "bidirectional",
    "sliding_window",
    "alibi_slopes",
    "alibi",
    "content",
    "content_diag",
    "layout_kernels",
    "positional_kernel",
    "matched_diag",
    # schedules
    "constant",
    "power_law",
    "check_lambdas",
    # the rollout
    "rollout",
    "rollout_path",
    "layout_rollout",
    "log_layout_rollout",
    # deep stacks
    "Control",
    "deltas",
    "control",
    "steps_law",
    "poisson_rollout",
    "keep_path",
    "collapse_bound",
    # published configurations
    "PUBLISHED_MODELS",
    "published_configs",
    "published_head_dims",
    "published_schedules",
    "replay",
]

# the public home of the one public class (its repr, pickles and the API page's links)
Control.__module__ = __name__
