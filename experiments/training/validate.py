"""Predicted vs published tokens/s per chip of the training runs in
data/measured/training_2026-12.csv (issue 38).

Every row `jaxplat train` can express (experiments/training/runs.py says
which and how) is predicted with `cost.training.train_step` as shipped: no
parameter is fitted here. Prints, per source family, the rows, the median
|error| and the median signed error (predicted / measured - 1) of the dev
rows; with --test, once and at the end of the work, the same on the test
rows that data/measured/training_split.yaml holds out (whole source families).
A family with both dense and MoE rows also gets a line for each kind.

    .venv/bin/python experiments/training/validate.py [--rows] [--scaling] [--scaling-plot PNG] [--test] [--plot PNG]
    .venv/bin/python experiments/training/validate.py --long-sequence   # NeMo's long-sequence tables, both readings

--scaling prints, for dev runs that differ only in their chip count (same
source family, model, chip, precision, sequence, micro-batch and degrees
but data parallelism), published and predicted tokens/s per chip at each
count, each relative to the smallest count: how the per-chip rate falls
as data parallelism grows, measured and modelled; --scaling-plot draws
those ratios against the chip count, a line per run (solid: published,
dashed: predicted).

--long-sequence prints, in place of the rest, NeMo's long-sequence
context-parallel tables (dev rows the figures leave out: their TFLOP/s per
GPU converts to tokens/s by a FLOP count that is causal in NeMo's 2025
formula and whole-matrix in its 2024 one), predicted against both readings.

--plot writes predicted against published tokens/s per chip, log-log, and
their ratio, a point per row (colour: source family; marker: chip
generation; test rows hollow, with --test only) beside y = x and ±10%.
"""

import argparse
import collections
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import family, is_test, nemo_long_sequence_tokens, runs  # noqa: E402

from jaxplat.cost.training import train_step  # noqa: E402


def predict(inputs):
    m = jax.device_get(train_step(*inputs))
    return float(m.tokens_per_s_per_chip), bool(m.fits)


def summary(results, title):
    print(f"\n{title}")
    print(f"{'family':28s} {'rows':>5s} {'median |err|':>13s} {'median signed':>14s} {'not fitting':>12s}")
    fams = collections.defaultdict(list)
    for fam, err, fits, moe in results:
        fams[fam].append((err, fits))
    kinds = {fam: {moe for f, _, _, moe in results if f == fam} for fam in fams}
    for fam, err, fits, moe in results:
        if len(kinds[fam]) > 1:
            fams[f"{fam}, {'MoE' if moe else 'dense'}"].append((err, fits))
    for fam, v in sorted(fams.items()):
        e = np.array([x for x, _ in v])
        print(f"{fam:28s} {len(e):5d} {100 * np.median(np.abs(e)):12.1f}% {100 * np.median(e):+13.1f}% "
              f"{sum(not f for _, f in v):12d}")
    e = np.array([x for _, x, _, _ in results])
    if len(e):
        print(f"{'all':28s} {len(e):5d} {100 * np.median(np.abs(e)):12.1f}% {100 * np.median(e):+13.1f}%")
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", action="store_true", help="print every dev row's prediction")
    ap.add_argument("--test", action="store_true", help="also predict and report the held-out test rows (once, at "
                                                        "the end of the work: they must not steer it)")
    ap.add_argument("--plot", metavar="PNG", help="write the parity plot of the rows predicted to this file")
    ap.add_argument("--scaling", action="store_true", help="print per-chip rates against the chip count (dev rows)")
    ap.add_argument("--scaling-plot", metavar="PNG", help="draw those per-chip rates against the chip count")
    ap.add_argument("--long-sequence", action="store_true",
                    help="print NeMo's long-sequence tables (left out of the figures) against both FLOP counts")
    args = ap.parse_args()
    if args.long_sequence:
        return long_sequence_table()
    dev, test, skipped = [], [], collections.Counter()
    points = []  # (family, chip, measured, predicted, test)
    series = collections.defaultdict(dict)  # scaling_key -> {chips: (measured, predicted)}
    for row, measured, inp in runs():
        if is_test(row) and not args.test:
            continue
        if isinstance(inp, str):
            skipped[(family(row["source"]), inp)] += 1
            continue
        pred, fits = predict(inp)
        err = pred / measured - 1.0
        moe = float(inp[0].experts) > 0
        (test if is_test(row) else dev).append((family(row["source"]), err, fits, moe))
        points.append((family(row["source"]), row["chip"], measured, pred, is_test(row)))
        if not is_test(row):
            series[scaling_key(row, inp)].setdefault(int(row["chips"]), (measured, pred))
        if args.rows and not is_test(row):
            print(f"{family(row['source'])[:22]:22s} {row['model'][:24]:24s} {row['chip'][:14]:14s} "
                  f"x{row['chips']:>5s} tp{row['tp'] or 1} pp{row['pp'] or 1} vp{row['vp'] or 1} cp{row['cp'] or 1} "
                  f"ep{row['ep'] or 1} mb{row['micro_batch'] or 1} {row['dtype'][:10]:10s} "
                  f"pred {pred:9.1f} meas {measured:9.1f} {100 * err:+6.1f}%{'' if fits else ' (does not fit)'}")
    print("Rows not expressible (family, reason: rows):")
    for (fam, why), n in sorted(skipped.items()):
        print(f"  {fam}, {why}: {n}")
    summary(dev, "DEV rows (may be looked at; backward_efficiency and the MoE host time are fitted on them)")
    if args.scaling:
        scaling_table(series)
    if args.scaling_plot:
        scaling_plot(series, args.scaling_plot)
        print(f"\nwrote {args.scaling_plot}")
    if args.test:
        summary(test, "TEST rows (held out by data/measured/training_split.yaml; reported once)")
    if args.plot:
        parity_plot(points, args.plot)
        print(f"\nwrote {args.plot}")


def long_sequence_table():
    """NeMo's long-sequence rows with their degrees: predicted tokens/s per chip against the published
    TFLOP/s per GPU read with the causal and with the whole-matrix attention count (runs.nemo_long_sequence_tokens)."""
    print(f"{'table':26s} {'chips':>6s} {'tp':>3s} {'cp':>3s} {'seq':>8s} {'predicted':>10s}  "
          f"{'causal':>17s}  {'whole matrix':>17s}   (tokens/s per chip; published by each count, and the error)")
    for row, causal, inp in runs(lambda r: nemo_long_sequence_tokens(r, causal=True)):
        if isinstance(inp, str):  # the tables' rows without CP give no degrees
            continue
        pred, _ = predict(inp)
        whole = nemo_long_sequence_tokens(row, causal=False)
        table = f"{row['source'].split('(')[-1].rstrip(')')}, {row['chip'].split(' ')[0][:9]}"
        print(f"{table[:26]:26s} {row['chips']:>6s} {row['tp']:>3s} {row['cp']:>3s} {row['seq_len']:>8s} "
              f"{pred:10.1f}  {causal:9.1f} {100 * (pred / causal - 1):+6.1f}%  "
              f"{whole:9.1f} {100 * (pred / whole - 1):+6.1f}%")


def scaling_key(row, inp):
    """What a row shares with the rows that differ from it only in their
    chip count (and so in their data-parallel degree)."""
    _, _, par, twl, _ = inp
    return (family(row["source"]), row["model"].strip(), row["chip"], row["dtype"], float(twl.seq),
            float(twl.micro_batch), int(par.tp), int(par.pp), int(par.vp), int(par.cp), float(twl.zero))


def scaling_runs(series, least=3):
    """[(key, counts, published ratios, predicted ratios, {chips: (published,
    predicted)})] of every run with at least `least` chip counts, sorted:
    each per-chip rate over its value at the smallest count."""
    out = []
    for key, pts in sorted(series.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len(pts) >= least:
            counts = sorted(pts)
            m0, p0 = pts[counts[0]]
            out.append((key, counts, [pts[n][0] / m0 for n in counts], [pts[n][1] / p0 for n in counts], pts))
    return out


def scaling_table(series):
    """Per-chip tokens/s at each chip count of every run of `scaling_runs`:
    published, both ratios to the smallest count, and the error."""
    print("\nPer-chip rate against the chip count (dev runs that differ only in it; ratios to the smallest count)")
    print(f"{'family':14s} {'model':10s} {'chip':14s} {'seq':>6s} {'mb':>3s}  chips: published tok/s, "
          f"ratio published / predicted, error")
    for key, counts, meas, pred, pts in scaling_runs(series):
        fam, model, chip, _, seq, mb = key[:6]
        cells = [f"{n}: {pts[n][0]:.0f}, {a:.3f} / {b:.3f}, {100 * (pts[n][1] / pts[n][0] - 1):+.1f}%"
                 for n, a, b in zip(counts, meas, pred)]
        print(f"{fam[:14]:14s} {model[:10]:10s} {chip[:14]:14s} {seq:6.0f} {mb:3.0f}  " + "; ".join(cells))


def scaling_plot(series, path):
    """The ratios of `scaling_runs` against the chip count (log), a colour
    per run: published solid with markers, predicted dashed."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(13, 6))
    colours = plt.get_cmap("tab20").colors
    for i, (key, counts, meas, pred, _) in enumerate(scaling_runs(series)):
        c = colours[i % len(colours)]
        label = f"{key[1]} on {key[2].split(' ')[0]}, mb {key[5]:g} ({key[0]})"
        ax.plot(counts, meas, color=c, marker=chip_marker(key[2]), ms=5, lw=1.2, label=label)
        ax.plot(counts, pred, color=c, ls="--", lw=1.0)
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set(xscale="log", xlabel="chips", ylabel="tokens/s per chip / its value at the smallest count",
           title="Per-chip rate against the chip count (solid: published, dashed: predicted)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _pyplot():
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def chip_marker(chip: str) -> str:
    """The plot marker of a chip's generation (GENERATIONS; others a diamond)."""
    return next((m for key, m, _ in GENERATIONS if key in chip), "D")


GENERATIONS = (("A100", "o", "A100"), ("H100", "s", "H100"), ("B200", "^", "B200"))


def parity_plot(points, path):
    """Predicted against published tokens/s per chip, log-log, and their
    ratio against the published figure (module doc)."""
    plt = _pyplot()
    fams = sorted({p[0] for p in points})
    colours = dict(zip(fams, plt.get_cmap("tab10").colors))
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(13, 5.8))
    for fam, chip, meas, pred, held in points:
        style = dict(s=18, marker=chip_marker(chip), linewidths=0.8,
                     facecolors="none" if held else colours[fam], edgecolors=colours[fam])
        ax.scatter(meas, pred, **style)
        ax_r.scatter(meas, pred / meas, **style)
    lo = 0.7 * min(min(p[2], p[3]) for p in points)
    hi = 1.4 * max(max(p[2], p[3]) for p in points)
    xs = np.geomspace(lo, hi, 50)
    ax.plot(xs, xs, color="k", lw=0.8)
    for f in (0.9, 1.1):
        ax.plot(xs, f * xs, color="k", lw=0.6, ls="--")
        ax_r.axhline(f, color="k", lw=0.6, ls="--")
    ax_r.axhline(1.0, color="k", lw=0.8)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="published tokens/s per chip",
           ylabel="predicted tokens/s per chip (train_step)", title="Predicted vs published (dashed: ±10%)")
    ax_r.set(xscale="log", yscale="log", xlim=(lo, hi), xlabel="published tokens/s per chip",
             ylabel="predicted / published", title="Ratio per row (dashed: ±10%)")
    ticks = [t for t in (0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0)
             if min(p[3] / p[2] for p in points) / 1.1 <= t <= max(p[3] / p[2] for p in points) * 1.1]
    ax_r.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax_r.minorticks_off()
    handles = [plt.Line2D([], [], ls="", marker="o", color=colours[f], label=f) for f in fams]
    handles += [plt.Line2D([], [], ls="", marker=m, color="grey", label=name) for _, m, name in GENERATIONS]
    if any(p[4] for p in points):
        handles.append(plt.Line2D([], [], ls="", marker="o", markerfacecolor="none", color="grey",
                                  label="test row (hollow)"))
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
