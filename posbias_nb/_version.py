"""The package's version, in a module that imports nothing: ``pyproject.toml`` reads it
(``[tool.setuptools.dynamic]``) and ``posbias_nb.__version__`` is it."""
__version__ = "0.1.0"
