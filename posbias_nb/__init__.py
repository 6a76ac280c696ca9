"""posbias_nb: the library behind the book *Position bias in transformers, from birth*.

Layers, from the top down (each imports only the ones below it; ``tests/test_layering.py``):

=====================  =====================================================================
``cli``                the ``posbias`` command: parse, call, write a :class:`results.Result`
``experiments``        whole studies: retrieval, the remedies lab, replays
``measure``            Jacobian influence, hooks, teacher-forced scores, cached entry points
``models``, ``tasks``  the zoo, loading and patches; pure data generators (no torch)
``theory``, ``rollout``, ``metrics``, ``stats``
                       the numerics (no torch): exact theory, the structural rollout,
                       comparisons of profiles, intervals and verdict rules
``cache``, ``results``, ``plots``, ``notebook``
                       support: on-disk cache, run results, figure style, glue and tables
=====================  =====================================================================
"""
__version__ = "0.1.0"

from . import metrics, theory  # noqa: E402,F401  (light, pure numerics)

__all__ = ["theory", "metrics", "__version__"]
