r"""The remedies lab: small causal transformers trained from scratch on synthetic retrieval.

Chapter :ref:`ch-remedies` ("Can training climb out of the valley?").  Everything the chapter
trains goes through :func:`train_run`: a Llama-style decoder (RoPE, RMSNorm, SwiGLU; Hugging Face
``LlamaForCausalLM`` built from a small ``LlamaConfig`` after ``torch.manual_seed``), AdamW, one
answer token per sequence, and the answer placed at a controlled position of the context.

The tasks (:func:`posbias_nb.tasks.synthetic.make_batch`)
---------------------------------------------------------
A sequence of length ``L`` is ``BOS``, a haystack of filler tokens, the answer-bearing token at
the **answer position** ``p`` (``1 <= p <= L - 3``), ``distractors`` look-alike tokens at other
random positions, and a final query token at ``L - 1``; the one trained target is the next token
after the query.

* ``kv`` (key-value recall, the chapter's task): each context token of a pair is one *fused*
  token standing for ``(key, value)`` (4 keys x 8 values); the context holds
  ``distractors + 1`` pairs with distinct keys, the query is a key and the target its value.
  A one-hop lookup: match the query's key against the pair tokens, copy the value.
* ``needle``: the needle is a value token, the distractors come from a separate look-alike
  vocabulary that is never the answer, the query is a fixed marker; the target is the needle.

Why these settings (measured while building them, 2 layers, width 64, L = 64, batch 32): a
single distinct needle, even with 3 look-alikes, is learned everywhere in ~60 steps (the
``needle`` task here, kept as the easy control); a needle written as *marker + value* in a
haystack of value tokens needs an induction circuit and stayed at chance for 800 steps (with one
look-alike: accuracy 0.5, chance among two; learning rate 3e-3, and 1e-2 did worse); key-value
pairs written as two adjacent tokens need the same circuit (12-16 pairs: nothing learned in 3000
steps).  Fused key-value tokens with 4 pairs sit in between: learned in ~100-200 steps, with
measurable differences between positions along the way.

Answer placement during training (``answer_positions``): ``"uniform"`` over ``1..L-3``;
``"start"``: with probability 0.8 in the first 15 % of the context, else uniform;
``"edges"``: with probability 0.8 in the first or last 15 % (half each), else uniform.
The remedies (``remedy``) act on top of that placement at equal compute (same steps, batch and
learning rate): ``"weighted"`` multiplies the loss of examples whose answer lies in the middle
by 4 (weights renormalised per batch); ``"oversample"`` draws half of each batch's answers
from the middle; ``"curriculum"`` draws every answer from the middle for the first
30 % of the steps, then follows the placement.  The middle the remedies act on is a task design
parameter, :func:`posbias_nb.tasks.synthetic.middle_range`: the book's one middle
(:func:`posbias_nb.metrics.regions`, the central half) of the answer positions; it was the middle
third before version ``train-v4``.

Measurement and statistics
--------------------------
The middle is *measured* with the same definition, declared before the data: the central half of
the evaluated answer positions (:func:`middle_and_edges`, ``metrics.regions`` on the slots)
against the first and last slot; the middle of an influence profile is
:func:`posbias_nb.metrics.middle_share`.  The unit of replication is the **seed** (init,
training data and held-out set): every interval is a Student *t* interval over per-seed values
(:func:`posbias_nb.stats.mean_interval`), which covers at a handful of seeds where a percentile
bootstrap does not; examples within a seed are averaged first (they share an initialization),
and two arms trained with the same seeds are compared seed by seed.

The structural lever (``residual_scale`` = :math:`\alpha`): the attention output projection of
every layer is multiplied by :math:`1/\alpha` at init, which at init is the DeepNorm-style
up-weighting of the residual path by :math:`\alpha` relative to the attention branch, so
:math:`\lambda_t` falls as :math:`\alpha` grows (:ref:`ch-residual`).

The lab is a package of modules with one job each: :mod:`.config` (the remedies, the sizes,
the design), :mod:`.measurements` (training and what is cached), :mod:`.statistics` (over
seeds, the claims' rules) and :mod:`.words` (the verdict rows).  Its names are read from here
as before.
"""
from __future__ import annotations

from ....tasks.synthetic import PLACEMENTS, TASKS  # noqa: F401  (the tasks it trains on)

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import ARMS, CHAPTER, CURRICULUM_FRAC, DESIGN, DEVICES, JSON_KEYS, MIDDLE_WEIGHT, N_EX, N_PROBE, OVERSAMPLE_P, REMEDIES, TABLE_COLUMNS, TWIN_KEYS, TWIN_STEPS  # noqa: F401
from .statistics import arm_difference, claim_rule, contrast, decide, effect, middle_and_edges, middle_vs_edges, predicted_profile, predicted_ratio, steps_to_threshold, units  # noqa: F401
from .measurements import at_init, build_model, gradient_by_depth, lever_at_init, run_arms, run_params, run_twins, train_run, train_twin  # noqa: F401
from .words import REMEDY_NAMES, verdict_rows  # noqa: F401

__all__ = ["TASKS", "PLACEMENTS", "REMEDIES", "build_model", "at_init", "train_run", "steps_to_threshold", "train_twin", "run_twins", "TWIN_KEYS", "TWIN_STEPS", "CHAPTER", "ARMS", "run_arms", "middle_and_edges", "units", "contrast", "middle_vs_edges", "predicted_profile", "predicted_ratio", "arm_difference", "gradient_by_depth", "lever_at_init", "TABLE_COLUMNS", "JSON_KEYS", "DESIGN", "decide", "effect", "verdict_rows", "run_params"]
