"""Megatron-LM's weak-scaling table (Narayanan et al., SC'21, Table 1: GPT
1.7B to 1T on 32 to 3,072 A100s, full recomputation) against jaxplat's
training step.

The published numbers are the rows of data/measured/training_2026-12.csv
(`source` "Megatron-LM SC21 ... Table 1"); the paper gives TFLOP/s per GPU by
its eq. (3), 96·B·s·l·h²·(1 + s/6h + V/16lh) FLOPs per step (recomputation
counted), so the prediction is printed in the same units: jaxplat's tokens/s
per chip times that formula's FLOPs per token. Micro-batch size and
interleaving are not in the table: micro-batch 1, no interleaving (vp = 1),
Megatron-LM 2021 without FlashAttention. Writes
experiments/training/megatron_weak_scaling.png.

    .venv/bin/python experiments/training/megatron_weak_scaling.py
"""

import sys
from pathlib import Path

import jax

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from runs import _megatron_flops, runs  # noqa: E402

from jaxplat.cost.training import train_step  # noqa: E402


def main():
    rows = [(r, meas, inp) for r, meas, inp in runs()
            if r["source"].startswith("Megatron-LM SC21 (Narayanan et al.) Table 1") and not isinstance(inp, str)]
    out = []
    print(f"{'model':12s} {'GPUs':>5s} {'t':>2s} {'p':>3s} {'TFLOP/s pub':>12s} {'jaxplat':>8s} {'error':>7s} "
          f"{'bubble':>7s} {'tp comm':>8s} {'dp comm':>8s}")
    for r, meas, inp in rows:
        m = jax.device_get(train_step(*inp))
        per_token = _megatron_flops(r, 96.0, 16.0)
        pub = meas * per_token / 1e12
        pred = float(m.tokens_per_s_per_chip) * per_token / 1e12
        step = float(m.step_time_s)
        share = lambda x: 100 * float(x) / step  # noqa: E731
        out.append((r["model"], int(r["chips"]), pub, pred))
        print(f"{r['model']:12s} {r['chips']:>5s} {r['tp']:>2s} {r['pp']:>3s} {pub:12.0f} {pred:8.0f} "
              f"{100 * (pred / pub - 1):+6.1f}% {share(m.bubble):6.1f}% {share(m.comm[0].sum()):7.1f}% "
              f"{share(m.comm[4].sum()):7.1f}%")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    x = range(len(out))
    ax.plot(x, [o[2] for o in out], "o-", label="published (SC'21 Table 1)")
    ax.plot(x, [o[3] for o in out], "s--", label="jaxplat train")
    ax.set_xticks(list(x), [f"{o[0].split()[1]}\n{o[1]}" for o in out], fontsize=7)
    ax.set_ylabel("TFLOP/s per A100 (eq. 3, recompute counted)")
    ax.set_ylim(0, 200)
    ax.set_title("Megatron-LM weak scaling, GPT 1.7B-1T on 32-3,072 A100s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(HERE / "megatron_weak_scaling.png", dpi=120)
    print(f"wrote {HERE / 'megatron_weak_scaling.png'}")


if __name__ == "__main__":
    main()
