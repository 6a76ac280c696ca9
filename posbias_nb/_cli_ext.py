"""Subcommands that need the heavy stack (torch, transformers), registered lazily."""
from __future__ import annotations


def register(sub, common) -> None:
    """Add the model subcommands to the ``posbias`` parser (none yet beyond ``theory``)."""
    return None
