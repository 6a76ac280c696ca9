"""Make this machine's CPU reference of a recorded entry whose computation amplifies float rounding.

    python bench/cpu_reference.py [--recorded recorded] [--key NAMESPACE/KEY]   (make cpu-reference)

The same command as ``python -m posbias_nb.provenance cpu-reference``: how a reference is made
is :mod:`posbias_nb.provenance.reference`'s.
"""
from posbias_nb import provenance_cli as cli

if __name__ == "__main__":
    raise SystemExit(cli.cpu_reference())
