"""Provenance of recorded measurements: why a number read from ``recorded/`` can be trusted.

``make test`` reads the expensive measurements from ``recorded/`` (the cache of one cold run,
:mod:`posbias_nb.cache`) and re-measures a sample of them.  This room holds everything that
decides and checks that sample, one job a module:

* :mod:`~posbias_nb.provenance.code`: code identity, the modules that compute each cached
  namespace and the digest of the code they reach; the one code hasher, shared with the
  design registry.
* :mod:`~posbias_nb.provenance.reach`: what a namespace's modules reach: the package's
  top-level statements and the names that tie them.
* :mod:`~posbias_nb.provenance.migrate`: ``migrate-digests``, the stored digests carried over
  to a new digest rule, each only where the same code can be shown.
* :mod:`~posbias_nb.provenance.verify`: agreement of a re-measurement with its record, whole, by
  a sample of its parts, or against a CPU reference.
* :mod:`~posbias_nb.provenance.machine`: machine identity (CPU, generation, instruction set) and
  the bookkeeping of CPU references.
* :mod:`~posbias_nb.provenance.plan`: ``make test``'s sample (the budget, the rule) and its
  summary after the chapters ran.
* :mod:`~posbias_nb.provenance.stamps`: verification stamps (``recorded/STAMPS.json``), what a
  run that re-measured a changed namespace in full found, kept so that the next run under the
  same code re-measures only its cheapest entry.
* :mod:`~posbias_nb.provenance.record`: ``make record`` and ``make record-new``, ``recorded/``
  and its ``MANIFEST.json`` written from a run.
* :mod:`~posbias_nb.provenance.reference`: ``make cpu-reference``, an entry computed on this
  machine by the code of its recording commit.
* :mod:`~posbias_nb.provenance.fanout`: ``make record ENGINE=dask``, the chapters (or any units
  that fill the cache) run on a Dask cluster's workers, a ``LocalCluster`` by default.
* :mod:`~posbias_nb.provenance.entries`: the entry file (checksum, payload, atomic write), which
  the cache and this room read and write.

The command, ``python -m posbias_nb.provenance`` with ``plan``, ``summary``, ``record``,
``cpu-reference``, ``migrate-digests`` or ``fanout``, is :mod:`posbias_nb.provenance_cli`, on the entry floor.

Imports: ``code``, ``verify``, ``machine``, ``stamps``, ``plan`` and ``record`` import nothing of the package
but each other (:mod:`posbias_nb.cache` imports them for its one hook for recorded entries);
``reference`` reads and writes entry files through ``entries``, which imports nothing of the
package; ``fanout`` imports nothing of the package (a unit names its function by its dotted
path); the room imports nothing above it (its command, :mod:`posbias_nb.provenance_cli`, is an
entry point beside :mod:`posbias_nb.cli` and alone may import a study: the calls that make a
training entry).  No module that computes a measurement imports this room, and its modules are listed in
:data:`~posbias_nb.provenance.code.NOT_COMPUTING`, so its code counts in no namespace's digest.
"""
__all__ = ["code", "reach", "migrate", "verify", "machine", "stamps", "plan", "record", "reference",
           "fanout", "entries"]
