"""Dense (MHA) vs GQA vs MoE vs Mamba: the decode step and the KV cache / state
per sequence as the context grows from 1k to 128k tokens.

LLaMA-2-7B (MHA, 32 KV heads), Llama-3.1-8B (GQA, 8 KV heads), Mixtral-8x7B
(MoE, 8 experts top-2, GQA) and Falcon-Mamba-7B (Mamba-1, a constant state per
sequence), each on 2 x H100 SXM (tp=2), bf16, batch 1 and 16. One decode step
at the given context (output = 2 tokens, so TPOT is the step at prompt + 1).

    .venv/bin/python experiments/paper/arch_context.py [--quick] [--out PNG]
"""

import _common as c

import jaxplat as jp

MODELS = (("llama-2-7b", "LLaMA-2-7B (dense, MHA)"), ("llama-3.1-8b", "Llama-3.1-8B (dense, GQA)"),
          ("mixtral-8x7b", "Mixtral-8x7B (MoE)"), ("falcon-mamba-7b", "Falcon-Mamba-7B (Mamba)"))
CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def main(argv=None):
    a = c.parser(__doc__, "arch_context").parse_args(argv)
    c.setup()
    contexts = CONTEXTS[::3] if a.quick else CONTEXTS
    batches = (1, 16)
    hw, par = jp.load_hardware("h100-sxm"), jp.Parallel(tp=2)
    configs, keys = [], []
    for name, _ in MODELS:
        model = jp.load_model(name)
        for b in batches:
            for ctx in contexts:
                configs.append((model, hw, par, c.workload("chatbot", "bf16", batch=b, prompt=ctx, output=2, beams=1)))
                keys.append((name, b, ctx))
    r = c.evaluate_many(configs)
    res = {k: (r["tpot"][i], r["kv_bytes"][i], r["fits"][i], r["ttft"][i]) for i, k in enumerate(keys)}

    print("Decode step (TPOT) and KV cache / state per chip vs context; 2 x H100 SXM, tp=2, bf16")
    for b in batches:
        print(f"\nbatch {b}")
        rows = []
        for name, label in MODELS:
            rows.append([label] + [f"{c.ms(res[(name, b, x)][0])}" + ("" if res[(name, b, x)][2] else " (no fit)")
                                   for x in contexts])
        print(c.table(["TPOT at context"] + [f"{x // 1024}k" for x in contexts], rows))
        rows = [[label] + [f"{res[(name, b, x)][1] / c.GB:.3g} GB" for x in contexts] for name, label in MODELS]
        print(c.table(["KV/state per chip"] + [f"{x // 1024}k" for x in contexts], rows))
    ratio = {name: res[(name, 1, contexts[-1])][0] / res[(name, 1, contexts[0])][0] for name, _ in MODELS}
    print(f"\nTPOT growth from {contexts[0] // 1024}k to {contexts[-1] // 1024}k, batch 1: "
          + ", ".join(f"{lab.split(' (')[0]} {ratio[n]:.2f}x" for n, lab in MODELS))

    fig, axes = c.figure(1, 3, size=(14, 4.4))
    for k, b in enumerate(batches):
        ax = axes[0][k]
        for name, label in MODELS:
            line, = ax.plot(contexts, [1e3 * res[(name, b, x)][0] for x in contexts], marker="o", ms=3, label=label)
            miss = [x for x in contexts if not res[(name, b, x)][2]]
            ax.plot(miss, [1e3 * res[(name, b, x)][0] for x in miss], ls="", marker="x", ms=8, color=line.get_color())
        ax.set_title(f"decode step, batch {b} (x: does not fit 2 x 80 GB)" if b > 1 else f"decode step, batch {b}")
        ax.set_ylabel("TPOT (ms)")
    ax = axes[0][2]
    for name, label in MODELS:
        ax.plot(contexts, [res[(name, 1, x)][1] / c.GB for x in contexts], marker="o", ms=3, label=label)
    ax.set_title("KV cache / state per chip, batch 1")
    ax.text(0.40, 0.14, "Llama-3.1-8B and Mixtral-8x7B:\nsame KV (32 layers x 8 KV heads),\nlines overlap",
            transform=ax.transAxes, fontsize=8)
    ax.set_ylabel("GB per chip")
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(contexts, [f"{x // 1024}k" for x in contexts])
        ax.minorticks_off()
        ax.set_xlabel("context (tokens)")
    c.save(fig, a.out, "Decode cost vs context: dense MHA, GQA, MoE, Mamba (2 x H100, tp=2, bf16)", axes[0][0], 4)
    return res


if __name__ == "__main__":
    main()
