"""The words of ``posbias fix``'s verdicts: what a verdict and a setting are called on the
page, in the CLI and in the remedy file.
"""
from __future__ import annotations



__all__ = ["verdict_words", "setting_text"]


def verdict_words(verdict, power: dict | None) -> str:
    """The words for a carried remedy's verdict: "helps" only where it holds, "does not help"
    only where it fails; an inconclusive one reads as the size of what the test part could see.

    >>> verdict_words("inconclusive", {"detectable": 0.83, "needed": {"0.5": 60}})
    'not shown to help at this size: your test part can detect gains of at least 0.83 nats; about 60 questions would decide 0.5'
    """
    if verdict == "holds":
        return "helps on the test part"
    if verdict == "fails":
        return "does not help on the test part"
    if verdict is None:
        return "no remedy carried to the test part"
    if power is None:
        return "not shown to help at this size"
    return (f"not shown to help at this size: your test part can detect gains of at least "
            f"{power['detectable']:.2f} nats; about {power['needed']['0.5']} questions would "
            f"decide 0.5")


def setting_text(setting) -> str:
    """A remedy's setting in words for a table: ``key = value`` pairs (floats by ``:g``), the
    slot quality left out (it is data, not a choice); ``"none"`` for no setting, ``"(one
    setting)"`` for an empty one.

    >>> setting_text({"ranker": "bm25", "scale": 0.5})
    'ranker = bm25, scale = 0.5'
    >>> setting_text(None), setting_text({})
    ('none', '(one setting)')
    """
    if setting is None:
        return "none"
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in setting.items() if k != "slot_quality") or "(one setting)"
