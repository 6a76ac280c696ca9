"""posbias_nb: the library behind the book *Position bias in transformers, from birth*.

Layers, from the top down (each imports only the ones below it; ``tests/package/test_layering.py``):

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
from ._version import __version__  # noqa: E402  (a module that imports nothing)

from . import metrics, theory  # noqa: E402,F401  (light, pure numerics)

#: The front door: what a user calls first, each returning a :class:`results.Result` (what the
#: ``posbias`` subcommand of the same name writes), imported only when first used so that
#: ``import posbias_nb`` stays light (no torch).
FRONT_DOOR = {
    "profile": ("posbias_nb.measure.runs", "profile_run"),
    "report": ("posbias_nb.experiments.report", "report"),
    "task": ("posbias_nb.experiments.prompt.user_task", "task_run"),
    "fix": ("posbias_nb.experiments.remedy.fix", "fix"),
}

__all__ = ["theory", "metrics", "__version__", *FRONT_DOOR]


def __getattr__(name: str):
    """``posbias_nb.profile``, ``.report``, ``.task`` and ``.fix`` (:data:`FRONT_DOOR`),
    imported on first use."""
    if name in FRONT_DOOR:
        import importlib

        module, attr = FRONT_DOOR[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'posbias_nb' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(FRONT_DOOR))
