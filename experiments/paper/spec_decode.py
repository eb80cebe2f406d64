"""Speculative decoding: draft length k x acceptance rate alpha, at several
batch sizes; the speed-up of TPOT over plain decoding and where it stops paying.

Target Llama-3.1-70B, draft Llama-3.1-8B, both tp=4 on H100 SXM, the chatbot
use case (3000 in, 1000 out). One step = k draft decode steps + one target pass
verifying k + 1 tokens per sequence, producing (1 - alpha^(k+1)) / (1 - alpha)
tokens (Leviathan et al., ICML 2023); jaxplat.serving.speculative_tpot, vmapped
over (batch, k, alpha) in one compiled program.

    .venv/bin/python experiments/paper/spec_decode.py [--quick] [--out PNG]
"""

import functools

import _common as c
import jax
import jax.numpy as jnp
import numpy as np

import jaxplat as jp
from jaxplat.serving import expected_tokens, speculative_tpot

TARGET, DRAFT, TP = "llama-3.1-70b", "llama-3.1-8b", 4


def grid(batches, ks, alphas):
    model, draft = jp.load_model(TARGET), jp.load_model(DRAFT)
    hw, wl, par, opts = jp.load_hardware("h100-sxm"), c.workload("chatbot", beams=1), jp.Parallel(tp=TP), jp.Options()
    b, k, a = (np.asarray(x, np.float32).ravel() for x in np.meshgrid(batches, ks, alphas, indexing="ij"))
    run = jax.jit(jax.vmap(functools.partial(speculative_tpot, model, hw, par, wl, opts, draft_model=draft)))
    spec, plain = jax.device_get(run(jnp.asarray(b), jnp.asarray(k), jnp.asarray(a)))
    shape = (len(batches), len(ks), len(alphas))
    return spec.reshape(shape), plain.reshape(shape)


def main(argv=None):
    a = c.parser(__doc__, "spec_decode").parse_args(argv)
    c.setup()
    batches = (1, 64) if a.quick else (1, 16, 64, 256)
    ks = (1, 2, 4) if a.quick else (1, 2, 3, 4, 5, 6, 8)
    alphas = (0.6, 0.9) if a.quick else (0.5, 0.6, 0.7, 0.8, 0.9)
    spec, plain = grid(batches, ks, alphas)
    speed = plain / spec
    print(f"Speculative decoding: target {TARGET}, draft {DRAFT}, tp={TP} on H100 SXM, chatbot (3000 in, 1000 out)")
    rows = []
    for i, b in enumerate(batches):
        for j, al in enumerate(alphas):
            best = int(np.argmax(speed[i, :, j]))
            pays = [k for kk, k in enumerate(ks) if speed[i, kk, j] > 1.0]
            rows.append([f"{b}", f"{al:.1f}", c.ms(plain[i, 0, j]), c.ms(spec[i, best, j]), f"{ks[best]}",
                         f"{speed[i, best, j]:.2f}x", f"{float(expected_tokens(ks[best], al)):.2f}",
                         f"k <= {max(pays)}" if pays else "no k"])
    print(c.table(["batch", "alpha", "TPOT plain", "TPOT spec (best k)", "best k", "speed-up",
                   "tokens/step", "pays (speed-up > 1)"], rows, "rrrrrrrl"))

    fig, axes = c.figure(1, len(batches), size=(3.2 * len(batches) + 1, 4.1))
    for i, (ax, b) in enumerate(zip(axes[0], batches)):
        for j, al in enumerate(alphas):
            ax.plot(ks, speed[i, :, j], marker="o", ms=3, label=f"alpha = {al:.1f}")
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_title(f"batch {b}: plain TPOT {c.ms(plain[i, 0, 0])}")
        ax.set_xlabel("draft length k (tokens)")
        ax.set_ylabel("TPOT speed-up over plain decode (x)")
    c.save(fig, a.out, f"Speculative decoding, {TARGET} + {DRAFT} draft, tp={TP} H100; below 1 (dashed) it costs time",
           axes[0][0])
    return speed


if __name__ == "__main__":
    main()
