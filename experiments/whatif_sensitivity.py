"""GenZ-style what-if (memory bandwidth, FLOP/s, link bandwidth ±) from
sensitivities, checked against the exact cost model.

For a deployment (default: Llama-3.1-70B, chatbot, H100 SXM, tp=8) this prints
the elasticity table (d log metric / d log hardware number, autodiff and ±1%
finite differences), then sweeps each of HBM bandwidth, FLOP/s and scale-up
link bandwidth from 0.5x to 2x: the exact TTFT/TPOT against the first-order
prediction (1 + x)^elasticity, and writes a figure.

    .venv/bin/python experiments/whatif_sensitivity.py [--model M] [--hardware H] [--workload W] [--tp N] [--out PNG]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxplat as jp
from jaxplat.design import codesign as cd
from jaxplat.design import sensitivity
from jaxplat.report import table

# Sensitivity labels are the hardware numbers' paths (design.sensitivity; hardware groups).
KNOBS = (("memory.bandwidth[0]", "HBM bandwidth"), ("chip.flops[bf16]", "FLOP/s"),
         ("network.bandwidth[0]", "scale-up link bandwidth"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--hardware", default="h100-sxm")
    ap.add_argument("--workload", default="chatbot")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--profile", default="default")
    ap.add_argument("--out", default="experiments/whatif_sensitivity.png")
    a = ap.parse_args()
    model, hw, wl = jp.load_model(a.model), jp.load_hardware(a.hardware), jp.load_workload(a.workload)
    par, opts = jp.Parallel(tp=a.tp), jp.Options(profile=a.profile)

    labels, metrics, grad, fd = cd.elasticities(model, hw, par, wl, opts)
    keep = np.abs(grad).max(axis=1) > 1e-4
    print(f"{a.model} / {a.workload} on {a.hardware}, tp={a.tp}: elasticity d log(metric) / d log(number), "
          "autodiff (finite difference ±1%)")
    print(table(["hardware number"] + metrics,
                [[labels[i]] + [f"{grad[i, j]:+.3f} ({fd[i, j]:+.3f})" for j in range(len(metrics))]
                 for i in range(len(labels)) if keep[i]], "l" + "r" * len(metrics)))
    # Whole numbers: a network domain is a chip count (at tp = domain size it sits
    # on a kink, one-sided derivative); SMs and tile sides, a staircase.
    smooth_rows = [i for i, lab in enumerate(labels)
                   if not lab.startswith("network.domain") and lab not in sensitivity.STAIRCASES]
    print(f"max |autodiff - finite difference|: {np.abs(grad - fd)[smooth_rows].max():.2e} over the continuous "
          "numbers (network domains, SMs and tile sides are whole numbers: kinks and staircases)")

    numbers = cd.hardware_numbers(model, hw, par, wl, opts)
    index = {lab: j for j, (lab, *_) in enumerate(numbers)}
    scales = np.geomspace(0.5, 2.0, 13)

    @jax.jit
    def sweep(j_onehot, s):
        m = jp.evaluate(model, cd._scaled(hw, numbers, j_onehot * jnp.log(s)), par, wl, opts)
        return jnp.stack([m.ttft, m.tpot])

    rows, curves = [], {}
    base = np.asarray(sweep(jnp.zeros(len(numbers)), 1.0))
    for lab, name in KNOBS:
        if lab not in index:
            raise SystemExit(f"{lab}: not among the hardware numbers ({', '.join(index)})")
        onehot = jnp.zeros(len(numbers)).at[index[lab]].set(1.0)
        exact = np.stack([np.asarray(sweep(onehot, float(s))) for s in scales]) / base
        e = grad[labels.index(lab), [metrics.index("ttft"), metrics.index("tpot")]]
        pred = scales[:, None] ** e[None, :]
        curves[name] = (exact, pred)
        for s in (0.5, 0.9, 1.1, 2.0):
            i = int(np.argmin(np.abs(scales - s)))
            rows.append([name, f"{(scales[i] - 1) * 100:+.0f}%",
                         f"{(exact[i, 0] - 1) * 100:+.1f}% ({(pred[i, 0] - 1) * 100:+.1f}%)",
                         f"{(exact[i, 1] - 1) * 100:+.1f}% ({(pred[i, 1] - 1) * 100:+.1f}%)"])
    print("\nwhat-if: exact change (first-order prediction from the elasticity)")
    print(table(["knob", "change", "TTFT", "TPOT"], rows, "lrrr"))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for k, title in enumerate(("TTFT", "TPOT")):
        for name, (exact, pred) in curves.items():
            line, = axes[k].plot(scales, exact[:, k], marker="o", ms=3, label=f"{name} (exact)")
            axes[k].plot(scales, pred[:, k], ls="--", color=line.get_color(), label=f"{name} (elasticity)")
        axes[k].set_xscale("log")
        axes[k].set_yscale("log")
        # Plain tick labels (matplotlib's log axes print 6x10^-1 or nothing).
        axes[k].set_xticks([0.5, 0.7, 1.0, 1.4, 2.0], labels=["0.5x", "0.7x", "1x", "1.4x", "2x"])
        lo, hi = axes[k].get_ylim()
        yt = [v for v in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0) if lo <= v <= hi]
        axes[k].set_yticks(yt, labels=[f"{v:g}" for v in yt])
        axes[k].xaxis.set_minor_formatter(NullFormatter())
        axes[k].yaxis.set_minor_formatter(NullFormatter())
        axes[k].grid(True, which="major", alpha=0.3)
        axes[k].set_xlabel("hardware number / baseline")
        axes[k].set_ylabel(f"{title} / baseline")
        axes[k].set_title(f"{title}: {a.model}, {a.workload}, {a.hardware} tp={a.tp}")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"\nfigure: {a.out}")


if __name__ == "__main__":
    main()
