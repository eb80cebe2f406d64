"""Fit TrainWorkload.attention_backward_speed of the two attention kernels
LLM Foundry's runs use (Triton FlashAttention on Ampere, FlashAttention-2 on
Hopper), on the dev rows the split declares for it
(data/measured/training_split.yaml: `attention_backward_fit_models`), and
judge each value on the larger models (`attention_backward_validation_models`).

What the number is: the kernel's backward matmul rate over its forward's,
beyond `backward_efficiency` (which every backward row shares). The forward
of FlashAttention-2 on Hopper is pinned by kernel rows (FA2_ON_HOPPER); no
measured backward of either kernel is in the data, so the training rows'
growth with the sequence length (attention's share of the step goes from a
few percent at 512 tokens to three quarters at 65,536) is what fixes it.

Objective, per kernel: the median absolute deviation of log(pred /
measured) about its median over that kernel's fit rows. It measures how the
error moves with attention's share, not its level: the level belongs to
`backward_efficiency` (fit_backward.py), refitted after this one. Grid of
0.05 over (0, 1] (the backward at most as fast as the forward, its bound).
Prints, per kernel and value, the fit and validation objectives and the
validation rows' median error by sequence length; then the best.

    .venv/bin/python experiments/training/fit_attention_backward.py
"""

import collections
import sys
from pathlib import Path

import jax
import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import family, is_test, runs  # noqa: E402

from jaxplat.cost.training import train_step  # noqa: E402
from jaxplat.model import replace  # noqa: E402

SPLIT = Path(__file__).resolve().parents[2] / "data/measured/training_split.yaml"
GRID = np.round(np.arange(0.3, 1.0001, 0.05), 3)
KERNELS = {"Triton FlashAttention, A100": "A100", "FlashAttention-2, H100": "H100"}


def mad(r):
    r = np.asarray(r)
    return float(np.median(np.abs(r - np.median(r)))) if len(r) else float("nan")


def main():
    split = yaml.safe_load(SPLIT.read_text())
    fit_models = set(split["attention_backward_fit_models"])
    val_models = set(split["attention_backward_validation_models"])
    rows = [(row, meas, inp) for row, meas, inp in runs() if not is_test(row) and not isinstance(inp, str)
            and family(row["source"]) == "LLM Foundry"]
    unknown = {row["model"] for row, _, _ in rows} - fit_models - val_models
    if unknown:
        sys.exit(f"{SPLIT}: LLM Foundry models in neither attention_backward list: {sorted(unknown)}")
    for kernel, chip in KERNELS.items():
        mine = [x for x in rows if x[0]["chip"].startswith(chip)]
        print(f"\n{kernel}: {sum(r['model'] in fit_models for r, _, _ in mine)} fit rows, "
              f"{sum(r['model'] in val_models for r, _, _ in mine)} validation rows")
        best = None
        for s in GRID:
            res = collections.defaultdict(list)  # (split, seq) -> log errors
            for row, meas, (model, hw, par, twl, to) in mine:
                m = jax.device_get(train_step(model, hw, par, replace(twl, attention_backward_speed=s), to))
                part = "fit" if row["model"] in fit_models else "val"
                res[part, int(row["seq_len"])].append(np.log(float(m.tokens_per_s_per_chip) / meas))
            fit = [e for (p, _), v in res.items() if p == "fit" for e in v]
            val = [e for (p, _), v in res.items() if p == "val" for e in v]
            trend = " ".join(f"{k[1]}:{100 * np.expm1(np.median(v)):+.0f}%" for k, v in sorted(res.items())
                             if k[0] == "val")
            print(f"  speed {s:.2f}: fit {mad(fit):.4f}  validation {mad(val):.4f}  "
                  f"(validation median {100 * np.expm1(np.median(val)):+.1f}%; by sequence {trend})")
            best = (mad(fit), s, mad(val)) if best is None or mad(fit) < best[0] else best
        print(f"best attention_backward_speed for {kernel}: {best[1]:.2f} "
              f"(fit objective {best[0]:.4f}, validation {best[2]:.4f})")


if __name__ == "__main__":
    main()
