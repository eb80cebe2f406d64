"""Predicted vs measured on rows no calibration ever fits.

`data/measured/heldout_rows.csv` (written by data/measured/convert.py from
trtllm_perf_overview_heldout.csv): the other columns of the TensorRT-LLM
performance overview the fitted table comes from (same page, commit and
trtllm-bench settings): Llama-3.3-70B on one B200 / GB200 in FP4,
Llama-3.1-405B on 8 H100 / 8 H200 (FP8) and 4 B200 / 4 GB200 (FP4),
Qwen3-235B-A22B on 8 H100 / H200 (FP8) and 8 B200 (FP4), attention data
parallel as the page's MoE options set (`enable_attention_dp`). Models,
sizes and the FP4 GB200 are outside the fit: the figure a user gets for a
deployment nobody measured for us.

Prints, per model and chip, the rows, the median predicted/measured ratio
and its range, then the median |error| and median signed error of all rows.

    .venv/bin/python experiments/heldout_check.py [--calibration FILE] [--rows]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxplat.design import calibration as cal  # noqa: E402
from jaxplat.design.measured import read_rows  # noqa: E402
from jaxplat.model import load_calibration  # noqa: E402
from jaxplat.report import table  # noqa: E402

DATA = ROOT / "data" / "measured" / "heldout_rows.csv"


def _par(r) -> str:
    p = r.par
    return " ".join(f"{k}{int(p[k])}" for k in ("tp", "pp", "ep") if p.get(k, 1) > 1) or "tp1"


def _dtype(r) -> str:
    return "/".join(dict.fromkeys(r.dtype.values())) if isinstance(r.dtype, dict) else str(r.dtype)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA), help="held-out measured rows (calibration schema)")
    ap.add_argument("--calibration", help="a calibration file instead of the shipped one")
    ap.add_argument("--rows", action="store_true", help="print every row too")
    args = ap.parse_args(argv)
    rows = read_rows(args.data)
    calib = load_calibration(args.calibration) if args.calibration else None
    pred = cal.Predictor(rows, cal.DEFAULT_FIT, calibration=calib)
    p = np.asarray(pred.predict(cal.z_of(pred, pred.base)), float)
    m = np.array([r.value for r in rows])
    ratio = p / m
    if args.rows:
        print(table(["model", "chips", "dtype", "ISL/OSL", "measured tok/s", "predicted tok/s", "ratio"],
                    [[r.model, f"{_par(r)} {r.hardware}", _dtype(r), f"{r.prompt:.0f}/{r.output:.0f}",
                      f"{r.value:.0f}", f"{q:.0f}", f"{x:.2f}"] for r, q, x in zip(rows, p, ratio)], "lllrrrr"))
        print()
    groups = {}
    for i, r in enumerate(rows):
        groups.setdefault((r.model, f"{_par(r)} {r.hardware}", _dtype(r)), []).append(i)
    out = []
    for (model, chips, dtype), idx in groups.items():
        x = ratio[idx]
        out.append([model, chips, dtype, len(idx), f"{np.median(x):.2f}", f"{x.min():.2f}..{x.max():.2f}",
                    f"{100 * np.median(np.abs(x - 1)):.1f}%"])
    print("Offline max-load output tokens/s, predicted / measured (TensorRT-LLM perf overview, never fitted)")
    print(table(["model", "chips", "dtype", "rows", "median ratio", "range", "median |error|"], out, "lllrrrr"))
    s = cal.summarize(p, rows)
    print(f"\nall {s['n']} rows: median |error| {100 * s['median_abs']:.1f}%, median signed "
          f"{100 * s['median_signed']:+.1f}% (calibration: {args.calibration or 'shipped'})")


if __name__ == "__main__":
    main()
