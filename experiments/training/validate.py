"""Predicted vs published tokens/s per chip of the training runs in
data/measured/training_2026-12.csv (issue 38).

Every row `jaxplat train` can express (experiments/training/runs.py says
which and how) is predicted with `cost.training.train_step` as shipped: no
parameter is fitted here. Prints, per source family, the rows, the median
|error| and the median signed error (predicted / measured - 1) of the dev
rows; with --test, once and at the end of the work, the same on the test
rows that data/measured/training_split.yaml holds out (whole source families).
A family with both dense and MoE rows also gets a line for each kind.

    .venv/bin/python experiments/training/validate.py [--rows] [--test]
"""

import argparse
import collections
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import family, is_test, runs  # noqa: E402

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
    args = ap.parse_args()
    dev, test, skipped = [], [], collections.Counter()
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
        if args.rows and not is_test(row):
            print(f"{family(row['source'])[:22]:22s} {row['model'][:24]:24s} {row['chip'][:14]:14s} "
                  f"x{row['chips']:>5s} tp{row['tp'] or 1} pp{row['pp'] or 1} vp{row['vp'] or 1} cp{row['cp'] or 1} "
                  f"ep{row['ep'] or 1} mb{row['micro_batch'] or 1} {row['dtype'][:10]:10s} "
                  f"pred {pred:9.1f} meas {measured:9.1f} {100 * err:+6.1f}%{'' if fits else ' (does not fit)'}")
    print("Rows not expressible (family, reason: rows):")
    for (fam, why), n in sorted(skipped.items()):
        print(f"  {fam}, {why}: {n}")
    summary(dev, "DEV rows (may be looked at; backward_efficiency and the MoE host time are fitted on them)")
    if args.test:
        summary(test, "TEST rows (held out by data/measured/training_split.yaml; reported once)")


if __name__ == "__main__":
    main()
