"""Memory per chip: footprint (weights, KV cache, activations) and fit; placement
over the memory levels and the on-chip tiling reuse that make SRAM size matter."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.operators import OpTable
from jaxplat.cost.roofline import safe_div
from jaxplat.model import Hardware, Model, Workload, attention_layers, kv_elements_per_token, ssm_state_elements


def weights_bytes(table: OpTable) -> jax.Array:
    """Weight bytes resident per chip: Σ count·stored over the table's rows."""
    return jnp.sum(table.count * table.stored)


def kv_bytes(model: Model, wl: Workload, kv_heads_per_chip: jax.Array, d_inner_per_chip=0.0,
             conv_once: bool = False) -> jax.Array:
    """KV-cache and recurrent-state bytes per chip at the end of generation.

    Attention layers: beams share the prompt's KV, b·prompt + b·beams·output
    tokens per layer (GenZ counts it the same way, CONVENTIONS.md "Summary
    numbers"). Mamba layers: a constant state per sequence and beam,
    d_inner x (d_state + d_conv) elements (architecture.ssm_state_elements),
    in the KV dtype. `conv_once` (GenZ's Mamba accounting): the conv part is
    d_inner/tp x d_conv per layer whatever the batch (GenZ counts the conv's
    weights as its state) and the SSM part spans all d_inner channels (GenZ
    does not split its scan over tp).
    """
    tokens = wl.batch * wl.prompt + wl.batch * wl.beams * wl.output
    kv = attention_layers(model) * kv_elements_per_token(model, kv_heads_per_chip) * tokens
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
    return jnp.max(live)


def capacity_bytes(hw: Hardware) -> jax.Array:
    """Bytes a chip can hold over all its memory levels."""
    return hw.sram_size + jnp.sum(hw.mem_size)


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

# Rows whose W operand is the KV cache (attention), and whose output is.
_KV_READ_PREFIXES = ("logit", "attend", "ssm_scan")  # the scan's W: a Mamba layer's state
_KV_WRITE_NAMES = ("kv_write", "ssm_state_write")
N_CLASSES = 3  # weights, KV cache, activations: placed in this order


def kv_read_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 where the row's W operand is the KV cache (static, from names)."""
    return np.array([float(n.startswith(_KV_READ_PREFIXES)) for n in table.names], np.float32)


def kv_write_mask(table: OpTable) -> np.ndarray:
    """[rows] 1.0 where the row's output is written to the KV cache."""
    return np.array([float(n in _KV_WRITE_NAMES) for n in table.names], np.float32)


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
    sizes = jnp.concatenate([jnp.maximum(hw.sram_size - sram_reserve, 0.0)[None], hw.mem_size])
    bws = jnp.concatenate([hw.sram_bw[None], hw.mem_bw]) * hw.eff_memory
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
    max(1, (Q + O) / S) times, Q = O = the row's query-side bytes; Θ(N²d²/M)
    traffic over a sequence of N (Dao et al., NeurIPS 2022, Theorem 2).
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
    need = jnp.max(jnp.where(gemm, jnp.minimum(table.a0, table.w0), 0.0))
    attn_need = jnp.max(jnp.where(attn, _attention_resident(table), 0.0))
    return jnp.minimum(hw.sram_size, jnp.maximum(need, attn_need))


def _tiled_rows(table: OpTable):
    """[rows] masks of the weight GEMMs and of the attention rows (logit,
    attend: the W operand is the KV cache), both with GEMM dims."""
    dims = table.m * table.k * table.n > 0
    kv = kv_read_mask(table) == 1
    return dims & ~kv, dims & kv


def _attention_resident(table: OpTable) -> jax.Array:
    """[rows] bytes FlashAttention keeps on chip to read K/V once: the
    queries and the output accumulator, each the row's query-side bytes
    (logit reads Q as its A operand; attend writes O as its output)."""
    query_side = np.array([n.startswith("logit") for n in table.names])
    return 2.0 * jnp.where(query_side, table.a0, table.o0)


def hierarchy_memory_fn(table: OpTable, hw: Hardware, wl: Workload, s_final):
    """Memory-time function of one table under placement and tiling.

    Returns mem(a, w, o) -> [rows] seconds, linear in the byte arrays (so the
    affine-in-s decode coefficients stay affine): off-chip bytes of each
    class (weights / KV / activations) are charged at the mean seconds per
    byte of the levels the class is placed in (footprint at s = s_final),
    A and W bytes times their tiling re-read factors; on-chip tensors
    (on_* flags) move at SRAM bandwidth, free when the chip has none.
    """
    reserve = tiling_reserve(table, hw)
    sizes, bws = levels(hw, reserve)
    # at least one byte per class, so an empty class is priced where its next byte would go
    need = jnp.maximum(table_footprint(table, s_final), 1.0)
    tau_w, tau_kv, tau_act = seconds_per_byte(place(need, sizes), bws)
    # Each of a multi-core chip's cores tiles its share of a GEMM in its own
    # share of the SRAM: the re-read bound ~2mnk/sqrt(S) summed over cores is
    # that of one buffer of S / cores (cores = 1 without a compute block).
    r_a, r_w = tiling_factors(table, reserve / hw.cores, wl.bytes_act)
    kv_r, kv_o = kv_read_mask(table), kv_write_mask(table)
    tau_wop = kv_r * tau_kv + (1.0 - kv_r) * tau_w
    tau_out = kv_o * tau_kv + (1.0 - kv_o) * tau_act
    sram_bw = hw.sram_bw * hw.eff_memory

    def mem(a, w, o):
        off = ((1.0 - table.on_a) * a * r_a * tau_act + (1.0 - table.on_w) * w * r_w * tau_wop
               + (1.0 - table.on_o) * o * tau_out)
        on = table.on_a * a + table.on_w * w + table.on_o * o
        return off + safe_div(on, sram_bw)
    return mem


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
