"""Whole studies built on the measurements: one layer above :mod:`posbias_nb.measure`.

=========================  ==================================================================
:mod:`.design`             designs locked before their data: frozen objects, hashed, with a
                           registry of dated changes (``posbias_nb/data/designs.json``)
:mod:`.study`              the shared base of the studies that score prompts: a model with its
                           codec, prompt and answer ids, the examples drawn, a remedy file read,
                           a remedy scored
:mod:`.prompts`            the prompting helpers they share: a task file's prompts (``prepare``),
                           a prompt remedy placing documents, the sizes several studies read
:mod:`.claims`             the chapters' declared verdict rules (threshold, band, direction),
                           one locked table keyed by chapter and claim
:mod:`.retrieval`          retrieval runs (key-value, needle) scored per gold position, and
                           their link to the influence prior
:mod:`.training`           the remedies lab: small models trained from scratch, the arms and
                           their statistics
:mod:`.inference`          inference-time remedies measured on the prior, the task and the cost
:mod:`.born_layouts`       born with a layout: random-init profiles against each layout's row
:mod:`.replay`             cached replays of the structural theory's published configurations
``report``                 ``posbias report``: one model's position bias, born and trained, as
                           a self-contained HTML page and report.json
:mod:`.scale`              born at scale: 7B-class configurations on a width ladder and at
                           full width
:mod:`.born_scales`        where real models are born: the born profile as a function of the
                           scales an initialiser sets (logits, blocks, embedding)
:mod:`.task`               ``posbias task``: the gold passage moved across a task file's prompts
:mod:`.realqa`             real questions (Liu et al.'s files): the locked position family
:mod:`.placement`          the prompt remedies measured on a part of the user's examples
:mod:`.fix`                ``posbias fix``: choose a remedy on a tuning part, confirm it on a
                           test part, its remedy file (a package: configuration, parts,
                           scoring, tuning, judgement, cost, words, run, page)
:mod:`.fix_fast`           ``posbias fix --fast``: the ranked prompt remedies tuned by where
                           they put the gold passage, the carried one alone tested
:mod:`.confirm`            the book's confirmatory study of the prompt remedies (its page for
                           a RAG pipeline)
:mod:`.pipeline`           the pipeline study: a reorder against a retriever's own order, on a
                           corpus with BM25 and a dense retriever
:mod:`.headline`           the data of the book's headline figure (the born profile beside the
                           U on real questions)
:mod:`.pages`              the HTML pages of ``report`` and ``fix``: one stylesheet, the PNG
                           helper, the ``--out`` check
=========================  ==================================================================

Each run returns a :class:`posbias_nb.results.Result`: its numbers, ``table()`` (the rows the
CSV output writes), ``meta`` and ``to_json()``.  Nothing below this package imports it; the
chapters and the ``posbias`` command call it.  Importing it loads no torch; the modules below
``report`` in the table are imported by name (``from posbias_nb.experiments import fix``).
"""
from . import born_layouts, design, inference, replay, report, retrieval, training

__all__ = ["design", "retrieval", "training", "replay", "inference", "born_layouts", "report"]
