"""How far off a chip that no row measured is expected to be (issue 37, item 5):
the shipped calibration's procedure, repeated with each chip of its fit rows
left out.

The shipped file (specs/calibration/default.yaml) is the 2026-12-04 fit (its
header's command: twelve parameters and the engines' `compute` and
`iteration_overhead` on data/measured/calibration_rows_2026-12.csv) with four
values pinned afterwards at kernel measurements, which no deployment row
holds: `compute` 0.75, `memory` 0.825, `moe` 1 and `attention` 0.866 (the
engines' `compute` values kept as fitted, as the file keeps them). For each
chip this script runs that same fit on the rows of the other chips, pins the
same four values, and predicts the chip's rows:
  own       the calibration's fitted stack (`fitted-2026-12`, its engines'
            values where an engine also ran on another chip), as the fit
            predicts its rows;
  default   `estimate`'s default stack (graph-captured; its own fixed costs,
            the global fractions of the fit that left the chip out).
Errors are predicted / measured - 1 per kind of row (`jaxplat calibrate`'s
categories; rows whose mean input length is assumed, MLPerf's, are judged by
the per-chip ratios instead), median |error| and median signed error, and the
per-chip MLPerf throughput ratios between the left-out chip and the others.

    .venv/bin/python experiments/leave_one_chip_out.py [--steps 40] [--chips h200-sxm b200]

(one fit per chip, 4-5 minutes each on 2 cores after 5 minutes of compiling: about 35 minutes.)
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from jaxplat.cli.calibrate import _summary
from jaxplat.design import calibration as cal
from jaxplat.design.measured import chip_ratio_errors, read_rows
from jaxplat.model import load_calibration
from jaxplat.report import table

ROWS = ROOT / "data/measured/calibration_rows_2026-12.csv"
SHIPPED = ROOT / "specs/calibration/default.yaml"
# The 2026-12-04 fit's command (the shipped file's header).
FIT = ("compute", "memory", "network", "narrow_dtype", "narrow_fp4", "attention", "moe", "moe_memory",
       "kernel_latency", "iteration_overhead", "sequence_overhead", "collective_latency")
ENGINE_FIT = ("compute", "iteration_overhead")
ENGINES = ("rocm", "anl-vllm", "anl-trtllm", "anl-vllm-rocm")
# Set after the fit from kernel rows (the file's header says which and why).
PINNED = ("compute", "memory", "moe", "attention")
FRACTIONS = ("network", "narrow_dtype", "narrow_fp4", "moe_memory")  # fitted, and read by every stack


def pinned(values: dict, shipped: dict) -> dict:
    """The fit's values with the pins the shipped file applies: the engines'
    `compute` factors rescaled so that their own values stay as fitted (the
    file keeps an engine's value, and a factor is over the global one)."""
    out = dict(values)
    for n in PINNED:
        out[n] = shipped[n]
    for e in ENGINES:
        key = f"compute@{e}"
        if key in out:
            out[key] = values[key] * values["compute"] / shipped["compute"]
    return out


def errors(pred, rows, mask) -> dict:
    """{category: summary} of the rows in `mask` whose prediction is a number (`jaxplat calibrate`'s
    summary, without its total and the categories `mask` has no row of)."""
    return {c: s for c, s in _summary(pred, rows, mask).items() if c != "all" and s["n"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="L-BFGS iterations per fit (the shipped fit's 40)")
    ap.add_argument("--chips", nargs="+", help="leave out only these chips (default: each chip of the rows)")
    args = ap.parse_args(argv)

    rows = read_rows(ROWS)
    shipped = load_calibration(SHIPPED).parameters
    train = np.array([r.load in cal.FIT_LOADS for r in rows])
    weights = cal.source_weights(rows, train)
    chips = sorted({r.hardware for r, w in zip(rows, weights) if w > 0})
    chips = [c for c in chips if not args.chips or c in args.chips]
    t0 = time.time()
    own = cal.Predictor(rows, FIT, engine_fit=ENGINE_FIT, engines=ENGINES)
    default = cal.Predictor(rows, FRACTIONS, software="graph-captured")
    print(f"{len(rows)} rows, {len(own.configs)} configurations; programs compiled in {time.time() - t0:.0f} s",
          file=sys.stderr)

    preds = {"own": np.full(len(rows), np.nan), "default": np.full(len(rows), np.nan)}
    found = {}
    for chip in chips:
        held = np.array([r.hardware == chip for r in rows])
        t = time.time()
        values, loss, _ = cal.fit(own, weights=weights * ~held, steps=args.steps)
        values = cal._unseen_engines_at_reference(own, values, weights * ~held)
        values = pinned(values, shipped)
        found[chip] = values
        preds["own"][held] = np.asarray(own.predict(cal.z_of(own, values)))[held]
        preds["default"][held] = np.asarray(default.predict(cal.z_of(default, {n: values[n] for n in FRACTIONS})))[held]
        print(f"  {chip}: fit without its {int(held.sum())} rows in {time.time() - t:.0f} s, loss {loss:.4f}; "
              + ", ".join(f"{n} {values[n]:.3g}" for n in FRACTIONS), file=sys.stderr)

    out = []
    for stack in ("own", "default"):
        for chip in chips + ["all"]:
            mask = np.array([r.hardware in (chips if chip == "all" else [chip]) for r in rows])
            for cat, s in errors(preds[stack], rows, mask).items():
                out.append([stack, chip, cat, s["n"], f"{100 * s['median_abs']:.1f}%",
                            f"{100 * s['median_signed']:+.1f}%"])
    print("Leave one chip out: each chip's rows predicted by the shipped procedure fitted without them "
          "(median |error| / median signed, predicted / measured - 1)")
    print(table(["stack", "chip left out", "rows", "n", "median |error|", "median signed"], out, "lllrrr"))
    for stack in ("own", "default"):
        ratios = chip_ratio_errors(np.nan_to_num(preds[stack], nan=1.0), rows)
        ratios = [x for x in ratios if {x.chip_a, x.chip_b} <= set(chips)]  # both chips predicted left out
        if ratios:
            print(f"per-chip MLPerf offline throughput ratios ({stack} stack): median |error| "
                  f"{100 * np.median([abs(x.error) for x in ratios]):.1f}% over {len(ratios)} pairs")
    print("\nThe fractions each fit found (pins applied):")
    print(table(["chip left out", *FRACTIONS], [[c, *(f"{v[n]:.3g}" for n in FRACTIONS)] for c, v in found.items()],
                "l" + "r" * len(FRACTIONS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
