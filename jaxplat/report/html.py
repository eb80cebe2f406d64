"""`jaxplat report OUT_DIR`: one self-contained HTML page of a sweep's or a
co-design's output folder.

The page reads the files `jaxplat sweep` writes (summary.json, top_k.csv,
pareto.csv, axes.csv, histogram.csv) or those `jaxplat codesign` writes
(summary.json, trajectory.csv, sensitivities.csv). Figures are plotly with its
JavaScript embedded in the page, so it opens offline by double-click; every
number carries its unit and tables have readable headers. A folder that is
neither gives a `SpecError` (one line), never a traceback.
"""

from pathlib import Path

from jaxplat.report.html_codesign import codesign_page
from jaxplat.report.html_common import REPORT_FILE, load
from jaxplat.report.html_sweep import sweep_page
from jaxplat.specs import SpecError


def render(out_dir) -> str:
    """The HTML page of an output folder."""
    data = load(out_dir)
    try:
        return sweep_page(data) if data["kind"] == "sweep" else codesign_page(data)
    except (KeyError, IndexError, TypeError, AttributeError) as e:  # a hand-edited or truncated folder
        raise SpecError(f"{data['out']}: unexpected contents ({type(e).__name__}: {e}); "
                        "rerun the command that wrote this folder") from None


def write_report(out_dir, output=None) -> Path:
    """Write the page (default OUT_DIR/report.html); returns its path."""
    page = render(out_dir)
    path = Path(output) if output else Path(out_dir) / REPORT_FILE
    if path.is_dir():
        path = path / REPORT_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        raise SpecError(f"cannot write {path}: {e.strerror or e}") from None
    return path
