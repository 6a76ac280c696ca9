"""The height of every page of the built site at 1400 px wide, and where its first figure and its
"What we found" block start (issue 43: the reader's first minute).  Needs the built site
(`make build-book`) and Chromium (`make browser-deps`).

    .venv/bin/python bench/page_heights.py [--out bench/results/page-heights.json]
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "page-heights.json"))
    a = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(SITE)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    pages = sorted(p.relative_to(SITE).as_posix() for p in (SITE / "book").glob("*.html"))
    out = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"),
                              args=["--no-sandbox", "--disable-gpu", "--disable-quic",
                                    "--no-first-run", "--disable-background-networking",
                                    "--disable-component-update", "--disable-sync"])
        page = b.new_page(viewport={"width": 1400, "height": 900})
        for name in pages:
            page.goto(f"{base}/{name}", wait_until="load")
            page.wait_for_timeout(1500)  # MathJax typesets after load
            out[name] = page.evaluate("""() => {
              const top = s => { const e = document.querySelector(s);
                                 return e ? Math.round(e.getBoundingClientRect().top + scrollY) : null; };
              return {height: document.documentElement.scrollHeight,
                      first_figure: top('main figure'), found: top('.posbias-found, #what-the-book-found')};
            }""")
        b.close()
    server.shutdown()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    for k, v in out.items():
        print(f"{k:40s} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
