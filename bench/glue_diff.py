"""The glued values of every chapter, before and after a change: equal, or the list of those that
moved (issue 33: "the glued values of every chapter are unchanged").

    python bench/glue_diff.py --before _build/profile --after _build/.jupyter_cache \
        --out bench/results/glue-diff.json

A source is either a folder of ``NAME.glue.json`` files (``bench/profile_chapters.py`` writes
one per chapter: the repr of every value the chapter glued) or a jupyter-cache folder (the
executed notebooks of ``make notebooks``: each glue output carries the value's repr).  NumPy
scalar reprs (``np.float64(0.5)``) are read as the plain number they glue as.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

_NP = re.compile(r"np\.\w+\(([^()]*)\)")


def _norm(text: str) -> str:
    return _NP.sub(r"\1", str(text)).strip()


def from_folder(folder: Path) -> dict:
    return {p.name[: -len(".glue.json")]: {k: _norm(v) for k, v in
                                           json.loads(p.read_text()).items()}
            for p in sorted(folder.glob("*.glue.json"))}


def from_jupyter_cache(folder: Path) -> dict:
    from jupyter_cache import get_cache

    cache = get_cache(str(folder))
    out = {}
    for rec in cache.list_cache_records():
        nb = cache.get_cache_bundle(rec.pk).nb
        name = Path(rec.uri).stem
        vals = {}
        for cell in nb.cells:
            for o in cell.get("outputs", []):
                sb = o.get("metadata", {}).get("scrapbook")
                if not sb:
                    continue
                data = o.get("data", {})
                key = sb.get("mime_prefix", "") + "text/plain"
                if key in data:
                    vals[sb["name"]] = _norm(data[key])
        out[name] = vals
    return out


def load(path: str) -> dict:
    p = Path(path)
    if (p / "global.db").exists() or (p / "__version__.txt").exists():
        return from_jupyter_cache(p)
    return from_folder(p)


def _same(a: str, b: str) -> bool:
    """Equal texts, or one number written at float32's and at float64's precision (a float32
    glued as np.float32 before and as its exact float64 value after)."""
    if a == b:
        return True
    try:
        import numpy as np

        x, y = float(a), float(b)
    except ValueError:
        return False
    return x == y or bool(np.float32(x) == np.float32(y) and
                          (float(np.float32(x)) in (x, y) or float(np.float32(y)) in (x, y)))


def diff(before: dict, after: dict) -> dict:
    out = {}
    for ch in sorted(set(before) | set(after)):
        b, a = before.get(ch), after.get(ch)
        if b is None or a is None:
            out[ch] = {"missing": "before" if b is None else "after"}
            continue
        changed = {k: [b[k], a[k]] for k in sorted(set(b) & set(a)) if not _same(b[k], a[k])}
        out[ch] = {"keys": len(set(b) | set(a)), "same": len(set(b) & set(a)) - len(changed),
                   "changed": changed, "only_before": sorted(set(b) - set(a)),
                   "only_after": sorted(set(a) - set(b))}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    d = diff(load(a.before), load(a.after))
    for ch, r in d.items():
        if "missing" in r:
            print(f"{ch}: missing {r['missing']}")
        else:
            print(f"{ch}: {r['same']} of {r['keys']} equal, {len(r['changed'])} changed, "
                  f"{len(r['only_before'])} only before, {len(r['only_after'])} only after")
    if a.out:
        Path(a.out).write_text(json.dumps(d, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
