"""Input validation shared by the package: every public function fails loudly, with the value."""
from __future__ import annotations

import numbers
from fractions import Fraction

import numpy as np


def positive_int(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def unit_interval_float(name: str, value) -> float:
    """Return ``value`` as a float in [0, 1] (Fractions, sympy Rationals and "3/10" accepted)."""
    if isinstance(value, str):
        value = exact_fraction(name, value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not (0.0 <= x <= 1.0):  # also rejects nan
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return x


def exact_fraction(name: str, value) -> Fraction:
    """Exact rational in [0, 1] from int, Fraction, sympy Rational, a string "3/10" or "0.3".

    A Python float is read through its shortest decimal repr, so ``0.3`` means 3/10 exactly
    (not the binary double nearest to it).
    """
    try:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, Fraction):
            q = value
        elif isinstance(value, (numbers.Integral, np.integer)):
            q = Fraction(int(value))
        elif isinstance(value, float):
            if not np.isfinite(value):
                raise ValueError
            q = Fraction(repr(value))
        elif isinstance(value, str):
            q = Fraction(value.strip())
        elif hasattr(value, "p") and hasattr(value, "q"):  # sympy Rational / Integer
            q = Fraction(int(value.p), int(value.q))
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError):
        raise ValueError(f"{name} must be an exact rational in [0, 1], got {value!r}") from None
    if not (0 <= q <= 1):
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return q


def choice(name: str, value, options) -> str:
    """Return ``value`` if it is one of ``options``, else raise ValueError naming both.

    >>> choice("mode", "a", ("a", "b"))
    'a'
    """
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(str, options))}, got {value!r}")
    return value


def positive_float(name: str, value) -> float:
    """``value`` as a float if it is a positive finite number (not a bool), else ValueError
    naming ``name`` and the value.

    >>> positive_float("residual_scale", 2)
    2.0
    """
    import math

    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if isinstance(value, bool) or not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return x


def nonnegative_float(name: str, value) -> float:
    """``value`` as a float if it is a finite number >= 0 (not a bool), else ValueError naming
    ``name`` and the value.

    >>> nonnegative_float("g", 0)
    0.0
    """
    import math

    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}") from None
    if isinstance(value, bool) or not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return x
