r"""Exact theory of uniform causal attention at initialization (*Lost in the Middle at Birth*),
and of the layouts of today's models.

At initialization the attention logits are (nearly) equal, so a causal attention layer averages
uniformly over the prefix: it is the Cesàro matrix :math:`M_{ij} = 1/i` for :math:`j \le i`
(1-indexed).  A residual connection mixes it with the identity,
:math:`N = (1-\alpha) I + \alpha M`, and a stack of ``depth`` layers is :math:`N^H`.  The last row
of :math:`N^H` is the influence of each input position on the last output.  Chapters
:ref:`ch-cesaro` (:math:`\alpha = 1`) and :ref:`ch-residual` (:math:`\alpha < 1`).

Three modules, their public names all here:

* :mod:`posbias_nb.theory.causal`: the full-causal theory (the Cesàro matrix, rows of
  :math:`N^H`, the continuum law, the dead zone, columns, bidirectional stacks);
* :mod:`posbias_nb.theory.layouts`: one averaging operator per layer kind (full, sliding,
  chunked, a sink), the born row of any layout, and its closed forms (chapter
  :ref:`ch-layouts`);
* :mod:`posbias_nb.theory.finite_g`: attention at a finite logit scale :math:`g` (random
  initial logits): the logit's std from the initialiser's scales, how far one softmax row is
  from uniform, and random stacks whose mean row is the uniform theory's (chapter
  :ref:`ch-born-scales`).

Everything here is pure numerics; nothing imports torch.

Conventions of ``theory``
-------------------------
* Positions are 1-indexed in formulas and 0-indexed in arrays: ``row[j-1]`` is position ``j``.
* ``influence`` never forms a matrix power: one step of the row recursion
  :math:`v \leftarrow (1-\alpha) v + \alpha\, v M` is a suffix sum,
  :math:`(vM)_j = \sum_{i \ge j} v_i / i`, so a row costs :math:`O(L \cdot H)`.
* The float path works in log space, so entries far below the float64 range (the "dead zone"
  at large depth) are either returned exactly as ``log_influence`` or rounded to 0 by ``exp``,
  never produced by an underflowing intermediate.
"""
from __future__ import annotations

from . import causal, finite_g, layouts
from .causal import *  # noqa: F401,F403  (the public names of the full-causal theory)
from .layouts import *  # noqa: F401,F403  (those of the layouts)
from .finite_g import *  # noqa: F401,F403  (those of a finite logit scale)

__all__ = [*causal.__all__, *layouts.__all__, *finite_g.__all__]
