"""Minimum chips per model: the fewest chips (a power of two, as GenZ's paper
notebooks count them) on which some TP x PP split of the model fits and is
feasible (heads % tp, layers >= pp), on the paper's baseline NPU (40 GB), an
H100 SXM (80 GB) and a B200 (180 GB). Chat use case, batch 1, fp8. Beside it the
closed-form lower bound ceil((weights + KV) / chip memory).

    .venv/bin/python experiments/paper/min_chips.py [--quick] [--out PNG]
"""

import _common as c
import numpy as np

import jaxplat as jp
from jaxplat.design import closed_forms

MODELS = (("llama-3.1-8b", "Llama-3.1-8B"), ("mixtral-8x7b", "Mixtral-8x7B"), ("llama-3.1-70b", "Llama-3.1-70B"),
          ("mixtral-8x22b", "Mixtral-8x22B"), ("gpt-3-175b", "GPT-3 175B"), ("llama-3.1-405b", "Llama-3.1-405B"),
          ("grok-1", "Grok-1 314B"), ("gpt-4-1.8t", "GPT-4 1.8T"), ("superllm-5t-dense", "SuperLLM 5T"),
          ("superllm-10t-moe", "SuperLLM 10T"))
CHIPS = tuple(2 ** i for i in range(13))  # 1 .. 4096
TPS = (1, 2, 4, 8)


def main(argv=None):
    a = c.parser(__doc__, "min_chips").parse_args(argv)
    c.setup()
    models = MODELS[:3] if a.quick else MODELS
    hws = (("baseline NPU (40 GB)", c.npu()), ("H100 SXM (80 GB)", jp.load_hardware("h100-sxm")),
           ("B200 (180 GB)", jp.load_hardware("b200")))
    wl = c.workload("chatbot", "fp8", beams=1)
    configs, keys, window = [], [], {}
    for name, _ in models:
        model = jp.load_model(name)
        window[name] = float(model.max_context)  # max_position_embeddings, 0 when unknown
        for hname, hw in hws:
            for n in CHIPS:
                for tp in TPS:
                    if tp <= n:
                        configs.append((model, hw, jp.Parallel(tp=tp, pp=n // tp), wl))
                        keys.append((name, hname, n))
    r = c.evaluate_many(configs)
    need = {}
    for i, k in enumerate(keys):
        if r["feasible"][i]:
            need[k[:2]] = min(need.get(k[:2], np.inf), k[2])
    bound = {name: float(closed_forms(jp.load_model(name), jp.Parallel(), wl, jp.Options())["mem_bytes"])
             for name, _ in models}
    cap = {hname: float(np.asarray(hw.memory.size).sum() + np.asarray(hw.memory.sram_size)) for hname, hw in hws}
    print("Fewest chips (power of two) with a feasible TP x PP split, chat, batch 1, fp8; "
          "(lower bound: weights + KV / chip memory)")
    rows = [[lab, f"{bound[n] / c.GB:.4g} GB"] +
            [f"{need.get((n, h), np.inf):g} ({int(np.ceil(bound[n] / cap[h]))})" for h, _ in hws] for n, lab in models]
    print(c.table(["model", "weights + KV"] + [h for h, _ in hws], rows))
    context = float(wl.prompt + wl.output)
    for name, lab in models:  # no chip count helps a context past the model's trained positions
        if 0 < window[name] < context:
            print(f"{lab}: inf: chat's {context:.0f}-token context exceeds its {window[name]:.0f}-token window "
                  "(max_position_embeddings)")

    fig, axes = c.figure(1, 1, size=(10, 4.4))
    ax = axes[0][0]
    x = np.arange(len(models))
    w = 0.27
    for j, (h, _) in enumerate(hws):
        ax.bar(x + (j - 1) * w, [need.get((n, h), np.nan) for n, _ in models], w, color=f"C{j}", label=h)
        ax.scatter(x + (j - 1) * w, [np.ceil(bound[n] / cap[h]) for n, _ in models], marker="_", s=120, color="k",
                   label="ceil((weights + KV) / chip memory)" if j == 0 else None, zorder=3)
    ax.set_yscale("log", base=2)
    ax.set_yticks(CHIPS[:10], [str(n) for n in CHIPS[:10]])
    ax.minorticks_off()
    ax.set_xticks(x, [lab for _, lab in models], rotation=20, fontsize=8)
    ax.set_ylabel("chips")
    c.save(fig, a.out, "Minimum chips per model (chat, batch 1, fp8): bars = cost model, ticks = capacity bound", ax, 4)
    return need


if __name__ == "__main__":
    main()
