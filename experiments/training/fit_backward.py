"""Fit TrainWorkload.backward_efficiency, the one training parameter chosen
on measured runs, on the DEV rows only (data/measured/training_split.yaml).

Grid of 0.025 over [0.5, 1] (its physical bounds: backward kernels reach at most the
forward's rate; FlashAttention-2's backward reaches 63/73 of its forward's on
A100); objective: the mean over source families of the median |log(pred /
measured)| (each family weighs the same, whatever its row count), on the
dense models' rows (MoE rows have their own unknowns: routing overheads).
Prints the objective per value and the best; cost.training's default is set
from it by hand.

    .venv/bin/python experiments/training/fit_backward.py
"""

import collections
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import family, is_test, runs  # noqa: E402

from jaxplat.cost.training import train_step  # noqa: E402
from jaxplat.model import replace  # noqa: E402

GRID = np.round(np.arange(0.5, 1.0001, 0.025), 3)


def main():
    rows = [(row, meas, inp) for row, meas, inp in runs()
            if not is_test(row) and not isinstance(inp, str) and float(inp[0].experts) == 0]
    print(f"{len(rows)} dense dev rows")
    best = None
    for eff in GRID:
        fams = collections.defaultdict(list)
        for row, meas, (model, hw, par, twl, to) in rows:
            m = jax.device_get(train_step(model, hw, par, replace(twl, backward_efficiency=eff), to))
            fams[family(row["source"])].append(np.log(float(m.tokens_per_s_per_chip) / meas))
        obj = np.mean([np.median(np.abs(v)) for v in fams.values()])
        print(f"backward_efficiency {eff:.3f}: objective {obj:.4f}  " +
              "  ".join(f"{f[:14]} {100 * np.median(v):+.1f}%" for f, v in sorted(fams.items())))
        best = (obj, eff) if best is None or obj < best[0] else best
    print(f"best backward_efficiency {best[1]:.3f} (objective {best[0]:.4f})")


if __name__ == "__main__":
    main()
