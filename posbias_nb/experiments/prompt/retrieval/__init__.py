r"""Retrieval tasks and their scores: does the influence prior decide what a model loses?

Chapter *From prior to behaviour* (``book/retrieval.md``).  Two tasks, each built so that **only the
position of the gold item changes** from one prompt to the next:

* ``task="kv"`` — key–value retrieval as in Liu et al. (2023, "Lost in the Middle";
  ``nelson-liu/lost-in-the-middle``): ``n`` random pairs of 8-hex-digit strings in a JSON object,
  then a question about one key, in their prompt format::

      Extract the value corresponding to the specified key in the JSON object below.

      JSON data:
      {"k1": "v1",
       "k2": "v2",
       ...
       "kn": "vn"}

      Key: "k"
      Corresponding value:

  Example ``e`` draws one set of ``n`` pairs; its first pair is the gold pair.  For gold position
  ``k`` (``k = 0 .. P-1``) the gold pair is moved to item ``round(k (n-1)/(P-1))`` and the other
  pairs keep their relative order, so the *same* set of pairs appears at every position.
* ``task="needle"`` — a needle in a haystack of real prose: the haystack is a run of consecutive
  sentences of :func:`posbias_nb.measure.stdlib_corpus` (a seeded start per example), the needle
  ``"The secret code for K is V."`` (``K``, ``V`` random hex) is inserted between sentences at
  depth ``k/(P-1)`` (boundary ``round(k S/(P-1))`` of the ``S`` sentences), and the question
  ``"What is the secret code for K?"`` follows.  Same haystack and needle at every depth.

**Length rule** (``length`` = the approximate prompt length in tokens, chat template included).
``kv``: the number of pairs is ``n = 2 + round((length - t_2) / ((t_8 - t_2) / 6))`` where
``t_m`` is the token count of the example-0 prompt with its first ``m`` pairs.  ``needle``:
sentences are added (whole) until the haystack holds ``length - t_0`` tokens, ``t_0`` the prompt
with an empty haystack (sentence tokens counted one by one).  Both need at least ``P`` items
(distinct gold positions), else ValueError.

**Prompts and answers.**  A tokenizer with a chat template gets the task text as one user turn and
``add_generation_prompt=True``; without a template the text is used as is (with the tokenizer's
special tokens, e.g. Gemma's ``<bos>``).  The answer is then started by a short *lead*, part of
the prompt (after the generation prompt, or after a space): ``"`` for kv (the value's opening
quote, as the JSON writes it) and ``The secret code for K is`` for needle; the answer is ``V``
(kv) or ``" V"`` (needle).  So the last prompt token is the one that predicts the value's first
token, whatever the model's answer style.  Prompt and answer are tokenized **separately** (the
answer without special tokens).
A model without a tokenizer (random-init zoo models without a packaged tokenizer, tests) reads
UTF-8 bytes, byte ``b`` as token ``b mod vocab_size``.

**Scores** (:func:`score`), per prompt ``x`` and answer ``a_1..a_m``:

.. math::
    \log p(a \mid x) = \sum_{i=1}^{m} \log p(a_i \mid x, a_{<i}),
    \qquad
    \mathrm{correct} = \prod_{i=1}^{m} [\arg\max_v p(v \mid x, a_{<i}) = a_i]

(eq. ``eq-ret-logprob``).  ``correct`` is exact match of greedy decoding of ``m`` tokens: greedy
decoding reproduces ``a`` exactly iff at every step the argmax *given the gold prefix* is the
gold token, so one teacher-forced forward pass gives both scores.

**Departures from Liu et al.** (:data:`LIU_DEPARTURES`).  The default task (``variant="hex"``)
uses 8-hex-digit keys and values instead of UUIDs, about 15 pairs (350 tokens) instead of 75,
140 or 300, a forced opening quote, and teacher-forced exact match instead of free generation
scored by substring match.  ``variant="liu"`` is the faithful one: version-4 UUID keys and
values from the seeded generator, no lead (the prompt ends at ``Corresponding value:``), greedy
generation of up to the value's token count + 8 tokens
(:func:`posbias_nb.measure.scoring.generate_greedy_batch`, eight prompts at a time), correct
when the value appears in the decoded output (case-insensitive).

**Statistics.**  Accuracy per position: Wilson interval; log-probability per position: t
interval over examples.  The task's U is graded by pre-declared paired contrasts, first and
last slot against the mean of the central region of :func:`posbias_nb.metrics.regions`
(:func:`region_differences`), with Holm's correction over the family (:func:`contrast_family`);
where the middle is one slot and the outcome 0/1 (Liu et al.'s setting, three slots, accuracy),
the first and last slot against the middle are paired proportions (:func:`region_pairs`,
Newcombe's interval :func:`posbias_nb.stats.paired_proportion_interval`).

**The prior** (:func:`retrieval_link`, :func:`prior_matrices`): an influence profile
:math:`I_1 \dots I_T` of the prompt positions on the answer position (the last prompt token),
read per token of the value :math:`S_k` that sits at slot ``k``,

.. math::
    \rho_k(x) = \frac{1}{|S_k|} \sum_{j \in S_k} \frac{I_j(x)}{\sum_{i=1}^{T} I_i(x)}

(eq. ``eq-ret-share``): the *gold* reading :math:`\rho_k(x_{e,k})` (the gold value, in the
prompt where it sits at slot ``k``) and the *positional* reading (slot ``k`` holding a
distractor, mean over the other prompts of the example: a content-free prior measured in the very
prompts of the task).  ``I`` is the hidden-state Jacobian (``prior="hidden"``, Hutchinson
probes: the chapter's prior, blind to which token the model will produce), the residual-aware
rollout row of the measured :math:`A_t, \lambda_t` (:func:`posbias_nb.rollout.rollout`), or the
gradient of the argmax probability (``prior="argmax_prob"``: a *readout* of the answer, since the
argmax is the answer's first token).  :func:`link_stats` puts numbers with BCa bootstrap
intervals on the link.

The study is a package of modules with one job each: :mod:`.config` (the design),
:mod:`.statistics` (accuracies, contrasts, links) and :mod:`.measurements` (what is cached).
Its names are read from here as before.
"""
from __future__ import annotations

from ....tasks.kv_needle import KV_INSTRUCTION, NEEDLE_INSTRUCTION, TASKS, VARIANTS  # noqa: F401
# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import CSV_COLUMNS, DESIGN, LIU_COLUMNS, LIU_DEPARTURES, LIU_MPT30B, LIU_OUTCOMES, LIU_RETRIEVAL_ERRORS, PRIORS, run_params  # noqa: F401
from .statistics import as_matrix, contrast_family, edge_ratios, link_stats, liu_outcome, outcome_matrices, paired_contrast, prior_matrices, ratio_interval, region_accuracy, region_differences, region_pairs, run_result  # noqa: F401
from .measurements import liu_diagnosis, prompt_problem, prompts_for, record_arrays, retrieval_link, retrieval_run, retrieval_study  # noqa: F401

__all__ = ["DESIGN", "TASKS", "VARIANTS", "PRIORS", "KV_INSTRUCTION", "NEEDLE_INSTRUCTION", "LIU_MPT30B", "LIU_DEPARTURES", "retrieval_run", "retrieval_link", "retrieval_study", "link_stats", "as_matrix", "outcome_matrices", "paired_contrast", "prior_matrices", "edge_ratios", "region_accuracy", "region_differences", "region_pairs", "contrast_family", "ratio_interval", "CSV_COLUMNS", "LIU_OUTCOMES", "LIU_RETRIEVAL_ERRORS", "liu_outcome", "liu_diagnosis", "LIU_COLUMNS", "run_params", "prompts_for", "run_result"]
