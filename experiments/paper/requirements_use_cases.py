"""Platform requirements per use case: memory capacity, memory bandwidth and
compute a platform must offer for each model and use case (GenZ's closed forms,
jaxplat.design.closed_forms under the genz profile), as a table and 3-D bars.

mem = weights + KV of the whole request (beams included); memory bandwidth =
(weights a decode step uses + KV) / TPOT SLO; compute = prefill FLOPs / TTFT SLO.
Use cases: GenZ's table (batch 1; QA, chatbot, QA+RAG, summarization, code
generation with their beams, lengths and SLOs), fp8 throughout.

    .venv/bin/python experiments/paper/requirements_use_cases.py [--quick] [--out PNG]
"""

import _common as c
import numpy as np

import jaxplat as jp
from jaxplat.design import closed_forms

MODELS = (("llama-2-7b", "LLaMA-2-7B"), ("mixtral-8x7b", "Mixtral-8x7B"), ("llama-3.1-70b", "Llama-3.1-70B"),
          ("gpt-3-175b", "GPT-3 175B"), ("gpt-4-1.8t", "GPT-4 1.8T"))
CASES = (("qa", "QA"), ("chatbot", "Chat"), ("qa-rag", "QA+RAG"), ("summarization", "Summ."),
         ("code-generation", "Code"))
QUANTITIES = (("mem_bytes", "memory (GB)", c.GB), ("decode_mem_bw_bytes_s", "memory bandwidth (TB/s)", c.TB),
              ("prefill_flops_s", "compute (TFLOP/s)", c.TB))


def main(argv=None):
    a = c.parser(__doc__, "requirements_use_cases").parse_args(argv)
    c.setup()
    models = MODELS[::2] if a.quick else MODELS
    opts, par = jp.Options(profile="genz"), jp.Parallel()
    req = {}
    for name, _ in models:
        model = jp.load_model(name)
        for case, _ in CASES:
            wl = c.workload(case, "fp8")
            req[(name, case)] = {k: float(v) for k, v in closed_forms(model, par, wl, opts).items()}
    print("Platform requirements (GenZ closed forms, genz profile, fp8, batch 1)")
    for key, label, unit in QUANTITIES:
        rows = [[lab] + [f"{req[(n, cs)][key] / unit:.4g}" for cs, _ in CASES] for n, lab in models]
        print(f"\n{label}")
        print(c.table(["model"] + [cl for _, cl in CASES], rows))

    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(16, 5.6))
    xs, ys = np.meshgrid(np.arange(len(CASES)), np.arange(len(models)), indexing="ij")
    for k, (key, label, unit) in enumerate(QUANTITIES):
        ax = fig.add_subplot(1, 3, k + 1, projection="3d")
        z = np.array([[req[(n, cs)][key] / unit for n, _ in models] for cs, _ in CASES])
        lz = np.log10(z)
        floor = np.floor(lz.min())
        colors = plt.cm.viridis((ys.ravel() + 0.5) / len(models))
        ax.bar3d(xs.ravel() - 0.3, ys.ravel() - 0.3, floor, 0.6, 0.6, (lz - floor).ravel(), color=colors, shade=True)
        ax.set_xticks(range(len(CASES)), [cl for _, cl in CASES], fontsize=7, rotation=20)
        ax.set_yticks(range(len(models)), [lab for _, lab in models], fontsize=7, rotation=-15)
        ticks = np.arange(floor, np.ceil(lz.max()) + 1)
        ax.set_zticks(ticks, [f"{10 ** t:g}" for t in ticks], fontsize=7)
        ax.set_zlim(floor, ticks[-1])
        ax.set_title(f"{label}, log scale", fontsize=10)
        ax.view_init(elev=22, azim=-58)
    fig.suptitle("What each use case requires of a platform (GenZ closed forms, fp8, batch 1)", fontsize=11)
    fig.subplots_adjust(left=0.01, right=0.99, wspace=0.05)
    import os
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print(f"\nfigure: {os.path.relpath(a.out)}")
    return req


if __name__ == "__main__":
    main()
