"""The cost of a remedy, measured by ``posbias fix`` in the same run: the latency and peak
memory of one scoring pass per test prompt, with and without the remedy, interleaved.
"""
from __future__ import annotations

import contextlib
import time

from ...base import study

__all__ = []


def _peak_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Return freed heap pages and restart the high-water mark (Linux); False elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except (OSError, AttributeError):
        return False


def _timed(m, p, a, name, kw):
    """Seconds and extra peak memory (MiB, or NaN where it cannot be read) of one full scoring
    pass of prompt ``p`` with answer ``a`` (:func:`~posbias_nb.measure.scoring.score_batch`),
    inside the remedy (from the prompt's last row) when ``name`` is given."""
    from ....models import remedy

    def ctx():
        if name is None:
            return contextlib.nullcontext()
        return remedy(m, name, **kw, **({} if name == "hidden-scaling-all" else
                                        {"start": len(p) - 1}))
    return _seconds_and_peak(m, p, a, ctx)


def _seconds_and_peak(m, p, a, ctx):
    """:func:`_timed`'s measurement: the context ``ctx()`` is made inside the timed span."""
    from ....measure.scoring import score_batch

    before = _peak_kb() if _reset_peak() else None
    t0 = time.perf_counter()
    with ctx():
        score_batch(m, [p], [a])
    dt = time.perf_counter() - t0
    after = _peak_kb()
    mem = float("nan") if before is None or after is None else (after - before) / 1024.0
    return dt, mem


def _timed_calibration(m, codec, part, rec, i, name, kw):
    """:func:`_timed` for the attention calibration: record ``i`` scored by one full pass, as
    it is (``name`` None) or calibrated, its relevance measured first (the recorded pass and
    one extra pass per document, from the prompt's text), all inside the timed span."""
    from ....models import remedy

    p, a = rec["prompts"][i], rec["answers"][i]
    text = [t for it in part["items"] for t in it["prompts"]][i]

    def ctx():
        if name is None:
            return contextlib.nullcontext()
        docs = study.prompt_documents(codec, text, p, kw.get("dummy", "paper"))
        _, c = study.calibrated_relevance(m, p, docs, full=True)
        extra = {"attention": list(c["attention"])} \
            if kw.get("normaliser", "per-head") == "shared" else {}
        return remedy(m, name, **{k: v for k, v in kw.items() if k != "dummy"}, **extra,
                      start=len(p) - 1, spans=docs[0], relevance=c["relevance"])
    return _seconds_and_peak(m, p, a, ctx)


def _cost(m, tok, name, kw, sizes, seed):
    from ....measure.positional import row_nll
    from ....models import remedy
    from ....tasks.text import text_batch

    L = int(sizes["cost_length"])
    ids = text_batch(tok, L, sizes["cost_windows"], seed=seed + 1,
                     vocab_size=m.get_input_embeddings().num_embeddings)
    row0 = L // 2
    base = row_nll(m, ids, row0)
    extra = {} if name == "hidden-scaling-all" else {"start": row0}
    with remedy(m, name, **kw, **extra):
        nll = row_nll(m, ids, row0)
    return base, nll
