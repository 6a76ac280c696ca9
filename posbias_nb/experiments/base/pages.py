"""The HTML pages of ``posbias report`` and ``posbias fix``: one stylesheet, one way to embed a
figure, one way to check the ``--out`` folder.  It renders and writes; it computes nothing (so a
change here moves no recorded number, :data:`posbias_nb.provenance.code.NOT_COMPUTING`)."""
from __future__ import annotations

import base64
import io
from pathlib import Path

__all__ = ["STYLE", "png", "check_out_dir"]

#: The one stylesheet of the pages (a self-contained page: no file beside it, no network).
STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#222;line-height:1.45}table{border-collapse:collapse;margin:.8rem 0}td,th{border:1px solid
#ccc;padding:.25rem .6rem;text-align:left}img{max-width:100%}.v-holds{color:#1e7d32}.v-fails{color:
#b3261e}.v-inconclusive{color:#8a6d00}.meta{font-size:.85rem;color:#555}code{background:#f3f3f3}"""


def png(fig) -> str:
    """``fig`` as a ``data:`` URL of its PNG, to embed in a page; the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def check_out_dir(path) -> Path:
    """``path`` as a directory a command can write (created with its parents if missing);
    ValueError (one line) otherwise.  Called before any computation; the command removes what
    it created when the run then fails."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"--out {str(path)!r} exists and is not a directory")
    if not p.exists():
        try:
            p.mkdir(parents=True)  # the usual convention: its parents too
        except OSError as e:
            raise ValueError(f"--out {str(path)!r} cannot be created: {e.strerror}") from None
    probe = p / ".posbias-write-test"
    try:
        with open(probe, "w") as f:
            f.write("")
        probe.unlink()
    except OSError:
        raise ValueError(f"--out {str(path)!r} is not writable") from None
    return p
