"""Fit the MoE host time of the training step (TrainWorkload.moe_layer_host_s
and moe_expert_host_s, cost.training_moe.MOE_LAYER_HOST_S) on the Qwen3 MoE dev
rows and judge it on the DeepSeek-V3 ones, the split that
data/measured/training_split.yaml declared before this fit
(moe_host_fit_models, moe_host_validation_models).

The host time adds (micro-batches + pipeline fill) x MoE layers on the rank x
(layer + experts per chip x expert) seconds to a step, linear in the two
numbers, so each row is costed three times (at (0, 0), at a unit of each)
and the grid is evaluated from those. Grid: per layer 0..5 ms by 0.1 ms,
per expert 0..300 us by 5 us (bounds: 100-200 operators, or 10-20 launches
per expert, at PyTorch's 5-25 us of host work each). Objective: the mean
over the fit models of the median |log(pred / measured)| (each model weighs
the same). Prints the best, the fit and validation figures at it, and each
row; the defaults in cost.training_moe are set from it by hand.

    .venv/bin/python experiments/training/fit_moe_host.py
"""

import sys
from pathlib import Path

import jax
import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import SPLIT, family, is_test, runs  # noqa: E402

from jaxplat.cost.training import train_chips, train_step  # noqa: E402
from jaxplat.model import replace  # noqa: E402

LAYER = np.round(np.arange(0.0, 5.0001e-3, 0.1e-3), 6)
EXPERT = np.round(np.arange(0.0, 300.001e-6, 5e-6), 8)


def _base(name):
    return name.split(" (")[0]


def rows():
    """[(model, chip, source, measured tokens/s, step at (0,0), d step / d layer, d step / d expert, tokens/chip)]"""
    out = []
    for row, meas, inp in runs():
        if isinstance(inp, str) or is_test(row) or family(row["source"]) != "Megatron-Bridge/NeMo":
            continue
        model, hw, par, twl, to = inp
        if float(model.experts) <= 1:
            continue
        step = [float(jax.device_get(train_step(model, hw, par, replace(twl, moe_layer_host_s=a,
                                                                         moe_expert_host_s=b), to)).step_time_s)
                for a, b in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0))]
        tokens = float(twl.global_batch * twl.seq) / float(train_chips(par))
        out.append((_base(row["model"]), row["chip"][:5], row["source"].split()[-1], meas, step[0],
                    step[1] - step[0], step[2] - step[0], tokens))
    return out


def errors(data, a, b):
    """log(pred / measured) of each row at (layer a s, expert b s)."""
    return np.array([np.log(tok / (s0 + a * da + b * db) / meas) for _, _, _, meas, s0, da, db, tok in data])


def objective(data, models, a, b):
    e = errors(data, a, b)
    return np.mean([np.median(np.abs(e[[r[0] == mdl for r in data]])) for mdl in models])


def report(data, a, b, title):
    e = np.expm1(errors(data, a, b))
    print(f"{title}: {len(e)} rows, median |error| {100 * np.median(np.abs(e)):.1f}%, "
          f"median signed {100 * np.median(e):+.1f}%")
    return e


def main():
    split = yaml.safe_load(SPLIT.read_text())
    fit_models, val_models = split["moe_host_fit_models"], split["moe_host_validation_models"]
    data = rows()
    fit = [r for r in data if r[0] in fit_models]
    val = [r for r in data if r[0] in val_models]
    print(f"{len(fit)} fit rows ({', '.join(fit_models)}), {len(val)} validation rows ({', '.join(val_models)})")
    grid = np.array([[objective(fit, fit_models, a, b) for b in EXPERT] for a in LAYER])
    i, j = np.unravel_index(np.argmin(grid), grid.shape)
    a, b = LAYER[i], EXPERT[j]
    print(f"best: moe_layer_host_s {a * 1e3:.1f} ms, moe_expert_host_s {b * 1e6:.0f} us (objective {grid[i, j]:.4f}; "
          f"at (0, 0): {grid[0, 0]:.4f})")
    near = np.argwhere(grid <= grid[i, j] * 1.05)
    lo, hi = LAYER[near[:, 0]].min() * 1e3, LAYER[near[:, 0]].max() * 1e3
    elo, ehi = EXPERT[near[:, 1]].min() * 1e6, EXPERT[near[:, 1]].max() * 1e6
    print(f"within 5% of the best objective: layer {lo:.1f}..{hi:.1f} ms, expert {elo:.0f}..{ehi:.0f} us")
    for title, part in (("fit", fit), ("validation", val)):
        report(part, 0.0, 0.0, f"{title} at (0, 0)")
        e = report(part, a, b, f"{title} at the best")
        for r, x in zip(part, e):
            print(f"    {r[0]:18s} {r[1]:5s} {r[2]:9s} {100 * x:+6.1f}%")


if __name__ == "__main__":
    main()
