"""The dtype a chip computes a workload's GEMMs in.

A chip without units for the activations' dtype (FP4 on an H100, FP8 on an
A100 or a TPU) runs the GEMMs on the units it has: the operands are widened
to the nearest wider native dtype (`Hardware.gemm_dtype`, filled from
specs.units.DTYPE_FALLBACK when the spec is loaded) and the GEMM runs at that
dtype's peak with its derates; the activations are that wide in memory. The
weights keep their stored width: weight-only quantization (W4A8, W4A16 —
Marlin/Machete, TensorRT-LLM's weight-only GEMMs) streams fewer bytes but
does no cheaper math (Frantar et al., "MARLIN", arXiv 2408.11743).
"""

import jax.numpy as jnp

from jaxplat.model import Hardware, Options, Workload, replace
from jaxplat.specs.units import BYTES_PER_ELEMENT, DTYPES

_WIDTHS = tuple(BYTES_PER_ELEMENT[d] for d in DTYPES)


def computed_workload(hw: Hardware, wl: Workload, opts: Options) -> Workload:
    """`wl` with the compute dtype and activation width `hw` runs its GEMMs in
    (itself where the chip has the dtype natively: no change). Idempotent.
    GenZ's profile keeps its own rule (every dtype at the bf16 peak x 2 bytes
    / bytes per element: Conventions.peak "bf16_scaled")."""
    if opts.conv.peak == "bf16_scaled":
        return wl
    run = jnp.take(hw.chip.gemm_dtype, wl.compute_dtype.astype(jnp.int32))
    emulated = run != wl.compute_dtype
    width = jnp.take(jnp.asarray(_WIDTHS, jnp.float32), run.astype(jnp.int32))
    return replace(wl, compute_dtype=jnp.where(emulated, run, wl.compute_dtype),
                   bytes_act=jnp.where(emulated, jnp.maximum(wl.bytes_act, width), wl.bytes_act))


def emulated_dtype(hw: Hardware, wl: Workload, opts: Options):
    """(dtype, dtype it runs in) names where `hw` has no units for the
    workload's compute dtype, else None (host; for the CLI's warning)."""
    if opts.conv.peak == "bf16_scaled":
        return None
    cd = int(wl.compute_dtype)
    run = int(hw.chip.gemm_dtype[cd])
    return None if run == cd else (DTYPES[cd], DTYPES[run])


__all__ = ["computed_workload", "emulated_dtype"]
