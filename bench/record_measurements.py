"""Copy measurements into ``recorded/`` (what ``make record`` and ``make record-new`` run).

    python bench/record_measurements.py --cache .cache/posbias --log _build/record-profile/cache.jsonl \
        --times _build/chapter-times.json --out recorded
    python bench/record_measurements.py --merge --cache .cache/posbias \
        --log _build/cache-events.jsonl --times _build/chapter-times.json --out recorded

The same command as ``python -m posbias_nb.provenance record``: what it writes and why is
:mod:`posbias_nb.provenance.record`'s.
"""
from posbias_nb.provenance import record

if __name__ == "__main__":
    raise SystemExit(record.main())
