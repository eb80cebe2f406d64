"""Reproducer: one chip's exact objective differs between a 2048-chip vmap
and 256-chip chunks (default profile, Llama-3.1-70B chatbot study).

A single `evaluate` call and 256-chip chunks say the chip (929 TFLOP/s, 58 MB
SRAM, 3 HBM3e stacks, 1 TB/s links) at tp=4, batch 1 misses the 10 ms TPOT
SLO (12.4 ms, objective inf); `exact_table` vmapped over the whole 2048-chip
chunk that holds it returns 1.52 USD/Mtok instead. Found while checking the
codesign grid oracle; not yet explained.

    .venv/bin/python experiments/codesign_vmap_repro.py
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat import codesign as cd
from jaxplat.specs import read_yaml


def main():
    prob, run = cd.problem_from_dict(read_yaml("specs/studies/codesign-llama70b-chatbot.yaml"))
    axes = cd.grid_axes(prob, run["grid"])
    shape = tuple(len(a) for a in axes)
    target = [9.2986747e+14, 5.7966316e+07, 3.0, 1.0e+12]
    digits = [int(np.argmin(np.abs(a - v))) for a, v in zip(axes, target)]
    start = (int(np.ravel_multi_index(digits, shape)) // 2048) * 2048
    idx = np.unravel_index(np.arange(start, start + 2048), shape)
    xs = np.stack([a[k] for a, k in zip(axes, idx)], -1).astype(np.float32)
    small = cd.exact_objectives(xs, prob)                                # 256-chip chunks
    big = np.asarray(jax.jit(cd.exact_table)(jnp.asarray(xs), prob)[0])  # one 2048-chip vmap
    bad = np.argwhere(small != big)
    print(f"{len(bad)} of {small.size} (chip, candidate) objectives differ")
    for r, c in bad[:5]:
        print(f"  chip {xs[r]} candidate {c}: chunks of 256 {small[r, c]:.4g}, one vmap of 2048 {big[r, c]:.4g}")


if __name__ == "__main__":
    main()
