"""Memory per chip: footprint (weights, KV cache, activations) and fit; placement
over the memory levels and the on-chip tiling reuse that make SRAM size matter."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.operators import OpKind, OpTable, kind_mask
from jaxplat.cost.optable import joined_tables
from jaxplat.cost.roofline import chosen_max, safe_div
from jaxplat.model import (
    Hardware,
    Model,
    Workload,
    attention_layers,
    kv_elements_per_token,
    local_tokens,
    pytree_dataclass,
    ssm_state_elements,
)


def weights_bytes(table: OpTable) -> jax.Array:
    """Weight bytes resident per chip: Σ count·stored over the table's rows."""
    return jnp.sum(table.count * table.stored)


def kv_bytes(model: Model, wl: Workload, kv_heads_per_chip: jax.Array, d_inner_per_chip=0.0,
             conv_once: bool = False, local: bool = False) -> jax.Array:
    """KV-cache and recurrent-state bytes per chip at the end of generation.

    Attention layers: beams share the prompt's KV, b·prompt + b·beams·output
    tokens per layer (GenZ counts it the same way, CONVENTIONS.md "Summary
    numbers"). With `local`, local-attention layers hold min(context,
    window) tokens (`model.local_tokens`): the prompt's share once, each
    beam its own rest. Mamba layers: a constant state per sequence and beam,
    d_inner x (d_state + d_conv) elements (architecture.ssm_state_elements),
    in the KV dtype. `conv_once` (GenZ's Mamba accounting): the conv part is
    d_inner/tp x d_conv per layer whatever the batch (GenZ counts the conv's
    weights as its state) and the SSM part spans all d_inner channels (GenZ
    does not split its scan over tp).
    """
    P, O, b = wl.prompt, wl.output, wl.batch
    tokens = b * P + b * wl.beams * O
    if local:
        loc_p = local_tokens(model, P)
        loc = b * loc_p + b * wl.beams * (local_tokens(model, P + O) - loc_p)
        tokens_sum = (attention_layers(model) - model.local_layers) * tokens + model.local_layers * loc
    else:
        tokens_sum = attention_layers(model) * tokens
    kv = kv_elements_per_token(model, kv_heads_per_chip) * tokens_sum
    seqs = wl.batch * wl.beams
    if conv_once:
        state = seqs * model.d_inner * model.d_state + d_inner_per_chip * model.d_conv
    else:
        state = seqs * ssm_state_elements(model, d_inner_per_chip)
    return (kv + model.mamba_layers * state) * wl.bytes_kv


def activation_bytes(table: OpTable) -> jax.Array:
    """Peak activation working set in main memory during prefill, bytes:
    the largest off-chip input + output of any one operator (operators run
    one after another, so their buffers are reused)."""
    live = (1.0 - table.on_a) * table.a0 + (1.0 - table.on_o) * table.o0
    return chosen_max(live, -1)  # not jnp.max: its derivative can be NaN (roofline.chosen_max)


def capacity_bytes(hw: Hardware) -> jax.Array:
    """Bytes per chip that hold weights, KV cache and activations: its
    off-chip levels (HBM, host/CXL). An SRAM beside them holds copies (the
    H100's 50 MB L2 is a cache of HBM, NVIDIA H100 whitepaper), not extra
    room; a chip with no off-chip memory (Groq LPU, Cerebras WSE) holds
    everything in its SRAM."""
    offchip = jnp.sum(hw.memory.size)
    return jnp.where(offchip > 0, offchip, hw.memory.sram_size)


# --------------------------------------------------------------- hierarchy
#
# Placement over the memory levels and on-chip tiling reuse. These turn the
# plain roofline (every operand crosses the main-memory bus once) into one
# where SRAM size matters. Used by `inference.row_components` in the default
# profile when `Options.memory_hierarchy` is on; the genz profile never uses
# them (GenZ has no such model). Limits that the tests pin down:
#   * sram_size = 0: no on-chip buffer is modelled, every off-chip byte is
#     read once from the levels it is placed in (one level: the plain HBM
#     roofline, exactly);
#   * sram_size -> inf: weights, KV cache and activations all sit on chip and
#     every byte moves at SRAM bandwidth ("all on chip").

N_CLASSES = 3  # weights, KV cache, activations: placed in this order


def kv_read_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 where the row's W operand is the KV cache: attention's scores and
    weighted sum, a Mamba scan's state (static, from kinds)."""
    return kind_mask(table, OpKind.KV_READ)


def kv_write_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 where the row's output is written to the KV cache (or a Mamba state)."""
    return kind_mask(table, OpKind.CACHE_WRITE)


def table_footprint(table: OpTable, s) -> jax.Array:
    """[3] bytes per chip of (weights, KV cache, activations) seen by a table.

    Weights: resident `stored` bytes. KV: the bytes the attention rows read at
    s generated tokens (logit reads K, attend reads V; MLA's attend re-uses
    the latent, so the sum is the cache once). Activations: the peak working
    set of one operator (`activation_bytes`). Weights and KV are those of one
    chip of the busiest pipeline stage (`stage` rows, as `evaluate` counts
    weights per chip), not of every stage (`count`).
    """
    kv = jnp.sum(table.stage * kv_read_mask(table) * (table.w0 + table.w1 * s))
    return jnp.stack([jnp.sum(table.stage * table.stored), kv, activation_bytes(table)])


def levels(hw: Hardware, sram_reserve) -> tuple[jax.Array, jax.Array]:
    """Capacities [1 + MAX_MEM_LEVELS] bytes and bandwidths (derated, bytes/s)
    of the levels residents may use, fastest first: SRAM less the tiling
    reserve, then the off-chip levels. Padded levels have size 0."""
    sizes = jnp.concatenate([jnp.maximum(hw.memory.sram_size - sram_reserve, 0.0)[None], hw.memory.size])
    bws = jnp.concatenate([hw.memory.sram_bandwidth[None], hw.memory.bandwidth]) * hw.efficiency.memory
    return sizes, bws


def place(need: jax.Array, sizes: jax.Array) -> jax.Array:
    """Fill levels fastest first with the classes in order, spilling down.

    Args:
      need: [C] bytes of each class (placed in this order).
      sizes: [L] capacity of each level, fastest first.
    Returns:
      [C, L] bytes of each class on each level. Bytes beyond the total
      capacity go to the last level with non-zero size (the deployment then
      does not fit; `fits` in Metrics says so).
    """
    hi_c = jnp.cumsum(need)
    lo_c = hi_c - need
    hi_l = jnp.cumsum(sizes)
    lo_l = hi_l - sizes
    amount = jnp.clip(jnp.minimum(hi_c[:, None], hi_l[None, :]) - jnp.maximum(lo_c[:, None], lo_l[None, :]), 0.0)
    overflow = need - jnp.sum(amount, axis=1)
    real = sizes > 0
    last = jnp.max(jnp.where(real, jnp.arange(sizes.shape[0]), 0))
    return amount + overflow[:, None] * (jnp.arange(sizes.shape[0]) == last)[None, :]


def seconds_per_byte(placed: jax.Array, bws: jax.Array) -> jax.Array:
    """[C] mean seconds per byte of each class over the levels it occupies."""
    frac = safe_div(placed, jnp.sum(placed, axis=1, keepdims=True))
    return jnp.sum(safe_div(frac, bws[None, :]), axis=1)


def tiling_factors(table: OpTable, buffer, elem_bytes):
    """Off-chip re-read factors (r_a, r_w) of each row's A and W operands.

    A GEMM C[m,n] = A[m,k] W[k,n] with an on-chip buffer of S bytes either
    (i) keeps as much of the smaller operand X as fits and streams the larger
    one once per resident block: X once, the other max(1, X/S) times; or
    (ii) tiles C in t x t blocks, t = sqrt(S / (3 b)) (an A, W and C tile on
    chip): A is re-read max(1, n/t) times and W max(1, m/t), the classic
    ~2mnk/sqrt(S) traffic (Hong & Kung, STOC 1981; Irony, Toledo & Tiskin,
    JPDC 2004). The cheaper schedule is taken. Operands that fit (S >= X)
    are read once. Attention rows (logit, attend) run as FlashAttention
    does: a block of queries and its output accumulator stay on chip and
    the K/V cache streams past once per block, so K (or V) is re-read
    max(1, (Q + O) / S) times, Q = O = the query-side bytes of one (sequence,
    head); Θ(N²d²/M) traffic per sequence of N and head (Dao et al., NeurIPS
    2022, Theorem 2), whatever the batch.
    Rows without GEMM dims (element-wise, collectives) get 1.
    `buffer` = 0 means no buffer is modelled: factors 1 (plain roofline).
    Returns two [rows] arrays >= 1.
    """
    gemm, attn = _tiled_rows(table)
    attn = (buffer > 0) & attn
    r_kv = jnp.maximum(safe_div(_attention_resident(table), jnp.where(attn, buffer, 1.0)), 1.0)
    has = (buffer > 0) & gemm
    s = jnp.where(has, buffer, 1.0)
    a, w = table.a0, table.w0
    x = jnp.minimum(a, w)
    passes = jnp.maximum(safe_div(x, s), 1.0)
    a_small = a <= w
    block_a, block_w = jnp.where(a_small, 1.0, passes), jnp.where(a_small, passes, 1.0)
    t = jnp.sqrt(s / (3.0 * elem_bytes))
    sq_a, sq_w = jnp.maximum(table.n / t, 1.0), jnp.maximum(table.m / t, 1.0)
    use_block = a * block_a + w * block_w <= a * sq_a + w * sq_w
    r_a = jnp.where(use_block, block_a, sq_a)
    r_w = jnp.where(use_block, block_w, sq_w)
    return jnp.where(has, r_a, 1.0), jnp.where(has, r_w, jnp.where(attn, r_kv, 1.0))


def tiling_reserve(table: OpTable, hw: Hardware) -> jax.Array:
    """On-chip bytes kept free for tiling: what the largest GEMM needs to read
    its operands once (its smaller operand) or the largest attention its
    query block and output (`_attention_resident`), or all the SRAM if that
    does not fit. Residents (`place`) get the rest of the SRAM."""
    gemm, attn = _tiled_rows(table)
    need = chosen_max(jnp.where(gemm, jnp.minimum(table.a0, table.w0), 0.0), -1)  # not jnp.max (NaN derivative)
    attn_need = chosen_max(jnp.where(attn, _attention_resident(table), 0.0), -1)
    return jnp.minimum(hw.memory.sram_size, jnp.maximum(need, attn_need))


def _tiled_rows(table: OpTable):
    """[rows] masks of the weight GEMMs (dense, 16-bit and expert) and of the
    attention rows (scores, weighted sum: the W operand is the KV cache), both
    with GEMM dims (static kinds)."""
    dims = table.m * table.k * table.n > 0
    gemm = kind_mask(table, (OpKind.GEMM, OpKind.WIDE_GEMM, OpKind.EXPERT_GEMM)) > 0
    attn = kind_mask(table, (OpKind.SCORES, OpKind.ATTEND)) > 0
    return dims & gemm, dims & attn


def _attention_resident(table: OpTable) -> jax.Array:
    """[rows] bytes FlashAttention keeps on chip to read one (sequence,
    head)'s K/V once: its queries and output accumulator, each the row's
    query-side bytes (logit reads Q as its A operand; attend writes O as its
    output) over the row's (sequence, head) problems. The bound of Dao et
    al. (2022, Theorem 2) holds per problem: each streams its own K/V."""
    query_side = kind_mask(table, OpKind.SCORES) > 0
    return 2.0 * safe_div(jnp.where(query_side, table.a0, table.o0), table.problems)


@pytree_dataclass
class BytePrices:
    """Per-row price of one byte of each operand (A input, W weight or KV,
    O output), [rows] arrays: `seconds` the memory time and `joules` the
    energy of moving it, tiling re-reads and the level it is placed on
    included. A row's memory time is a·seconds_a + w·seconds_w + o·seconds_o,
    its memory energy likewise, so both stay linear (affine in s) in bytes."""

    seconds_a: jax.Array
    seconds_w: jax.Array
    seconds_o: jax.Array
    joules_a: jax.Array
    joules_w: jax.Array
    joules_o: jax.Array

    def time(self, a, w, o):
        return a * self.seconds_a + w * self.seconds_w + o * self.seconds_o

    def energy(self, a, w, o):
        return a * self.joules_a + w * self.joules_w + o * self.joules_o


def byte_prices(table: OpTable, hw: Hardware, wl: Workload, s_final, hierarchy: bool) -> BytePrices:
    """Seconds and joules per byte of each row's operands.

    Plain roofline (`hierarchy` False): off-chip bytes once at the first
    memory level's bandwidth and energy per byte, on-chip tensors (on_*
    flags) at the SRAM's (no time when the chip has no SRAM).

    Hierarchy: off-chip bytes of each class (weights / KV / activations) are
    charged at the mean seconds and joules per byte of the levels the class
    is placed on (footprint at s = s_final; `place`), A and W bytes times
    their tiling re-read factors (`tiling_factors`): the energy of a byte is
    paid where the time of that byte is (Horowitz, ISSCC 2014: energy per
    access grows with the level's distance), for every re-read.
    """
    if not hierarchy:
        return _row_prices(table, hw, wl, None)
    return _row_prices(table, hw, wl, _class_prices(table, hw, s_final))


def joined_byte_prices(tables, hw: Hardware, wl: Workload, s_final, hierarchy: bool, joined=None) -> BytePrices:
    """`byte_prices` of each of several tables of one configuration, as one
    BytePrices over their joined rows (`joined`: optable.joined_tables of
    them, if already built): each table's placement and tiling reserve its
    own (they read its whole footprint), the per-row prices computed once
    for all the rows."""
    both = joined_tables(tables) if joined is None else joined
    if not hierarchy:
        return _row_prices(both, hw, wl, None)
    per_table = [_class_prices(t, hw, s_final) for t in tables]
    # each table's numbers on each of its rows
    rows = lambda *v: jnp.concatenate([jnp.zeros_like(t.f0) + x for t, x in zip(tables, v)])  # noqa: E731
    return _row_prices(both, hw, wl, jax.tree.map(rows, *per_table))


def _class_prices(table: OpTable, hw: Hardware, s_final):
    """(SRAM bytes kept for tiling, (tau_w, tau_kv, tau_act) s/byte, (eps_w,
    eps_kv, eps_act) J/byte): a table's placement of its classes over the
    levels (`byte_prices` with the hierarchy)."""
    reserve = tiling_reserve(table, hw)
    sizes, bws = levels(hw, reserve)
    e_levels = jnp.concatenate([hw.power.energy_sram[None], hw.power.energy_mem])  # as `levels` orders them
    # at least one byte per class, so an empty class is priced where its next byte would go
    placed = place(jnp.maximum(table_footprint(table, s_final), 1.0), sizes)
    return reserve, tuple(seconds_per_byte(placed, bws)), tuple(joules_per_byte(placed, e_levels))


def _row_prices(table: OpTable, hw: Hardware, wl: Workload, classes) -> BytePrices:
    """`byte_prices` from the classes' prices (`_class_prices`, scalars or
    [rows] each; None: the plain roofline)."""
    sram_bw = hw.memory.sram_bandwidth * hw.efficiency.memory
    on_s = lambda on: safe_div(on, sram_bw)  # noqa: E731
    on_j = lambda on: on * hw.power.energy_sram  # noqa: E731
    if classes is None:
        main_bw = hw.memory.bandwidth[0] * hw.efficiency.memory
        e_main = hw.power.energy_mem[0]
        sec = [(1.0 - on) / main_bw + on_s(on) for on in (table.on_a, table.on_w, table.on_o)]
        jou = [(1.0 - on) * e_main + on_j(on) for on in (table.on_a, table.on_w, table.on_o)]
        return BytePrices(*sec, *jou)
    reserve, (tau_w, tau_kv, tau_act), (eps_w, eps_kv, eps_act) = classes
    # Each of a multi-core chip's cores tiles its share of a GEMM in its own
    # share of the SRAM: the re-read bound ~2mnk/sqrt(S) summed over cores is
    # that of one buffer of S / cores (cores = 1 without a compute block).
    r_a, r_w = tiling_factors(table, reserve / hw.chip.cores, wl.bytes_act)
    kv_r, kv_o = kv_read_mask(table), kv_write_mask(table)
    mix = lambda mask, yes, no: mask * yes + (1.0 - mask) * no  # noqa: E731
    off_a, off_w, off_o = 1.0 - table.on_a, 1.0 - table.on_w, 1.0 - table.on_o
    return BytePrices(
        seconds_a=off_a * r_a * tau_act + on_s(table.on_a),
        seconds_w=off_w * r_w * mix(kv_r, tau_kv, tau_w) + on_s(table.on_w),
        seconds_o=off_o * mix(kv_o, tau_kv, tau_act) + on_s(table.on_o),
        joules_a=off_a * r_a * eps_act + on_j(table.on_a),
        joules_w=off_w * r_w * mix(kv_r, eps_kv, eps_w) + on_j(table.on_w),
        joules_o=off_o * mix(kv_o, eps_kv, eps_act) + on_j(table.on_o))


def joules_per_byte(placed: jax.Array, e_levels: jax.Array) -> jax.Array:
    """[C] mean joules per byte of each class over the levels it occupies."""
    frac = safe_div(placed, jnp.sum(placed, axis=1, keepdims=True))
    return jnp.sum(frac * e_levels[None, :], axis=1)


def hierarchy_memory_fn(table: OpTable, hw: Hardware, wl: Workload, s_final):
    """Memory-time function mem(a, w, o) -> [rows] seconds of one table under
    placement and tiling (`byte_prices` with the hierarchy)."""
    return byte_prices(table, hw, wl, s_final, True).time


def chips_to_fit(total_bytes, per_chip_fixed, hw: Hardware, fraction=1.0) -> jax.Array:
    """Chips needed so that `total_bytes` split evenly over them, plus
    `per_chip_fixed` bytes on each, fit in `fraction` of a chip's capacity.

    For SRAM-only chips (Groq LPU: 230 MB, Cerebras WSE-3: 44 GB) this is how
    many chips the weights and KV cache require. Returns a float >= 1 (inf-free:
    a chip whose fixed part does not fit returns 1e9).
    """
    room = fraction * capacity_bytes(hw) - per_chip_fixed
    ok = room > 0
    return jnp.where(ok, jnp.maximum(jnp.ceil(total_bytes / jnp.where(ok, room, 1.0)), 1.0), 1e9)
