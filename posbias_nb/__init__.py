"""posbias_nb: the library behind the book *Position bias in transformers, from birth*.

Modules
-------
theory   exact influence rows of uniform causal attention with residuals (Cesàro powers)
metrics  comparing and summarising influence profiles
cache    on-disk, content-addressed cache of expensive results
plots    the figure style shared by the chapters
cli      the ``posbias`` command
"""
__version__ = "0.1.0"

from . import metrics, theory  # noqa: E402,F401  (light, pure numerics)

__all__ = ["theory", "metrics", "__version__"]
