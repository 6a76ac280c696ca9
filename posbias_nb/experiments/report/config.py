"""The report's design (:data:`DESIGN`, its sizes :data:`SETTINGS`) and the constants its numbers
depend on."""
from __future__ import annotations



from ..base.design import Design


DEFINITION = "report-v7"  # bump when a definition below changes the numbers (v7: reasons of ratios not formed)

ENDS = 0.02  # robust_peak_to_valley's smoothing share (the chapters' value)


#: Sizes of a report: ``quick`` (about 3 minutes for SmolLM2-135M at L = 512 on 2 cores) and
#: ``full`` (the default, about 15).
SETTINGS = {
    "quick": dict(windows=8, probes=2, capture_batch=2, positions=5, examples=4,
                  heat_examples=2, heat_lengths=3, n_boot=500),
    "full": dict(windows=16, probes=4, capture_batch=4, positions=7, examples=10,
                 heat_examples=4, heat_lengths=4, n_boot=2000),
}


#: The report's design, locked: the registry's latest entry for "report"
#: (:mod:`posbias_nb.experiments.base.design`): its sizes and the constants its claims use.
DESIGN = Design("report", {
    "settings": {k: dict(v) for k, v in SETTINGS.items()},
    "ends": ENDS,
    "structural_max": 1024,
    # the random-init twins: initialisations seed, seed + 1, ..., on the same windows
    "twins": 3,
    # "ranks positions like the measured profile": a strong rank agreement, not rho > 0
    "rank_threshold": 0.5,
    # the task's sign-flip contrasts are testable only if their smallest p can pass Holm
    "alpha": 0.05,
})

TWINS = DESIGN["twins"]


#: The longest context of the structural section: the captured kernels take T x L x L floats
#: (SmolLM2 at 1024 tokens: 0.25 GB in float64), so longer reports compare the rollout with a
#: profile measured at this length.
STRUCTURAL_MAX = 1024
