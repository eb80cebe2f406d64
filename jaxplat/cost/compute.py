"""Compute time of each operator from the chip's compute structure.

One function, `row_compute_times`, gives every operator row its compute
seconds (at s = 0 and per generated token, as the table's FLOPs):

  * GEMM rows on a chip without systolic arrays: FLOPs / the row's
    achievable FLOP/s, `peak` from efficiency.row_rates: the dtype's peak x
    efficiency.compute x the tile and wave quantization of the GEMM on the chip's
    SMs (microarch piece counts; a tensor-core `compute:` block's units and
    tile) x its kernel kind (efficiency.attention, efficiency.moe); the plain peak under
    the flat (GenZ) convention or without a compute block;
  * GEMM rows on a chip with systolic arrays: the same form, FLOPs /
    (array peak x array utilization x efficiency.compute x kernel kind), the
    utilization being the useful multiply-adds over the PE-cycles the GEMM
    occupies:
        u = m n k groups / (cycles x rows x cols x cores),
    cycles from `microarch.gemm_cycles` (SCALE-Sim's fold, fill and drain
    arithmetic; waves over the cores). Equivalently cycles / clock /
    (efficiency.compute x kind): one mechanism, peak x utilization(shape from the
    microarchitecture) x efficiency, for tensor cores and arrays alike;
  * element-wise rows (no GEMM dims: softmax, norms, activations): the
    vector unit, FLOPs / (vector_flops x efficiency.compute) when the chip gives
    one, else the chip's peak;
  * the attention softmax's exponentials, one per score, on the score
    rows' compute time: scores / exp_rate, the special-function units' rate
    (none where exp_rate is 0 or under the flat convention). They do not
    hide behind the matmuls: FlashAttention-3's BF16 forward on an H100
    takes 0.245 ps per score plus 4 x head_dim FLOPs at 893 TFLOP/s, fitted
    over head dimensions 64 to 256 (experiments/kernel_check.py), and 132
    SMs x 16 x 1.98 GHz exponentials/s is 0.239 ps each. On the score row
    they do hide under decode's K reads (its roofline), as a fused kernel's;
  * a causal mask's diagonal tiles: a multi-query attention kernel (prefill,
    training) cuts each head's queries into tiles of the chip's tile_m rows
    and computes every key tile up to the diagonal whole, (tile_m - 1) / 2
    pairs per query beyond the T (T + 1) / 2 the table counts (Dao 2023,
    FlashAttention-2 Sec. 3.1.1: only the blocks on the diagonal are
    masked); `diagonal_flops`, on the rows' FLOPs and exponentials;
  * rows named in `Hardware.offload`: the host, FLOPs / host_flops.

Offloaded rows also move their operands over the host link: the tensors the
row reads from or writes to memory (its off-chip A, W and O bytes; what it
keeps on chip, as FlashAttention's scores, stays on the host with it) at
host_bw, plus host_latency per call. That transfer replaces the row's memory
time (`offload_memory_times`): the host reads and writes them, not the chip.
This is how GenZ's Case Study IV (arXiv 2406.01698) offloads attention to a
CPU over PCIe.

Decode attention grows with the KV length s. Its suffix rows (the keys
generated so far) have the key dimension 0 at s = 0 in the table's m, k, n;
their per-token slope is the secant of the smooth cycle count over large key
counts, where every fold count is linear (exact for the smooth function).
"""

import jax.numpy as jnp
import numpy as np

from jaxplat.cost.efficiency import kernel_kind
from jaxplat.cost.microarch import gemm_cycles
from jaxplat.cost.operators import SOFTMAX_FLOPS, OpKind, OpTable, kind_mask
from jaxplat.cost.roofline import safe_div
from jaxplat.model import Hardware, Options, Workload


def offload_mask(table: OpTable, hw: Hardware) -> np.ndarray:
    """[rows] 1.0 where the row runs on the host (static: from names, groups
    and `hw.host.offload`). An entry names a group, an operator, or an operator's
    decode halves (logit -> logit_prefix, logit_suffix)."""
    names = set(hw.host.offload)

    def hit(name, group):
        return group in names or name in names or any(name.startswith(x + "_") for x in names)
    return np.array([float(bool(names) and hit(n, g)) for n, g in zip(table.names, table.groups)], np.float32)


def gemm_rows(table: OpTable):
    """([rows] GEMM rows at s = 0, [rows] GEMM rows growing with s): the
    latter have exactly one GEMM dim, the keys, at 0 and FLOPs per token."""
    m, k, n = table.m, table.k, table.n
    zero = (m == 0).astype(m.dtype) + (k == 0) + (n == 0)
    matmul = kind_mask(table, OpKind.MATMUL) > 0
    attn = kind_mask(table, (OpKind.SCORES, OpKind.ATTEND)) > 0
    return matmul & (m * k * n > 0), attn & (table.f1 > 0) & (zero == 1)


def array_peak(hw: Hardware):
    """Dense FLOP/s of the systolic arrays: 2 x rows x cols x cores x clock."""
    return 2.0 * hw.chip.array_rows * hw.chip.array_cols * hw.chip.cores * hw.chip.clock_hz


def _cycles(m, n, k, groups, hw: Hardware, smooth):
    """Cycles the arrays are busy with `groups` m x k x n GEMMs: SCALE-Sim's
    "Total Cycles" counts from 0, so the count is one more."""
    c = hw.chip
    return gemm_cycles(m, n, k, c.array_rows, c.array_cols, c.dataflow, c.cores, smooth, groups) + 1.0


def array_utilization(table: OpTable, hw: Hardware, smooth: bool = False):
    """Per-row array utilization ([rows], in (0, 1]) of the GEMM rows at s = 0
    and the arrays' cycles per generated token of the rows that grow with s.

    Returns (u0, cycles1): u0 = 1 where the row has no GEMM dims; cycles1 = 0
    where the row does not grow. `groups` = f0 / (2 m k n): the heads of an
    attention row, times the causal share of its query-key pairs (charged as
    that share of its folds).
    """
    m, k, n = table.m, table.k, table.n
    gemm, _ = gemm_rows(table)
    ms, ks, ns = (jnp.where(gemm, x, 1.0) for x in (m, k, n))
    groups = jnp.where(gemm, table.f0 / (2.0 * ms * ks * ns), 1.0)
    cyc = jnp.maximum(_cycles(ms, ns, ks, groups, hw, smooth), 1.0)
    pes = hw.chip.array_rows * hw.chip.array_cols * hw.chip.cores
    u0 = jnp.where(gemm, jnp.clip(ms * ns * ks * groups / (cyc * pes), 1e-9, 1.0), 1.0)

    _, grow = gemm_rows(table)
    live = lambda x: jnp.where(grow & (x > 0), x, 1.0)  # noqa: E731
    per_key = 2.0 * live(m) * live(k) * live(n)
    groups1 = jnp.where(grow, table.f1 / per_key, 1.0)  # groups x keys added per generated token
    big = 4.0 * hw.chip.array_rows * hw.chip.array_cols * hw.chip.cores  # every fold and wave count linear beyond this

    def at(g):  # smooth cycles with the growing (zero) dim set to g keys
        return _cycles(*(jnp.where(grow & (x == 0), g, live(x)) for x in (m, n, k)), groups1, hw, True)
    cycles1 = jnp.where(grow, (at(2.0 * big) - at(big)) / big, 0.0)
    return u0, cycles1


def row_compute_times(table: OpTable, hw: Hardware, wl: Workload, opts: Options, peak):
    """(c0, c1): [rows] compute seconds at s = 0 and per generated token.

    `peak`: [rows] (or one) achievable FLOP/s of each row on the chip's
    tensor units (efficiency.row_rates), used by GEMM rows when the chip has
    no systolic arrays and by non-GEMM rows when it gives no vector unit.
    """
    f0, f1 = executed_flops(table, hw, opts), table.f1
    gemm, grow = gemm_rows(table)
    vec = jnp.where(hw.chip.vector_flops > 0, hw.chip.vector_flops * hw.efficiency.compute, peak)
    if hw.chip.dataflow:
        u0, cycles1 = array_utilization(table, hw, opts.smooth)
        eff = hw.efficiency.compute * kernel_kind(table, hw, wl, opts)
        rate0 = array_peak(hw) * u0 * eff
        c0 = jnp.where(gemm, f0 / rate0, f0 / vec)
        c1 = jnp.where(grow, cycles1 / (hw.chip.clock_hz * eff), jnp.where(gemm, f1 / rate0, f1 / vec))
    else:
        # No array: GEMMs at their row's achievable peak; element-wise rows on
        # the vector unit when the spec gives one (else at the peak too).
        ew = ~(gemm | grow)
        c0, c1 = jnp.where(ew, f0 / vec, f0 / peak), jnp.where(ew, f1 / vec, f1 / peak)
    e0, e1 = exp_times(table, hw, opts)  # the diagonal tiles' exponentials included
    c0, c1 = c0 + e0, c1 + e1
    if hw.host.offload:
        off = jnp.asarray(offload_mask(table, hw)) > 0
        host = jnp.where(off, hw.host.flops, 1.0)
        c0, c1 = jnp.where(off, f0 / host, c0), jnp.where(off, f1 / host, c1)
    return c0, c1


def diagonal_flops(table: OpTable, hw: Hardware, opts: Options):
    """[rows] FLOPs a causal mask's diagonal tiles add at s = 0: `queries` x
    (tile_m - 1) / 2 pairs at the row's FLOPs per pair (2 x head dim on the
    score and weighted-sum rows, SOFTMAX_FLOPS on the softmax's). 0 on rows
    of no multi-query kernel (queries 0), on chips without a tile structure
    (units 0: systolic arrays, dataflow), under the flat convention and
    where the table counts T^2 pairs (no causal_pairs: GenZ)."""
    if opts.conv.efficiency == "flat" or not opts.conv.causal_pairs:
        return jnp.zeros_like(table.f0)
    scores, attend, softmax = (kind_mask(table, (k,)) > 0 for k in (OpKind.SCORES, OpKind.ATTEND, OpKind.SOFTMAX))
    per_pair = jnp.where(scores, 2.0 * table.k,
                         jnp.where(attend, 2.0 * table.n, jnp.where(softmax, SOFTMAX_FLOPS, 0.0)))
    rows = jnp.where(hw.chip.units > 0, hw.chip.tile_m, 1.0)
    return table.queries * 0.5 * jnp.maximum(rows - 1.0, 0.0) * per_pair


def executed_flops(table: OpTable, hw: Hardware, opts: Options):
    """[rows] FLOPs each row executes at s = 0: its own plus a causal mask's
    diagonal tiles (`diagonal_flops`)."""
    return table.f0 + diagonal_flops(table, hw, opts)


def exp_times(table: OpTable, hw: Hardware, opts: Options):
    """(e0, e1): [rows] seconds of the softmax's exponentials at s = 0 and per
    generated token, one per score at the chip's exp_rate (0 where it is 0,
    and under the flat convention), charged on the score rows (2 x head_dim
    FLOPs per score: FLOPs / 2k), so that the row's roofline hides them under
    its K reads where decode attention streams the cache, as a fused kernel does.
    A causal mask's diagonal tiles (`diagonal_flops`) compute theirs too."""
    if opts.conv.efficiency == "flat":
        return jnp.zeros_like(table.f0), jnp.zeros_like(table.f1)
    scores = (kind_mask(table, (OpKind.SCORES,)) > 0) & (table.k > 0)
    per_flop = safe_div(1.0, hw.chip.exp_rate) / (2.0 * jnp.where(scores, table.k, 1.0))
    f0 = executed_flops(table, hw, opts)
    return jnp.where(scores, f0 * per_flop, 0.0), jnp.where(scores, table.f1 * per_flop, 0.0)


def offload_memory_times(table: OpTable, hw: Hardware, m0, m1):
    """(m0, m1) with the offloaded rows' memory time replaced by their link
    transfer: off-chip A, W and O bytes at host_bw, plus host_latency per call."""
    if not hw.host.offload:
        return m0, m1
    off = jnp.asarray(offload_mask(table, hw)) > 0
    link = lambda a, w, o: ((1.0 - table.on_a) * a + (1.0 - table.on_w) * w + (1.0 - table.on_o) * o)  # noqa: E731
    t0 = safe_div(link(table.a0, table.w0, table.o0), hw.host.bandwidth) + hw.host.latency
    t1 = safe_div(link(table.a1, table.w1, table.o1), hw.host.bandwidth)
    return jnp.where(off, t0, m0), jnp.where(off, t1, m1)


__all__ = ["array_peak", "array_utilization", "executed_flops", "exp_times", "gemm_rows", "offload_mask",
           "offload_memory_times", "row_compute_times"]
