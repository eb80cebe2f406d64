"""`Hardware`: one chip and the network around it, as a pytree of float leaves."""

import dataclasses

import jax
import jax.numpy as jnp

from jaxplat.model.pytree import pytree_dataclass, static
from jaxplat.specs.units import DTYPES

# Memory and network levels are padded to these counts so that every chip has
# the same tree shape (one compiled program serves all chips).
MAX_MEM_LEVELS = 3
MAX_NET_LEVELS = 3
TOPOLOGIES = ("switch", "ring", "torus2d", "torus3d", "mesh2d", "fully_connected")


@pytree_dataclass
class Hardware:
    """One chip, its memory levels and the network levels around it. SI units.

    Attributes:
      flops: [len(units.DTYPES)] dense peak FLOP/s per dtype (fallbacks filled).
      gemm_dtype: [len(units.DTYPES)] index into DTYPES of the dtype each
        dtype's GEMMs compute in: itself where the chip has units for it
        (FP32/TF32 as 16-bit passes count), else the wider one the spec
        loader's fallback runs it on (FP4 on an H100: FP8). Identity by
        default (jaxplat.cost.dtypes.computed_workload).
      sram_size, sram_bw: on-chip memory, bytes and bytes/s (0 when absent:
        then on-chip tensors cost no time).
      mem_size, mem_bw: [MAX_MEM_LEVELS] off-chip levels (HBM, then host/DDR),
        fastest first, bytes and bytes/s; padded levels have size 0, bw 1.
        A chip with only SRAM (Groq, Cerebras) has its SRAM as level 0.
      net_domain, net_bw, net_latency, net_topology: [MAX_NET_LEVELS] network
        levels, innermost first: chips per domain, bytes/s per chip per
        direction, seconds, index into TOPOLOGIES. Padded levels have an
        infinite-like domain (1e9 chips) copied from the outermost real level.
      net_switch_reduce: [MAX_NET_LEVELS] 1 where the level's switch reduces
        in the network (NVLink SHARP, "NVLS", on NVSwitch 3 and later), so an
        all-reduce can run the `nvls` algorithm (jaxplat.cost.collectives);
        0 elsewhere (the default).
      eff_compute, eff_memory, eff_network: achievable fractions of peak on
        large, well-shaped work (a big GEMM in 16-bit, a long stream, a big
        collective); the shape-dependent rest is jaxplat.cost.efficiency.
      eff_narrow: 8-bit and narrower kernels' share of the 16-bit kernels'
        achieved fraction of their peak (FP8 GEMMs reach less of their 2x
        peak than BF16 ones of theirs).
      eff_fp4: FP4 kernels' share of the FP8 kernels' achieved fraction
        (FP4 GEMMs pay eff_narrow once and this on top: their block scales,
        one per 16 or 32 elements in NVFP4/MXFP4, are dequantized in the
        mainloop that FP8's per-tensor scales leave alone).
      eff_attention: attention kernels' efficiency relative to GEMMs, on
        both their compute and their memory time.
      eff_moe: routed experts' grouped-GEMM kernels' efficiency relative to
        dense GEMMs, on their compute time, where the experts' weights are
        8 bits or narrower (16-bit experts run like dense GEMMs:
        cost.efficiency.quantized_experts).
      eff_moe_memory: the same on their memory time (streaming the experts'
        weights).
      eff_moe_fp4: FP4 grouped GEMMs' share of eff_moe (compute time, FP4
        activations: W4A4 NVFP4/MXFP4 experts), as eff_fp4 is of eff_narrow.
      The software stack (an engine's, not the chip's: specs/software,
      jaxplat.model.software_spec, chosen per run with --engine):
      kernel_latency: s each kernel costs beyond its roofline time (launch,
        prologue/epilogue, the tail of its last wave); a row pays it once per
        kernel it runs as (jaxplat.cost.efficiency.kernel_counts).
      elementwise_kernels: kernels each element-wise row runs as (0 fused).
      attention_kernels: kernels one attention operator runs as (1 fused).
      host_overlap: 1 when the host's per-sequence work overlaps the device
        step (overlap scheduler), 0 when it runs between steps.
      fabric_latency: s each operator of a dataflow chip (`execution:
        dataflow`) takes to cross the chip's fabric and back (the chip's
        physics, from its fabric hops and clock: software_spec.execution_fields).
      expert_latency: s each routed expert's GEMM in a grouped-GEMM kernel
        costs beyond its roofline time (its tiles' pipeline ramp and drain).
      tile_latency: s each GEMM output tile costs outside its k-loop
        (filling its operand pipeline, about one memory round trip, and
        storing the tile), which short k loops pay most: small K, and narrow
        dtypes, whose k-loop runs 2x (FP8) or 4x (FP4) faster.
      iteration_overhead: s per engine iteration (scheduling, sampling,
        graph launch) outside the kernels.
      collective_latency: s each collective call costs beyond its α-β time
        (kernel launch, the ranks' barrier).
      sequence_overhead: s of host CPU time per running sequence per engine
        iteration on the reference host (REFERENCE_HOST_CLOCK_HZ), overlapped
        with the GPU step (jaxplat.cost.efficiency.host_time).
      host_clock_hz: the serving host CPU's maximum clock, Hz (0: the
        reference host's); host time scales with its inverse.
      units, tile_m, tile_n, tile_k: a tensor-core chip's SMs or CUs and a
        GEMM kernel's output tile and k-step (the `compute:` block's `units`
        and `tile`); units = 0 when not given: no tile or wave quantization.
      tdp, price: board power in W and price in USD (0 when unknown).
      energy_flop: [len(DTYPES)] J per FLOP in each dtype (0 when unknown).
      energy_sram: J per byte moved to or from on-chip SRAM.
      energy_mem: [MAX_MEM_LEVELS] J per byte moved at each off-chip level.
      energy_net: [MAX_NET_LEVELS] J per byte one chip sends at each level.
      static_power: W per chip drawn whatever it does (leakage, idle).
      lifetime: s over which the chip's price is amortized (0: no capex).
      energy_price: USD per J of facility energy. pue: power usage
        effectiveness (facility energy / IT energy, >= 1).
      The spec loader fills technology defaults (jaxplat.energy, jaxplat.cost);
      a `Hardware` built directly gets zero energy and cost.

    Compute structure (the optional `compute:` block, jaxplat.model.compute_spec;
    used by jaxplat.cost.compute). Without it (dataflow "") every operator
    runs at `flops` as before.
      dataflow: static; "ws", "os" or "is" when GEMMs run on systolic arrays,
        "" when the chip gives no array.
      array_rows, array_cols: processing elements per array (height, width).
      cores: identical arrays working in parallel, each with sram_size/cores
        of the SRAM as its tiling buffer. clock_hz: array clock, Hz.
      vector_flops: FLOP/s of the vector / special-function unit that runs
        the element-wise operators (softmax, norms, activations); 0: `flops`.
      offload: static; operator names or groups run on the host instead.
      host_flops, host_bw, host_latency: the offload target (a CPU): FLOP/s,
        bytes/s of the link to it, seconds per offloaded operator call.
    """

    flops: jax.Array
    sram_size: jax.Array
    sram_bw: jax.Array
    mem_size: jax.Array
    mem_bw: jax.Array
    net_domain: jax.Array
    net_bw: jax.Array
    net_latency: jax.Array
    net_topology: jax.Array
    eff_compute: jax.Array
    eff_memory: jax.Array
    eff_network: jax.Array
    tdp: jax.Array
    price: jax.Array
    energy_flop: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((len(DTYPES),), jnp.float32))
    energy_sram: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    energy_mem: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((MAX_MEM_LEVELS,), jnp.float32))
    energy_net: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((MAX_NET_LEVELS,), jnp.float32))
    static_power: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    lifetime: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    energy_price: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    pue: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    # Shape-dependent efficiency (jaxplat.cost.efficiency); neutral defaults.
    eff_narrow: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    eff_fp4: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    eff_attention: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    eff_moe: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    eff_moe_memory: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    eff_moe_fp4: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    kernel_latency: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    expert_latency: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    tile_latency: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    iteration_overhead: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    sequence_overhead: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    collective_latency: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    host_clock_hz: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    # The software stack's kernel counts and host overlap (specs/software; jaxplat.model.software_spec).
    elementwise_kernels: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    attention_kernels: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    host_overlap: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    # A dataflow chip's fabric (the spec's `execution:`; 0 on chips that run kernels).
    fabric_latency: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    net_switch_reduce: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((MAX_NET_LEVELS,),
                                                                                        jnp.float32))
    units: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    tile_m: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    tile_n: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    tile_k: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    # Compute structure (`compute:` block); neutral defaults leave the chip as it was.
    array_rows: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    array_cols: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    cores: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    clock_hz: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    vector_flops: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    host_flops: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    host_bw: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    host_latency: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    gemm_dtype: jax.Array = dataclasses.field(default_factory=lambda: jnp.arange(len(DTYPES), dtype=jnp.float32))
    dataflow: str = static("")
    offload: tuple = static(())
