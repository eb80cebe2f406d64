"""`Hardware`: one chip and the network around it, as a pytree of groups of
float leaves (SI units).

A reader sees what each number is by its group, and each group's field names
are the hardware spec's keys (specs/hardware/*.yaml, docs/reference/specs.md):

  hw.chip        datasheet compute: peaks, tensor-core tiles, systolic arrays
  hw.memory      on-chip SRAM and the off-chip levels (HBM, then host/DDR)
  hw.network     the network levels around the chip, innermost first
  hw.efficiency  FITTED fractions of peak and latencies (specs/calibration,
                 a spec's `efficiency:`; keys as the calibration's)
  hw.software    the software stack's costs (specs/software, chosen per run)
  hw.power       board power, static power and energy per FLOP and byte
  hw.cost        price and the cost of ownership's basis
  hw.host        the serving host CPU and the offload target

The flat names of earlier versions (`hw.mem_bw`, `hw.eff_narrow`, ...) stay
readable (`FLAT_NAMES`, one table) and `jaxplat.model.pytree.replace(hw,
mem_bw=...)` routes them to their group.
"""

import dataclasses

import jax
import jax.numpy as jnp

from jaxplat.model.pytree import as_f32, pytree_dataclass, static
from jaxplat.specs.units import DTYPES

# Memory and network levels are padded to these counts so that every chip has
# the same tree shape (one compiled program serves all chips).
MAX_MEM_LEVELS = 3
MAX_NET_LEVELS = 3
TOPOLOGIES = ("switch", "ring", "torus2d", "torus3d", "mesh2d", "fully_connected")


def _const(v):
    return dataclasses.field(default_factory=lambda: jnp.float32(v))


def _zeros(n):
    return dataclasses.field(default_factory=lambda: jnp.zeros((n,), jnp.float32))


@pytree_dataclass
class Chip:
    """The chip's compute (spec section `chip:`).

    Attributes:
      flops: [len(units.DTYPES)] dense peak FLOP/s per dtype (fallbacks filled).
      gemm_dtype: [len(units.DTYPES)] index into DTYPES of the dtype each
        dtype's GEMMs compute in: itself where the chip has units for it
        (FP32/TF32 as 16-bit passes count), else the wider one the spec
        loader's fallback runs it on (FP4 on an H100: FP8). Identity by
        default (jaxplat.cost.dtypes.computed_workload).
      units, tile_m, tile_n, tile_k: a tensor-core chip's SMs or CUs and a
        GEMM kernel's output tile and k-step (`units`, `tile`); units = 0
        when not given: no tile or wave quantization.
      array_rows, array_cols: processing elements per systolic array.
      cores: identical arrays working in parallel, each with sram_size/cores
        of the SRAM as its tiling buffer. clock_hz: array clock, Hz.
      vector_flops: FLOP/s of the vector / special-function unit that runs
        the element-wise operators (softmax, norms, activations); 0: `flops`.
      exp_rate: exponentials per second of the special-function units
        (NVIDIA's SFU, MUFU.EX2: SMs x 16 a clock through Blackwell, 32 on
        Blackwell Ultra), which an attention kernel's softmax waits on
        between its two matmuls (FlashAttention-3, arXiv 2407.08608,
        Sec. 3); 0: not modelled (no exponential costs time).
      fabric_latency: s each operator of a dataflow chip (`execution:
        dataflow`) takes to cross the chip's fabric and back (the chip's
        physics, from its fabric hops and clock: software_spec.execution_fields).
      dataflow: static; "ws", "os" or "is" when GEMMs run on systolic arrays,
        "" when the chip gives no array (then every operator runs at `flops`).
    """

    flops: jax.Array
    gemm_dtype: jax.Array = dataclasses.field(default_factory=lambda: jnp.arange(len(DTYPES), dtype=jnp.float32))
    units: jax.Array = _const(0.0)
    tile_m: jax.Array = _const(1.0)
    tile_n: jax.Array = _const(1.0)
    tile_k: jax.Array = _const(1.0)
    array_rows: jax.Array = _const(0.0)
    array_cols: jax.Array = _const(0.0)
    cores: jax.Array = _const(1.0)
    clock_hz: jax.Array = _const(0.0)
    vector_flops: jax.Array = _const(0.0)
    exp_rate: jax.Array = _const(0.0)
    fabric_latency: jax.Array = _const(0.0)
    dataflow: str = static("")


@pytree_dataclass
class Memory:
    """On-chip and off-chip memory (spec section `memory:`, a list of levels).

    Attributes:
      sram_size, sram_bandwidth: on-chip memory, bytes and bytes/s (0 when
        absent: then on-chip tensors cost no time).
      size, bandwidth: [MAX_MEM_LEVELS] off-chip levels (HBM, then host/DDR),
        fastest first, bytes and bytes/s; padded levels have size 0, bw 1.
        A chip with only SRAM (Groq, Cerebras) has its SRAM as level 0.
    """

    size: jax.Array
    bandwidth: jax.Array
    sram_size: jax.Array = _const(0.0)
    sram_bandwidth: jax.Array = _const(0.0)


@pytree_dataclass
class Network:
    """The network levels around the chip, innermost first (spec `network:`).

    Attributes (each [MAX_NET_LEVELS]):
      domain: chips per domain. bandwidth: bytes/s per chip per direction.
      latency: seconds. topology: index into TOPOLOGIES. Padded levels have an
        infinite-like domain (1e9 chips) copied from the outermost real level.
      switch_reduction: 1 where the level's switch reduces in the network
        (NVLink SHARP, "NVLS", on NVSwitch 3 and later), so an all-reduce can
        run the `nvls` algorithm (jaxplat.cost.collectives); 0 elsewhere.
    """

    domain: jax.Array
    bandwidth: jax.Array
    latency: jax.Array
    topology: jax.Array
    switch_reduction: jax.Array = _zeros(MAX_NET_LEVELS)


@pytree_dataclass
class Efficiency:
    """FITTED efficiencies (the calibration's parameters, a spec's optional
    `efficiency:`; meanings and bounds in jaxplat.model.efficiency_spec.PARAMS,
    the shape-dependent rest in jaxplat.cost.efficiency). Neutral defaults.

    Attributes:
      compute, memory, network: achievable fractions of peak on large,
        well-shaped work (a big 16-bit GEMM, a long stream, a big collective).
      narrow_dtype: 8-bit and narrower kernels' share of the 16-bit kernels'
        achieved fraction of their peak.
      narrow_fp4: FP4 kernels' share of the FP8 kernels' achieved fraction
        (block scales dequantized in the mainloop).
      attention: attention kernels' efficiency relative to GEMMs on their
        memory time (decode's KV-cache reads).
      attention_compute: an attention kernel's two matmuls (Q K^T, P V)
        relative to a large GEMM's rate, compute time (a ratio up to 2:
        FlashAttention-3's reach 0.93 of an H100's peak where large GEMMs
        reach 0.75); its softmax's exponentials are the chip's (exp_rate).
      attention_overlap: p of the p-norm that joins a multi-query attention
        kernel's compute and memory times (OpTable.queries > 0: prefill,
        training), 0 for their max (jaxplat.cost.efficiency.attention_overlap).
      moe: routed experts' grouped GEMMs relative to dense GEMMs, compute
        time, where the experts' weights are 8 bits or narrower.
      moe_memory: the same on their memory time. moe_fp4: FP4 grouped GEMMs'
        share of `moe`, as narrow_fp4 is of narrow_dtype.
      expert_latency: s each routed expert's GEMM in a grouped-GEMM kernel
        costs beyond its roofline time (its tiles' ramp and drain).
      tile_latency: s each GEMM output tile costs outside its k-loop.
      scan: state-space scan kernels' efficiency relative to GEMMs, compute
        time (Mamba-2's chunked SSD runs its small per-chunk matmuls far
        below a large GEMM's rate; Mamba-1's selective scan takes the same).
    """

    compute: jax.Array = _const(1.0)
    memory: jax.Array = _const(1.0)
    network: jax.Array = _const(1.0)
    narrow_dtype: jax.Array = _const(1.0)
    narrow_fp4: jax.Array = _const(1.0)
    attention: jax.Array = _const(1.0)
    attention_compute: jax.Array = _const(1.0)
    attention_overlap: jax.Array = _const(0.0)
    moe: jax.Array = _const(1.0)
    moe_memory: jax.Array = _const(1.0)
    moe_fp4: jax.Array = _const(1.0)
    expert_latency: jax.Array = _const(0.0)
    tile_latency: jax.Array = _const(0.0)
    scan: jax.Array = _const(1.0)


@pytree_dataclass
class SoftwareCosts:
    """The software stack a run uses (an engine's, not the chip's:
    specs/software, jaxplat.model.software_spec.SOFTWARE_KEYS, `--engine`).

    Attributes:
      kernel_latency: s each kernel costs beyond its roofline time; a row pays
        it once per kernel it runs as (jaxplat.cost.efficiency.kernel_counts).
      elementwise_kernels: kernels each element-wise row runs as (0 fused).
      attention_kernels: kernels one attention operator runs as (1 fused).
      collective_latency: s each collective call costs beyond its α-β time.
      iteration_overhead: s per engine iteration outside the kernels.
      rank_overhead: s more per engine iteration per doubling of the
        tensor-parallel ranks (jaxplat.cost.efficiency.iteration_overhead).
      sequence_overhead: s of host CPU time per running sequence per
        iteration on the reference host (REFERENCE_HOST_CLOCK_HZ).
      host_overlap: 1 when the host's per-sequence work overlaps the device
        step (overlap scheduler), 0 when it runs between steps.
      moe_speed: the engine's MoE layers' rate on their routed experts'
        compute over the grouped-GEMM kernel's (`efficiency.moe`), for
        quantized experts (1: the kernel's rate; jaxplat.cost.efficiency.kernel_kind).
    """

    kernel_latency: jax.Array = _const(0.0)
    elementwise_kernels: jax.Array = _const(0.0)
    attention_kernels: jax.Array = _const(1.0)
    collective_latency: jax.Array = _const(0.0)
    iteration_overhead: jax.Array = _const(0.0)
    rank_overhead: jax.Array = _const(0.0)
    sequence_overhead: jax.Array = _const(0.0)
    host_overlap: jax.Array = _const(1.0)
    moe_speed: jax.Array = _const(1.0)


@pytree_dataclass
class Power:
    """Board power and energy (spec section `power:`; jaxplat.cost.energy).

    Attributes:
      tdp: board power, W. static_power: W per chip drawn whatever it does.
      energy_flop: [len(DTYPES)] J per FLOP in each dtype (0 when unknown).
      energy_sram: J per byte moved to or from on-chip SRAM.
      energy_mem: [MAX_MEM_LEVELS] J per byte moved at each off-chip level.
      energy_net: [MAX_NET_LEVELS] J per byte one chip sends at each level.
    """

    tdp: jax.Array = _const(0.0)
    static_power: jax.Array = _const(0.0)
    energy_flop: jax.Array = _zeros(len(DTYPES))
    energy_sram: jax.Array = _const(0.0)
    energy_mem: jax.Array = _zeros(MAX_MEM_LEVELS)
    energy_net: jax.Array = _zeros(MAX_NET_LEVELS)


@pytree_dataclass
class Cost:
    """Price and the cost of ownership's basis (spec section `cost:`).

    Attributes:
      price: USD per chip (0 when unknown). lifetime: s over which the price
        is amortized (0: no capex). energy_price: USD per J of facility
        energy. pue: power usage effectiveness (facility / IT energy, >= 1).
    """

    price: jax.Array = _const(0.0)
    lifetime: jax.Array = _const(0.0)
    energy_price: jax.Array = _const(0.0)
    pue: jax.Array = _const(1.0)


@pytree_dataclass
class Host:
    """The serving host CPU and the offload target (spec section `host:`).

    Attributes:
      clock_hz: the serving host CPU's maximum clock, Hz (0: the reference
        host's); host time scales with its inverse.
      flops, bandwidth, latency: the offload target (a CPU): FLOP/s, bytes/s
        of the link to it, seconds per offloaded operator call.
      offload: static; operator names or groups run on the host instead.
    """

    clock_hz: jax.Array = _const(0.0)
    flops: jax.Array = _const(0.0)
    bandwidth: jax.Array = _const(1.0)
    latency: jax.Array = _const(0.0)
    offload: tuple = static(())


GROUPS = {"chip": Chip, "memory": Memory, "network": Network, "efficiency": Efficiency, "software": SoftwareCosts,
          "power": Power, "cost": Cost, "host": Host}

# The flat names of earlier versions -> (group, field). Read as properties of
# `Hardware`, routed by `pytree.replace`; new code names the group.
FLAT_NAMES = {
    **{f: ("chip", f) for f in ("flops", "gemm_dtype", "units", "tile_m", "tile_n", "tile_k", "array_rows",
                                "array_cols", "cores", "clock_hz", "vector_flops", "exp_rate", "fabric_latency",
                                "dataflow")},
    "sram_size": ("memory", "sram_size"), "sram_bw": ("memory", "sram_bandwidth"),
    "mem_size": ("memory", "size"), "mem_bw": ("memory", "bandwidth"),
    "net_domain": ("network", "domain"), "net_bw": ("network", "bandwidth"), "net_latency": ("network", "latency"),
    "net_topology": ("network", "topology"), "net_switch_reduce": ("network", "switch_reduction"),
    "eff_compute": ("efficiency", "compute"), "eff_memory": ("efficiency", "memory"),
    "eff_network": ("efficiency", "network"), "eff_narrow": ("efficiency", "narrow_dtype"),
    "eff_fp4": ("efficiency", "narrow_fp4"), "eff_attention": ("efficiency", "attention"),
    "eff_attention_compute": ("efficiency", "attention_compute"),
    "eff_attention_overlap": ("efficiency", "attention_overlap"),
    "eff_moe": ("efficiency", "moe"), "eff_moe_memory": ("efficiency", "moe_memory"),
    "eff_moe_fp4": ("efficiency", "moe_fp4"), "expert_latency": ("efficiency", "expert_latency"),
    "tile_latency": ("efficiency", "tile_latency"), "eff_scan": ("efficiency", "scan"),
    **{f: ("software", f) for f in ("kernel_latency", "elementwise_kernels", "attention_kernels",
                                    "collective_latency", "iteration_overhead", "rank_overhead", "sequence_overhead",
                                    "host_overlap", "moe_speed")},
    **{f: ("power", f) for f in ("tdp", "static_power", "energy_flop", "energy_sram", "energy_mem", "energy_net")},
    **{f: ("cost", f) for f in ("price", "lifetime", "energy_price", "pue")},
    "host_clock_hz": ("host", "clock_hz"), "host_flops": ("host", "flops"), "host_bw": ("host", "bandwidth"),
    "host_latency": ("host", "latency"), "offload": ("host", "offload"),
}


@pytree_dataclass
class Hardware:
    """One chip, its memory levels, the network around it, its fitted
    efficiencies, the software stack it runs, power, cost and host: one group
    pytree each (module docstring). SI units.

    `hardware_from_fields` builds one from flat names; the spec loader fills
    technology defaults (energy, cost); a `Hardware` built directly gets zero
    energy and cost and neutral efficiencies.
    """

    chip: Chip
    memory: Memory
    network: Network
    efficiency: Efficiency = dataclasses.field(default_factory=Efficiency)
    software: SoftwareCosts = dataclasses.field(default_factory=SoftwareCosts)
    power: Power = dataclasses.field(default_factory=Power)
    cost: Cost = dataclasses.field(default_factory=Cost)
    host: Host = dataclasses.field(default_factory=Host)


def _flat_property(group, field):
    return property(lambda self: getattr(getattr(self, group), field),
                    doc=f"The same as `.{group}.{field}` (the flat name of earlier versions).")


for _flat, (_group, _field) in FLAT_NAMES.items():
    setattr(Hardware, _flat, _flat_property(_group, _field))
Hardware.flat_names = FLAT_NAMES  # pytree.replace routes these


def group_fields(flat: dict) -> dict:
    """{group: {field: value}} of {flat name or "group.field": value}; a
    one-line KeyError naming an unknown name."""
    out = {g: {} for g in GROUPS}
    for name, v in flat.items():
        group, _, field = name.partition(".")
        if not field:
            if name not in FLAT_NAMES:
                raise KeyError(f"Hardware has no field {name!r}")
            group, field = FLAT_NAMES[name]
        out[group][field] = v
    return out


def hardware_from_fields(**values) -> Hardware:
    """`Hardware` from flat names (`FLAT_NAMES`) or "group.field" keys, every
    numeric leaf cast to float32 (pytree.as_f32)."""
    return Hardware(**{g: as_f32(GROUPS[g], **v) for g, v in group_fields(values).items()})


def hardware_paths(hw: Hardware | None = None) -> list[str]:
    """The "group.field" path of every traced leaf field of `Hardware`, in
    group order (statics left out): the names reports and sensitivities use."""
    return [f"{g}.{f.name}" for g, cls in GROUPS.items() for f in dataclasses.fields(cls)
            if not f.metadata.get("static")]
