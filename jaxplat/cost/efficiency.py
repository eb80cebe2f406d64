"""Achieved efficiency of each operator as a function of its shape.

A datasheet peak is reached by no kernel. What a kernel reaches depends on
  * the chip's kernels in general: a large, well-shaped 16-bit GEMM reaches a
    share `efficiency.compute` of the dense peak (clock and power limits, the
    mainloop's bubbles), a long stream `efficiency.memory` of the bandwidth;
  * the dtype: 8-bit and narrower kernels keep a share `efficiency.narrow_dtype` of that
    (FP8 and FP4 peaks are harder to feed: twice the operands per cycle
    through the same register file and shared memory), FP4 kernels a share
    `efficiency.narrow_fp4` of FP8's on top (their per-block scales are applied in the
    mainloop; NVIDIA, "NVFP4" / OCP MX formats: one scale per 16 or 32
    elements);
  * the shape, through the chip's structure (`Hardware.units` SMs or CUs and
    a kernel's tile_m x tile_n output tile with tile_k k-steps): tile
    quantization (a partial tile is paid in full; the row tile is the
    shortest power of two holding the GEMM's rows from 8 up to tile_m, as
    engines' small-M kernels run skinny GEMMs: dense_tile_m, grouped_tile_m;
    so a 100-row GEMM pays for 128 rows) and wave quantization (the last
    wave leaves SMs idle), NVIDIA, "Matrix Multiplication Background User's
    Guide"), for the weight GEMMs (attention's rows in an engine iteration
    merge sequences of different lengths, so they carry no one GEMM shape;
    its length dependence is in its FLOPs and bytes);
  * the kind of kernel: attention (FlashAttention, paged decode attention)
    runs its two matmuls at `efficiency.attention_compute` times a GEMM's
    rate (above 1 on Hopper: FlashAttention-3's matmuls reach 0.93 of the
    peak where large GEMMs reach 0.75; the softmax's exponentials between
    them are the chip's `exp_rate`, jaxplat.cost.compute) and reaches
    `efficiency.attention` of what GEMMs reach on bandwidth, and the routed
    experts' grouped GEMMs over quantized weights (8 bits and narrower:
    block-scaled FP8, NVFP4, MXFP4, INT4) `efficiency.moe` on
    compute (x `efficiency.moe_fp4` where they compute in FP4), `efficiency.moe_memory`
    on their memory time; 16-bit grouped GEMMs run like dense ones
    (`quantized_experts`);
  * fixed costs: `tile_latency` seconds per GEMM output tile outside its
    k-loop (`quantization` stretches the k-loop by it), `kernel_latency`
    seconds per GEMM or attention kernel
    (launch, prologue and epilogue, the drain of its pipeline), added to
    both its compute and memory time, so to its roofline time, and
    `expert_latency` per routed expert a grouped GEMM runs;
  * the host: `sequence_overhead` seconds of CPU per running sequence per
    engine iteration (`host_time`), which the GPU step hides up to its own
    length.
Every parameter is a named field of `Hardware` (the `efficiency:` and
`compute:` blocks of a hardware spec, jaxplat.model.efficiency_spec), traced,
so a sweep varies it and calibration (jaxplat.design.calibration) fits it by
gradient. A chip without a `compute:` block has units = 0: no quantization.

Tile and wave counts use the microarchitecture's piece counts
(`microarch.fold_count`, `microarch.wave_count`; their smooth twins in smooth
mode). GEMM libraries run skinny and odd shapes split-K or stream-K (CUTLASS
stream-K, Osama et al., PPoPP 2023): the k-loop iterations of all tiles are
shared evenly by the SMs, so the waves here count k-loop iterations, not
whole tiles, and a decode GEMM with one tile column still fills the chip.
The profile's `Conventions.efficiency` "flat" (GenZ) keeps the three flat
fractions and none of the rest.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.microarch import fold_count, wave_count
from jaxplat.cost.operators import OpKind, OpTable, kind_mask
from jaxplat.cost.roofline import combine, overlap_max, smooth_max
from jaxplat.model import Hardware, Options, Workload
from jaxplat.specs.units import BYTES_PER_ELEMENT, DTYPES


def attention_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 for rows of the attention kernel: scores, softmax, weighted sum (static, from kinds)."""
    return kind_mask(table, OpKind.ATTENTION)


def moe_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 for the routed experts' grouped GEMMs (static, from kinds; not the
    shared experts, not the element-wise passes between and around them)."""
    return kind_mask(table, OpKind.EXPERT_GEMM)


def wide_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 for the rows quantized checkpoints keep in 16 bits: the LM head's,
    router's and embedding's (Conventions.wide_head; static, from kinds)."""
    return kind_mask(table, (OpKind.WIDE_GEMM, OpKind.LOOKUP))


def halvings(bytes_per_element):
    """Halvings of the operand width below 16 bits: 0 (>= 16 bit), 1 (8), 2 (4)."""
    return jnp.maximum(jnp.log2(2.0 / bytes_per_element), 0.0)


def narrow_steps(bytes_per_element):
    """(to 8 bits, to 4 bits): how far a width has gone down each step below
    16 bits, each in [0, 1]: (0, 0) at 16 bits and wider, (1, 0) at 8, (1, 1)
    at 4 (smooth between). The exponents of the 8-bit and FP4 derates."""
    h = halvings(bytes_per_element)
    return jnp.minimum(h, 1.0), jnp.clip(h - 1.0, 0.0, 1.0)


def dtype_index(bytes_per_element):
    """Index into units.DTYPES of the float dtype of this width (fp32, bf16, fp8, fp4)."""
    idx = [DTYPES.index(d) for d in ("fp32", "bf16", "fp8", "fp4")]
    widths = jnp.array([BYTES_PER_ELEMENT[DTYPES[i]] for i in idx])
    return jnp.array(idx, jnp.float32)[jnp.argmin(jnp.abs(widths - bytes_per_element))]


# Shortest row tile of a grouped (MoE) GEMM: MoE kernels size their row tile
# to the tokens each expert holds, 16 rows for decode (vLLM fused_moe's
# default config, BLOCK_SIZE_M 16 while tokens <= experts, 64 beyond; tuned
# configs and CUTLASS grouped-GEMM tactics run 16- to 128-row tiles).
GROUPED_MIN_TILE_M = 16.0


# Shortest row tile of a dense GEMM. Engines run skinny GEMMs (decode, short
# prompts) with small-M kernels: TensorRT-LLM's and CUTLASS's swap-AB
# kernels compute W^T A^T so that the tokens are the MMA's N dimension, whose
# shortest shape is 8 (PTX ISA, mma.sync m16n8k16; Hopper wgmma m64nNk16, N
# a multiple of 8 from 8), and GEMV kernels serve m = 1 no slower. So an
# m-row GEMM pays the shortest power of two >= m, from 8 rows up to the
# chip's tile_m, not a whole tile_m.
DENSE_MIN_TILE_M = 8.0


def _pow2_rows(m):
    """The shortest power of two >= m (>= 1), no gradient (a discrete choice)."""
    m = jax.lax.stop_gradient(jnp.maximum(m, 1.0))
    return 2.0 ** jnp.ceil(jnp.log2(m) - 1e-4)  # 1e-4: a float rounding above a power of two stays in it


def grouped_tile_m(m, hw: Hardware):
    """Row tile of a grouped GEMM whose groups hold m rows each: the shortest
    power of two that holds them, between GROUPED_MIN_TILE_M and the chip's
    tile_m (a discrete choice: no gradient flows through it)."""
    return jnp.clip(_pow2_rows(m), GROUPED_MIN_TILE_M, jnp.maximum(hw.chip.tile_m, GROUPED_MIN_TILE_M))


def dense_tile_m(m, hw: Hardware):
    """Row tile of a dense GEMM of m rows: the shortest power of two that
    holds them, between DENSE_MIN_TILE_M (or the chip's tile_m if smaller)
    and the chip's tile_m (no gradient flows through it)."""
    return jnp.clip(_pow2_rows(m), jnp.minimum(DENSE_MIN_TILE_M, hw.chip.tile_m), hw.chip.tile_m)


def quantization(m, n, k, groups, hw: Hardware, smooth: bool = False, tile_m=None, peak=None):
    """Useful share of the tensor-core work a GEMM pays for, in (0, 1].

    `groups` independent m x k x n GEMMs (attention heads) are cut into
    ceil(m / tile_m) x ceil(n / tile_n) output tiles each, every tile loops
    over s = ceil(k / tile_k) k-steps, and those k-loop iterations run in
    ceil(iterations / units) waves over the units (stream-K). Each tile also
    costs `tile_latency` seconds outside its k-loop (filling its operand
    pipeline, storing its outputs): o = tile_latency / t_step k-steps, a
    k-step lasting t_step = 2 tile_m tile_n tile_k / (peak / units) at the
    dtype's peak, so it stretches the waves by (s + o) / s. The share is
    the useful multiply-adds over the paid ones:
        m n k groups / (waves x units x tile_m tile_n tile_k x (s + o) / s).
    A narrow dtype's k-loop runs 2x (FP8) or 4x (FP4) faster against the
    same fixed time, so short k loops in narrow dtypes pay it most.
    1 where the chip gives no structure (units = 0) or the row is no GEMM.
    `tile_m`: [rows] row tiles to use instead of the chip's (grouped GEMMs).
    `peak`: [rows] datasheet FLOP/s of the chip in each GEMM's dtype (None:
    its bf16 peak).
    """
    tm, tn, tk = (hw.chip.tile_m if tile_m is None else tile_m), hw.chip.tile_n, hw.chip.tile_k
    ok = (hw.chip.units > 0) & (m * n * k > 0)
    ms, ns, ks = (jnp.where(ok, x, 1.0) for x in (m, n, k))
    units = jnp.where(ok, hw.chip.units, 1.0)
    fit = 1.0 - 1e-5  # mean-field shapes (fractional batches) land a rounding error above a whole tile
    steps = fold_count(ks / tk * fit, smooth)
    iters = groups * fold_count(ms / tm * fit, smooth) * fold_count(ns / tn * fit, smooth) * steps
    peak = hw.chip.flops[DTYPES.index("bf16")] if peak is None else peak
    overhead = hw.efficiency.tile_latency * peak / (2.0 * tm * tn * tk * units)  # k-steps
    # It stretches every tile's time by (steps + overhead) / steps, outside the
    # wave count's ceil so that it keeps a gradient in exact mode.
    paid = wave_count(iters * fit, units, smooth) * units * tm * tn * tk * (1.0 + overhead / steps)
    return jnp.where(ok, jnp.clip(ms * ns * ks * groups / paid, 1e-6, 1.0), 1.0)


def quantized_experts(wl: Workload):
    """How far the routed experts' weights are quantized: 0 at 16 bits and
    wider, 1 at 8 bits and narrower (`narrow_steps`' first step).

    The grouped-GEMM derates were fitted on quantized experts only (every
    MoE row of the measured tables is FP8 or FP4: DeepSeek-R1's 128 x 128
    block-scaled FP8, Mixtral in FP8 and NVFP4), whose kernels carry per-block
    scales and dequantize in their mainloop. 16-bit grouped GEMMs are plain
    CUTLASS grouped or block-sparse GEMMs that run near dense GEMMs' rate
    (MegaBlocks, Gale et al., MLSys 2023, arXiv 2211.15841), so the derates
    do not reach them."""
    return narrow_steps(wl.bytes_experts)[0]


def kernel_kind(table: OpTable, hw: Hardware, wl: Workload, opts: Options, memory: bool = False):
    """[rows] efficiency of each row's kernel relative to a dense GEMM's:
    for the attention kernel's rows efficiency.attention on memory time and
    efficiency.attention_compute on compute time, efficiency.moe for the routed
    experts' grouped GEMMs over quantized weights (x software.moe_speed, the
    engine's MoE layers' share of that kernel rate; efficiency.moe_memory on their
    memory time, `memory` static: a grouped GEMM that streams its experts'
    weights loses less than one that computes small, uneven tiles; both
    raised to `quantized_experts`, so 1 for 16-bit experts; efficiency.moe_fp4 on
    top where they compute in FP4), efficiency.scan on a state-space scan's
    compute time, 1 for the rest
    (1 everywhere under the "flat" convention). Tensor cores (row_rates)
    and systolic arrays (compute.row_compute_times) both derate by it."""
    if opts.conv.efficiency == "flat":
        return jnp.ones(len(table.kinds), jnp.float32)
    attn, moe = (jnp.asarray(mask(table)) > 0 for mask in (attention_mask, moe_mask))
    if memory:
        experts = hw.efficiency.moe_memory ** quantized_experts(wl)
        scan = 1.0  # its kernels stream x, B, C and dt once; the chunk states are the compute's
        attention = hw.efficiency.attention
    else:  # FP4 grouped GEMMs (FP4 activations) pay efficiency.moe_fp4 on top, as dense ones pay efficiency.narrow_fp4
        # The kernel's rate (efficiency.moe) as the engine's MoE layers reach it (software.moe_speed).
        experts = ((hw.efficiency.moe * hw.software.moe_speed) ** quantized_experts(wl)
                   * hw.efficiency.moe_fp4 ** narrow_steps(wl.bytes_act)[1])
        scan = hw.efficiency.scan
        attention = hw.efficiency.attention_compute
    scans = jnp.asarray(kind_mask(table, (OpKind.SCAN,))) > 0
    return jnp.where(attn, attention, jnp.where(moe, experts, jnp.where(scans, scan, 1.0)))


def gemm_peak(hw: Hardware, dtype, bytes_per_element):
    """FLOP/s a large, well-shaped GEMM reaches in `dtype` (an index):
    peak x efficiency.compute, x efficiency.narrow_dtype at 8 bits and below, x efficiency.narrow_fp4 at 4."""
    to8, to4 = narrow_steps(bytes_per_element)
    dtype_share = hw.efficiency.narrow_dtype ** to8 * hw.efficiency.narrow_fp4 ** to4
    return hw.chip.flops[dtype.astype(jnp.int32)] * hw.efficiency.compute * dtype_share


def row_dtypes(table: OpTable, wl: Workload, opts: Options):
    """([rows] dtype index into units.DTYPES, [rows] bytes per element) of
    the operands each row's kernel computes in: the activations' dtype;
    attention at the KV cache's when wider (Blackwell FP4 GEMMs with FP8
    attention; not under the "flat" convention); the state-space scan and
    conv at 16 bits or wider (mamba_ssm's and causal_conv1d's kernels take
    16- and 32-bit inputs only; not under "flat"); the LM head, embedding and
    router at 16 bits or wider (Conventions.wide_head)."""
    dtype = jnp.broadcast_to(wl.compute_dtype, (len(table.kinds),))
    width = jnp.broadcast_to(wl.bytes_act, (len(table.kinds),))
    if opts.conv.efficiency != "flat":
        wide_kv = (jnp.asarray(attention_mask(table)) > 0) & (wl.bytes_kv > wl.bytes_act)
        dtype = jnp.where(wide_kv, dtype_index(wl.bytes_kv), dtype)
        width = jnp.where(wide_kv, wl.bytes_kv, width)
        ssm = (jnp.asarray(kind_mask(table, (OpKind.SCAN, OpKind.SSM))) > 0) & (width < 2.0)
        dtype = jnp.where(ssm, float(DTYPES.index("bf16")), dtype)
        width = jnp.where(ssm, 2.0, width)
    if opts.conv.wide_head:
        head = (jnp.asarray(wide_mask(table)) > 0) & (wl.bytes_act < 2.0)
        dtype = jnp.where(head, float(DTYPES.index("bf16")), dtype)
        width = jnp.where(head, 2.0, width)
    return dtype, width


def gemm_problems(table: OpTable):
    """[rows] independent m x k x n GEMMs each row's FLOPs hold (attention's
    sequences x heads, a grouped GEMM's experts; 1 for a plain GEMM or a row
    without GEMM dims): its FLOPs over 2 m k n."""
    mkn = table.m * table.k * table.n
    return jnp.where(mkn > 0, jnp.maximum(table.f0 / jnp.where(mkn > 0, 2.0 * mkn, 1.0), 1.0), 1.0)


def row_rates(table: OpTable, hw: Hardware, wl: Workload, opts: Options, flat_peak):
    """Per-row achieved FLOP/s, memory-time factor and fixed latency.

    Returns (peak [rows] FLOP/s, mem_scale [rows] (memory time is multiplied
    by it), latency [rows] s added to the compute and the memory time). With the "flat"
    convention: (flat_peak, 1, 0) for every row.
    Each row computes in its `row_dtypes` dtype.
    """
    if opts.conv.efficiency == "flat":
        return flat_peak, 1.0, 0.0
    attn = jnp.asarray(attention_mask(table))
    dtype, width = row_dtypes(table, wl, opts)
    groups = gemm_problems(table)
    # Attention rows of an engine iteration merge sequences of different
    # lengths (serving.iteration_table), so their m, k, n are no one GEMM's
    # shape: their length dependence is the FLOPs and bytes, their kernels'
    # efficiencies efficiency.attention_compute and efficiency.attention.
    # The routed experts' grouped GEMMs size their row tile to each expert's
    # tokens (grouped_tile_m), the dense GEMMs to their rows (dense_tile_m).
    moe = jnp.asarray(moe_mask(table)) > 0
    tile_m = jnp.where(moe, grouped_tile_m(table.m, hw), dense_tile_m(table.m, hw))
    q = jnp.where(attn > 0, 1.0, quantization(table.m, table.n, table.k, groups, hw, opts.smooth, tile_m,
                                              hw.chip.flops[dtype.astype(jnp.int32)]))
    peak = gemm_peak(hw, dtype, width) * q * kernel_kind(table, hw, wl, opts)
    return peak, 1.0 / kernel_kind(table, hw, wl, opts, memory=True), fixed_times(table, hw, opts)


def fixed_times(table: OpTable, hw: Hardware, opts: Options):
    """[rows] seconds each row costs beyond its roofline time (0 with "flat"):
    the software stack's kernel launches (kernel_latency per kernel the row
    runs as, kernel_counts), each routed expert's pipeline ramp in a grouped
    GEMM (expert_latency per expert: CUTLASS grouped GEMM, DeepGEMM's masked
    grouped GEMM fill and drain each expert's tiles apart) and a dataflow
    chip's fabric crossing (fabric_latency per operator, operator_counts)."""
    if opts.conv.efficiency == "flat":
        return jnp.zeros(len(table.kinds), jnp.float32)
    mkn = table.m * table.k * table.n
    groups = gemm_problems(table)
    experts = jnp.where((jnp.asarray(moe_mask(table)) > 0) & (mkn > 0), groups, 0.0)
    return (hw.software.kernel_latency * kernel_counts(table, hw, opts) + hw.efficiency.expert_latency * experts
            + hw.chip.fabric_latency * operator_counts(table))


def weight_gemm_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 for the weight GEMMs' rows: dense (projections, FFN, shared
    experts), 16-bit head and router, routed experts (static, from kinds)."""
    return kind_mask(table, (OpKind.GEMM, OpKind.WIDE_GEMM, OpKind.EXPERT_GEMM))


def overlap_exponents(table: OpTable, hw: Hardware, opts: Options):
    """([k] p of the p-norm that joins the compute and memory times of the
    k rows `rows` names (0: their max), rows [k] static indices): the rows
    that may take one, a multi-query attention kernel's (efficiency.
    attention_overlap where queries > 0: prefill, a prompt chunk, training)
    and, with Options.gemm_overlap > 0, the weight GEMMs' (that p); none
    under "flat"."""
    attn = attention_mask(table) > 0
    gemm = (weight_gemm_mask(table) > 0) & (opts.gemm_overlap > 0)
    rows = np.flatnonzero(attn | gemm) if opts.conv.efficiency != "flat" else np.zeros(0, np.int64)
    q = jnp.where(table.queries[rows] > 0, hw.efficiency.attention_overlap, 0.0)
    return jnp.where(jnp.asarray(gemm[rows]), opts.gemm_overlap, q), rows


def _joined(table: OpTable, hw: Hardware, opts: Options, c, m, q, rows):
    """[k] fixed costs + the q-norm of compute c and memory m beyond them, s, of the k `rows`."""
    fixed = fixed_times(table, hw, opts)[rows]
    return fixed + overlap_max(jnp.maximum(c[rows] - fixed, 0.0), jnp.maximum(m[rows] - fixed, 0.0), q)


def _scattered(values, rows, n):
    """[n] `values` [k] at their `rows` (static indices), 0 elsewhere: a gather with
    constant indices, which the sweep's grid_map batches (gridmap), not a scatter."""
    where = np.full(n, len(rows))
    where[rows] = np.arange(len(rows))
    return jnp.concatenate([values, jnp.zeros((1,), values.dtype)])[where]


def overlap_cores(table: OpTable, hw: Hardware, opts: Options, c, m, core):
    """[rows] `core` (each row's roofline time from compute c and memory m,
    seconds) with the rows `overlap_exponents` gives a p > 0 at the p-norm
    of their compute and memory times, their fixed costs outside it.

    A kernel that streams its operands beside its matmuls overlaps the two
    imperfectly, most where they take equally long (2^(1/p) x their max):
    FlashAttention-3's forward on an H100 at S = 512 and 1,024, where the two
    are within 2x of each other, runs 12-28% under their max
    (experiments/attention_variants.py, attention_overlap); a weight GEMM
    near its ridge point (a decode step of a few hundred sequences) likewise
    (Options.gemm_overlap, 0 shipped: experiments/gemm_overlap_variants.py).
    Unchanged at 0 and under "flat"."""
    q, rows = overlap_exponents(table, hw, opts)
    if not len(rows):
        return core
    on = _scattered(q, rows, len(table.kinds)) > 0
    return jnp.where(on, _scattered(_joined(table, hw, opts, c, m, q, rows), rows, len(table.kinds)), core)


def overlap_decode_sums(table: OpTable, hw: Hardware, opts: Options, c0, c1, m0, m1, steps, summed):
    """[rows] `summed` (each row's roofline time summed over `steps` decode
    steps, roofline.sum_over_steps) with the rows of `overlap_exponents` whose
    times do not grow with the KV length (c1 = m1 = 0: the weight GEMMs) at
    steps x their `overlap_cores` time, as a step-by-step sum gives them.
    `summed` itself where no weight GEMM takes a norm (Options.gemm_overlap 0,
    its default): a decode step's attention rows grow with the KV length, so
    nothing else would change, and the default pays nothing for it."""
    if not opts.gemm_overlap:
        return summed
    q, rows = overlap_exponents(table, hw, opts)
    if not len(rows):
        return summed
    n = len(table.kinds)
    on = (_scattered(q, rows, n) > 0) & (c1 == 0.0) & (m1 == 0.0)
    return jnp.where(on, steps * _scattered(_joined(table, hw, opts, c0, m0, q, rows), rows, n), summed)


def row_cores(table: OpTable, hw: Hardware, opts: Options, c, m, p=None):
    """[rows] seconds of each row from its compute c and memory m, before
    communication: the roofline's max (its p-norm in smooth mode), the
    rows of `overlap_exponents` at their own norm (`overlap_cores`)."""
    return overlap_cores(table, hw, opts, c, m, combine(c, m, 0.0, p))


def kernel_counts(table: OpTable, hw: Hardware, opts: Options):
    """[rows] kernels each row runs as, after the software stack's fusion.

    A weight or expert GEMM with work is one kernel. The attention operator
    (its score, softmax and weighted-sum rows) is `hw.software.attention_kernels`
    kernels, charged on its score row (1: one fused FlashAttention-style
    kernel; without `Options.fused_attention` each of its rows is its own).
    An element-wise row (norm, RoPE, activation, residual add, the MoE
    permute) is `hw.software.elementwise_kernels` kernels (0: fused into a GEMM's
    epilogue, the attention kernel or the all-reduce), a state-space kernel
    one. Collectives pay `collective_latency` instead (tables_comm_times).
    The counts belong to the software stack (specs/software), not the chip.
    """
    mkn = table.m * table.k * table.n
    work = (table.f0 + table.f1 + table.a0 + table.a1 + table.w0 + table.w1 + table.o0 + table.o1) > 0
    mask = lambda ks: jnp.asarray(kind_mask(table, ks)) > 0  # noqa: E731
    gemm = mask((OpKind.GEMM, OpKind.WIDE_GEMM, OpKind.EXPERT_GEMM)) & (mkn > 0)
    if opts.fused_attention:
        attention = jnp.where(mask(OpKind.SCORES) & (mkn > 0), hw.software.attention_kernels, 0.0)
    else:
        attention = jnp.where(mask(OpKind.ATTENTION) & work, 1.0, 0.0)
    elementwise = jnp.where(mask((OpKind.ELEMENTWISE, OpKind.LOOKUP, OpKind.CACHE_WRITE)) & work,
                            hw.software.elementwise_kernels, 0.0)
    ssm = jnp.where(mask((OpKind.SCAN, OpKind.SSM)) & work, 1.0, 0.0)
    return jnp.where(gemm, 1.0, 0.0) + attention + elementwise + ssm


def operator_counts(table: OpTable):
    """[rows] 1 for each GEMM with work and for the attention operator (on
    its score row): the operators that cross a dataflow chip's fabric
    (Hardware.fabric_latency), whatever the software fuses."""
    mkn = table.m * table.k * table.n
    ops = jnp.asarray(kind_mask(table, (OpKind.GEMM, OpKind.WIDE_GEMM, OpKind.EXPERT_GEMM, OpKind.SCORES))) > 0
    return jnp.where(ops & (mkn > 0), 1.0, 0.0)


def with_host(device, host, hw: Hardware, p=None):
    """Seconds of an engine step whose device part takes `device` and whose
    host part (per-sequence scheduling, efficiency.host_time) takes `host`:
    the longer of the two where the stack overlaps them (hw.software.host_overlap 1:
    an overlap scheduler prepares step n+1 while the device runs step n),
    their sum where it does not (0), linear between. `p`: smooth max's
    sharpness (smooth mode), None for the exact max."""
    longer = jnp.maximum(device, host) if p is None else smooth_max(device, host, p)
    return hw.software.host_overlap * longer + (1.0 - hw.software.host_overlap) * (device + host)


def iteration_overhead(hw: Hardware, opts: Options, tp):
    """Seconds per engine iteration outside the kernels (0 with "flat"):
    the stack's time per step, plus `rank_overhead` per doubling of the
    `tp` tensor-parallel ranks (the step handed to each worker, the ranks'
    barrier: measured on the 2024 engines' batch-1 rows, 0.66 ms more at
    tp 2 and 1.61 ms at tp 4 on H100s; an MI300X's grow as log2(tp) to tp 8,
    experiments/static_batch_check.py --step-gap)."""
    if opts.conv.efficiency == "flat":
        return 0.0
    return hw.software.iteration_overhead + hw.software.rank_overhead * jnp.log2(jnp.maximum(tp, 1.0))


def collective_latency(hw: Hardware, opts: Options):
    """Seconds each collective call costs beyond its α-β time (0 with "flat").

    The link latency α of a spec (0.25 µs on NVLink) is the wire's; a call
    also launches a kernel and waits for every rank to reach it (the flags
    of TensorRT-LLM's one-shot all-reduce, NCCL's protocol handshakes):
    nccl-tests' 8-GPU all-reduce bottoms out near 10-20 µs for small messages
    on NVSwitch, not at 7 α.
    """
    return 0.0 if opts.conv.efficiency == "flat" else hw.software.collective_latency


# The host the fitted TensorRT-LLM rows ran on: DGX H100 / DGX H200, two
# Intel Xeon Platinum 8480C, 3.8 GHz maximum turbo (NVIDIA DGX H100 datasheet;
# Intel ARK). `sequence_overhead` is host time on it.
REFERENCE_HOST_CLOCK_HZ = 3.8e9


def host_time(hw: Hardware, opts: Options, sequences):
    """Host CPU seconds of one engine iteration over `sequences` running
    sequences on one scheduler process (0 with "flat").

    An in-flight batching engine does per-request work on the host every
    iteration: schedule it, build its positions and block tables, sample and
    check its stop criteria, hand back its token (TensorRT-LLM's PyTorch
    executor and SGLang run this in Python). It scales with the sequences,
    and with the inverse of the host's single-thread speed, taken here as its
    maximum clock (same-vintage server cores; IPC differences are not
    modelled). Engines with an overlap scheduler run it while the GPU runs
    the previous step (serving.iteration.iteration_time takes the max).
    """
    if opts.conv.efficiency == "flat":
        return 0.0
    clock = jnp.where(hw.host.clock_hz > 0, hw.host.clock_hz, REFERENCE_HOST_CLOCK_HZ)
    return hw.software.sequence_overhead * (REFERENCE_HOST_CLOCK_HZ / clock) * sequences


__all__ = ["DENSE_MIN_TILE_M", "GROUPED_MIN_TILE_M", "REFERENCE_HOST_CLOCK_HZ", "attention_mask",
           "collective_latency", "dense_tile_m", "dtype_index", "fixed_times", "gemm_peak", "gemm_problems",
           "grouped_tile_m", "halvings", "host_time", "iteration_overhead", "kernel_counts", "kernel_kind", "moe_mask",
           "narrow_steps", "operator_counts", "overlap_cores", "overlap_decode_sums", "overlap_exponents",
           "quantization", "quantized_experts", "row_dtypes", "row_rates",
           "weight_gemm_mask", "wide_mask", "with_host"]
