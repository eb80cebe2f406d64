"""Extreme-scale models and contexts: GPT-4 1.8T (MoE), SuperLLM-10T (MoE) and
SuperLLM-5T (dense) serving one user at 5 tokens/s (TPOT 0.2 s) with contexts
from 8k to 2M tokens: memory capacity and bandwidth the platform needs
(GenZ's closed forms, genz profile, fp8), and B200-class chips (180 GB at 8 TB/s)
that would provide them.

    .venv/bin/python experiments/paper/extreme_scale.py [--quick] [--out PNG]
"""

import _common as c
import numpy as np

import jaxplat as jp
from jaxplat.design import closed_forms

MODELS = (("gpt-4-1.8t", "GPT-4 1.8T (MoE 16x top-2)"), ("superllm-10t-moe", "SuperLLM 10T (MoE 32x top-4)"),
          ("superllm-5t-dense", "SuperLLM 5T (dense)"))
CONTEXTS = (8192, 32768, 131072, 524288, 1048576, 2097152)
B200_MEM, B200_BW = 180e9, 8e12  # DGX B200 datasheet per GPU (specs/hardware/b200.yaml)


def main(argv=None):
    a = c.parser(__doc__, "extreme_scale").parse_args(argv)
    c.setup()
    contexts = CONTEXTS[::2] if a.quick else CONTEXTS
    opts, par = jp.Options(profile="genz"), jp.Parallel()
    req = {}
    for name, _ in MODELS:
        model = jp.load_model(name)
        for ctx in contexts:
            wl = c.workload("chatbot", "fp8", batch=1, beams=1, prompt=ctx, output=1000, tpot_slo=0.2)
            req[(name, ctx)] = {k: float(v) for k, v in closed_forms(model, par, wl, opts).items()}
    print("One user at 5 tokens/s (TPOT 0.2 s), fp8, output 1000 tokens; GenZ closed forms")
    rows = []
    for name, label in MODELS:
        for ctx in contexts:
            r = req[(name, ctx)]
            chips = max(r["mem_bytes"] / B200_MEM, r["decode_mem_bw_bytes_s"] / B200_BW)
            rows.append([label, c.tokens(ctx), f"{r['weights_bytes'] / c.TB:.3g} TB", f"{r['kv_bytes'] / c.TB:.3g} TB",
                         f"{r['mem_bytes'] / c.TB:.3g} TB", f"{r['decode_mem_bw_bytes_s'] / c.TB:.3g} TB/s",
                         f"{r['prefill_flops'] / 1e18:.3g} EFLOP", f"{int(np.ceil(chips))}"])
    print(c.table(["model", "context", "weights", "KV", "memory", "memory bandwidth", "prefill work",
                   "B200-class chips"], rows, "lrrrrrrr"))

    fig, axes = c.figure(1, 3, size=(14, 4.4))
    for name, label in MODELS:
        for ax, key, unit in ((axes[0][0], "mem_bytes", c.TB), (axes[0][1], "decode_mem_bw_bytes_s", c.TB)):
            ax.plot(contexts, [req[(name, x)][key] / unit for x in contexts], marker="o", ms=3, label=label)
        axes[0][2].plot(contexts, [max(req[(name, x)]["mem_bytes"] / B200_MEM,
                                       req[(name, x)]["decode_mem_bw_bytes_s"] / B200_BW) for x in contexts],
                        marker="o", ms=3, label=label)
    labels = ("memory capacity (TB)", "memory bandwidth (TB/s)", "B200-class chips (180 GB, 8 TB/s)")
    c.log2_axes(axes[0], contexts, [c.tokens(x) for x in contexts], "context (tokens)", labels)
    c.save(fig, a.out, "Extreme-scale models, one user at 5 tokens/s: what the platform must hold and stream (fp8)",
           axes[0][0], 3)
    return req


if __name__ == "__main__":
    main()
