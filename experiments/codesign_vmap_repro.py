"""Reproducer: an XLA:CPU wrong result when `evaluate` is vmapped over more
than 2^15 points (jax 0.10.2; default profile, Llama-3.1-70B chatbot study).

2048 chips x 32 candidates in one vmap: from chip 1024 on, decode outputs
(tpot, decode_time) are copies of other chips' values (chip r gets chip
r - 96's), while TTFT is right. 256-chip chunks and single calls agree with
each other, and the same decode arithmetic rebuilt outside one jitted
`evaluate` is right at 2048 chips, so the defect is in the compiled program,
not in the formulas. 24,576 points per vmap were right and 33,280 were not;
the first wrong index was 2^15, so the
sweep engine and codesign cap their vmaps there (`search.MAX_BLOCK`).
The cause is XLA:CPU's YNNPACK fusion of the decode sums:
experiments/xla_cpu_vmap_repro.py rebuilds it in a few lines of jax (with
XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type= this script finds no
difference).

    .venv/bin/python experiments/codesign_vmap_repro.py
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.design import codesign as cd
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.specs import read_yaml


def main():
    prob, run = problem_from_dict(read_yaml("specs/studies/codesign-llama70b-chatbot.yaml"))
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
