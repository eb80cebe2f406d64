"""Before/after calibration: errors per source, and a parity plot.

"Before": the efficiency the chips had before calibration (the flat
fractions compute 0.7, memory 0.8, network 0.8 the hardware specs used to
carry, no dtype, attention or latency terms). "After": the shipped
calibration (specs/calibration/default.yaml). With --held-out, a third set:
each row predicted by the fit that left its chip out (leave-one-chip-out,
the figure a new chip would get). Prints one table per source and writes a
log-log parity plot (one panel per metric, one colour per chip; hollow =
before, filled = after or held out).

    .venv/bin/python experiments/calibration_report.py [--held-out] [--out experiments/calibration_parity.png]
    .venv/bin/python experiments/calibration_report.py --predictions PRED.csv

--predictions reads the held-out predictions `jaxplat calibrate ...
--predictions PRED.csv` wrote (no refit: the leave-one-chip-out set is
that run's). With a leave-one-chip-out set it also prints that set's errors
per load and metric apart for the rows whose fitted engines ran on another
chip too and those whose engine only the left-out chip ran.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxplat.design import calibration as cal  # noqa: E402
from jaxplat.design.measured import METRICS, read_rows  # noqa: E402
from jaxplat.model import EFFICIENCY_PARAMS, default_calibration  # noqa: E402
from jaxplat.report import table  # noqa: E402
from jaxplat.serving import SATURATED  # noqa: E402

DATA = ROOT / "data" / "measured" / "calibration_rows.csv"
# The three flat fractions the model had before calibration, every other fraction 1 and every
# fixed time at the fit's lower bound (just inside it: z_of takes the log-odds within the bounds).
BEFORE = {**{n: 1.0 if unit == "fraction" else cal.BOUNDS[n][0] * 1.0000001
             for n, (_, _, unit, _) in EFFICIENCY_PARAMS.items()},
          "compute": 0.7, "memory": 0.8, "network": 0.8}
UNITS = {"throughput_tok_s": "output tokens/s", "ttft_s": "s", "tpot_s": "s"}


def errors(pred, rows, keep):
    """(median |error|, median signed error) over the rows in `keep` with a
    prediction; a latency the model finds unstable (SATURATED s: the load is
    past its capacity) is counted apart, '(k unstable)'."""
    latency = np.array([r.metric != "throughput_tok_s" for r in rows])
    ok = keep & np.isfinite(pred) & ~(latency & (pred >= SATURATED))
    e = pred[ok] / np.array([r.value for r in rows])[ok] - 1.0
    apart = int((keep & ~ok).sum())
    tail = f" ({apart} unstable)" if apart else ""
    return (f"{100 * np.median(np.abs(e)):.1f}%{tail}", f"{100 * np.median(e):+.1f}%") if e.size else ("-", "-")


MARKERS = {"before": ("s", False), "after": ("o", True), "leave-one-chip-out": ("^", True)}
TITLES = {"throughput_tok_s": "output throughput", "ttft_s": "TTFT (mean)", "tpot_s": "TPOT (mean)"}


def parity_plot(rows, sets, path):
    """Log-log predicted vs measured, one panel per metric, one colour per
    chip, one marker per set; latencies the model finds unstable (a load
    past its capacity: SATURATED s) are counted in the title, not drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    chips = sorted({r.hardware for r in rows})
    colours = {c: plt.get_cmap("tab10")(i) for i, c in enumerate(chips)}
    fig, axes = plt.subplots(1, 3, figsize=(16, 6.6))
    for ax, metric in zip(axes, METRICS):
        idx = [i for i, r in enumerate(rows) if r.metric == metric]
        if not idx:
            ax.set_visible(False)
            continue
        meas = np.array([rows[i].value for i in idx])
        lo, hi = meas.min() / 2, meas.max() * 2
        hidden = {}
        for label, pred, _ in sets:
            marker, filled = MARKERS.get(label, ("o", True))
            p = pred[idx]
            shown = np.isfinite(p) & ((metric == "throughput_tok_s") | (p < SATURATED))
            hidden[label] = int((~shown).sum())
            for c in chips:
                k = np.array([rows[i].hardware == c for i in idx]) & shown
                if not k.any():
                    continue
                ax.scatter(meas[k], p[k], s=34 if filled else 26, marker=marker,
                           facecolors=colours[c] if filled else "none", edgecolors=colours[c], linewidths=1.0,
                           alpha=0.8 if filled else 0.6)
                lo, hi = min(lo, p[k].min() / 1.5), max(hi, p[k].max() * 1.5)
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        for f in (0.9, 1.1):
            ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        unit = UNITS[metric]
        ax.set_xlabel(f"measured ({unit})")
        ax.set_ylabel(f"predicted ({unit})")
        off = ", ".join(f"{n} {label}" for label, n in hidden.items() if n)
        ax.set_title(f"{TITLES[metric]}: {len(idx)} rows" + (f"\nunstable, not drawn: {off}" if off else ""),
                     fontsize=10)
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
    chip_handles = [Line2D([], [], marker="o", ls="", color=colours[c], label=c) for c in chips]
    set_handles = [Line2D([], [], marker=MARKERS.get(label, ("o", True))[0], ls="", color="0.3",
                          markerfacecolor="0.3" if MARKERS.get(label, ("o", True))[1] else "none", label=label)
                   for label, _, _ in sets]
    fig.legend(handles=chip_handles + set_handles, loc="lower center", bbox_to_anchor=(0.5, 0.0),
               ncol=len(chips) + len(sets), frameon=False)
    fig.suptitle("jaxplat predicted vs measured (solid line: parity, dotted: ±10%)")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    fig.savefig(path, dpi=110)


def _read_held_out(path, rows):
    """[rows] leave-one-chip-out predictions from `jaxplat calibrate --predictions`."""
    import csv
    by_line = {int(r["line"]): float(r["leave_one_hardware_out"]) for r in csv.DictReader(open(path))}
    missing = [r.line for r in rows if r.line not in by_line]
    if missing:
        raise SystemExit(f"{path}: no prediction for row {missing[0]} of the measured CSV (rerun calibrate)")
    return np.array([by_line[r.line] for r in rows])


def _engines_seen(rows, held, fitted):
    """Leave-one-chip-out errors apart for the rows whose fitted engines ran
    on another chip too: a left-out chip whose engine (TensorRT-LLM 0.17,
    only on H200) has no other rows is predicted at the reference engine,
    which says nothing of the chip."""
    parts = [set(cal.Predictor.parts(r)) & fitted for r in rows]
    seen = np.array([all(any(q.hardware != r.hardware and e in pq for q, pq in zip(rows, parts)) for e in pr)
                     for r, pr in zip(rows, parts)])
    out = []
    for load in sorted({r.load for r in rows}):
        for metric in METRICS:
            for label, keep in (("engines seen", seen), ("engines unseen", ~seen)):
                keep = keep & np.array([r.metric == metric and r.load == load for r in rows])
                if keep.any():
                    out.append([load, metric, label, int(keep.sum()), *errors(held, rows, keep)])
    print("\nLeave-one-chip-out, rows whose engine parts also ran on another chip (seen) or not")
    print(table(["load", "metric", "rows", "n", "|err|", "signed"], out, "lllrrr"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--held-out", action="store_true", help="add leave-one-chip-out predictions (refits)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--predictions", help="held-out predictions written by jaxplat calibrate --predictions")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "calibration_parity.png"))
    args = ap.parse_args(argv)
    from jaxplat.search import enable_compilation_cache
    enable_compilation_cache()
    rows = read_rows(args.data)
    names = [n for n in EFFICIENCY_PARAMS if n in cal.BOUNDS]
    shipped_cal = default_calibration()
    # the shipped engine values as factors on the global ones (before: 1, the reference engine)
    engine_fit = sorted({p for own in shipped_cal.engines.values() for p in own})
    pred = cal.Predictor(rows, names, engine_fit=engine_fit, engines=sorted(shipped_cal.engines))
    shipped = shipped_cal.parameters
    before = np.asarray(pred.predict(cal.z_of(pred, BEFORE)))
    after = np.asarray(pred.predict(cal.z_of(pred, {**pred.base, **shipped})))
    sets = [("before", before, False), ("after", after, True)]
    if args.predictions:
        held = _read_held_out(args.predictions, rows)
        sets = [("before", before, False), ("after", after, True), ("leave-one-chip-out", held, True)]
    elif args.held_out:
        held, _ = cal.held_out_predictions(pred, lambda r: r.hardware, args.steps)
        sets = [("before", before, False), ("after", after, True), ("leave-one-chip-out", held, True)]
    sources = sorted({r.source for r in rows})
    header = ["source", "metric", "rows"] + [f"{label} {k}" for label, *_ in sets for k in ("|err|", "signed")]
    out = []
    for src in sources + ["all"]:
        for metric in METRICS:
            keep = np.array([(src == "all" or r.source == src) and r.metric == metric for r in rows])
            if keep.any():
                out.append([src, metric, int(keep.sum())] + [x for _, p, _ in sets for x in errors(p, rows, keep)])
    print("Median |predicted / measured - 1| and median signed error, per source and metric")
    print(table(header, out, "llr" + "rr" * len(sets)))
    if len(sets) == 3:
        _engines_seen(rows, held, set(shipped_cal.engines))
    parity_plot(rows, sets, args.out)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
