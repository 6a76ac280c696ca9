"""Whole studies built on the measurements: one layer above :mod:`posbias_nb.measure`, on floors.

==================  =========================================================================
``base``            what the studies share: :mod:`.base.design` (designs and verdict code
                    locked before their data, the registry), :mod:`.base.claims` (the
                    chapters' declared verdict rules), :mod:`.base.study` (a model with its
                    codec, prompt and answer ids, examples drawn, a remedy scored),
                    :mod:`.base.prompts` (a task file's prompts, a prompt remedy placing
                    documents, the sizes several studies read), :mod:`.base.pages` (the HTML
                    pages' stylesheet, PNG helper and ``--out`` check); it imports no study
``born``            models at initialization: :mod:`.born.born_layouts`,
                    :mod:`.born.born_scales`, :mod:`.born.scale`, :mod:`.born.replay`
``prompt``          where in a prompt the answer sits: :mod:`.prompt.retrieval`,
                    :mod:`.prompt.user_task` (``posbias task``), :mod:`.prompt.realqa`,
                    :mod:`.prompt.placement`, :mod:`.prompt.headline`
``remedy``          what changes what the model hears, and its judgement: :mod:`.remedy.lab`
                    (the remedies lab), :mod:`.remedy.inference`, :mod:`.remedy.fix`
                    (``posbias fix``, a package), :mod:`.remedy.fix_fast`,
                    :mod:`.remedy.confirm`, :mod:`.remedy.pipeline`
``report``          ``posbias report``: one model's position bias as a page and report.json
==================  =========================================================================

A floor imports only the floors below it (base < born, prompt < remedy < report;
``tests/package/test_layering.py``).  Each run returns a :class:`posbias_nb.results.Result`: its
numbers, ``table()`` (the rows the CSV output writes), ``meta`` and ``to_json()``.  Nothing below
this package imports it; the chapters and the ``posbias`` command call it.  Importing it loads no
torch; most studies are imported by name (``from posbias_nb.experiments.remedy import fix``).
"""
from . import report
from .base import design
from .born import born_layouts, replay
from .prompt import retrieval
from .remedy import inference, lab

__all__ = ["design", "retrieval", "lab", "replay", "inference", "born_layouts", "report"]
