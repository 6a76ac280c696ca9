"""Which recorded measurements ``make test`` measures anew, and what came of it.

    python bench/verify_plan.py plan --recorded recorded --out _build/verify-plan.json \
        --keys _build/verify-keys.txt [--budget SECONDS]
    python bench/verify_plan.py summary --plan _build/verify-plan.json --log _build/cache-events.jsonl

The same command as ``python -m posbias_nb.provenance plan|summary``: the rule and the code are
:mod:`posbias_nb.provenance.plan`'s.
"""
from posbias_nb.provenance import plan

if __name__ == "__main__":
    raise SystemExit(plan.main())
