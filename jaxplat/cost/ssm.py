"""Rows of a Mamba block (the mixer of state-space and hybrid models).

Mamba (Gu & Dao 2023, arXiv 2312.00752, Sec. 3): an input projection to x
and the gate z, a depthwise causal conv of width d_conv over x, the
projection of x to (dt, B, C) and dt's up-projection (Mamba-1), the
selective scan h_t = exp(dt A) h_(t-1) + dt B x_t, y_t = C h_t + D x_t, the
gate y * SiLU(z), and the output projection. Mamba-2 (Dao & Gu 2024, arXiv
2405.21060, Sec. 7) projects z, x, B, C and dt in one GEMM, convolves x, B
and C, and has one scalar A per head. Hybrids (Jamba, Lieber et al. 2024,
arXiv 2403.19887) interleave these blocks with attention layers.

A sequence's state is a constant (d_inner x d_state, plus the conv window)
instead of a KV cache, so a decode step costs the same at any context: no
row here depends on the KV length s (f1 = a1 = w1 = o1 = 0).

Channels (d_inner) are split over the attention split (tp, or tp*ep with
Conventions.heads_over_ep), as Megatron-LM splits Mamba's heads. The rows'
count tag is "mamba" (the Mamba layers).
"""

import jax.numpy as jnp

from jaxplat.cost.opkind import OpKind
from jaxplat.model import ssm_conv_channels, ssm_in_width, ssm_state_elements

# FLOPs of the recurrent scan per (token, channel, state) element (Gu & Dao
# 2023, Alg. 2): Mamba-1 discretizes per element, dt*A and its exp (2),
# dt*B*x (2), h = dA*h + dBx (2), y += C*h (2). Mamba-2's A is one scalar
# per head, so dA is per (token, head): dt*x*B (2 per element with dt*x
# shared), h update (2), C*h (2). The recurrence is what a decode step runs;
# Mamba-2's prefill runs the chunked dual form instead (ssd_flops).
SCAN_FLOPS = {"mamba1": 8.0, "mamba2": 6.0}
# Per (token, channel): softplus(dt + bias) (3), the D*x skip (2), the gate
# y*SiLU(z) (4, as an activation).
GATE_FLOPS = 9.0


def ssd_flops(m, tok, seqs, di, share):
    """FLOPs of Mamba-2's chunked scan (SSD) over `tok` tokens of `seqs`
    sequences on one chip holding `di` channels (`share` of them).

    Prefill and training run the state-space dual form in chunks of Q tokens
    (Dao & Gu 2024, arXiv 2405.21060, Sec. 6; mamba_ssm's
    mamba_chunk_scan_combined): per chunk and group C Bᵀ (2 Q² N); per head
    the masked product (L ∘ C Bᵀ) X (2 Q² P), the chunk's state Bᵀ X (2 Q N P)
    and the output from the carried state C h (2 Q N P). Per token that is
    2 Q N per group and (2 Q + 4 N) per channel (P channels a head); the pass
    of states between chunks (N P per chunk and head) is left out. A sequence
    shorter than a chunk is one chunk of its length.
    """
    q = jnp.minimum(m.ssm_chunk, tok / jnp.maximum(seqs, 1.0))
    groups = jnp.maximum(m.ssm_groups * share, 1.0)
    return tok * (2.0 * q * m.d_state * groups + (2.0 * q + 4.0 * m.d_state) * di)


def mamba_block(r, ctx, phase: str, seqs, tok, on_gemm):
    """Add the rows of one Mamba layer on one chip (tag "mamba").

    Args:
      r: the table's row accumulator (operators._Rows). ctx: its context.
      phase: "prefill" or "decode". seqs: sequences (and beams) whose state
        is carried. tok: tokens processed per chip. on_gemm: the on-chip
        flags of weight GEMM operands in this phase.
    """
    if ctx.opts.conv.mamba_accounting == "genz":
        return _genz_block(r, ctx, tok, on_gemm)
    m, ba, bw, bk = ctx.model, ctx.ba, ctx.bw, ctx.bk
    D, N, K = m.hidden, m.d_state, m.d_conv
    split = ctx.tp_attn
    di = ctx.ceil(m.d_inner / split)
    share = di / jnp.maximum(m.d_inner, 1.0)  # this chip's share of the channels
    conv = ssm_conv_channels(m) * share
    r.gemm("ssm_in_proj", "mamba", "mamba", tok, D, ssm_in_width(m) * share, ctx, on=on_gemm)
    # Depthwise causal conv1d, K taps per channel, and its SiLU.
    r.add("ssm_conv", "mamba", "mamba", OpKind.SSM, f=((2.0 * K + 4.0) * tok * conv, 0.0), a=(tok * conv * ba, 0.0),
          w=(conv * K * bw, 0.0), o=(tok * conv * ba, 0.0), stored=conv * K * bw)
    if m.ssm == "mamba1":
        R = m.dt_rank
        # x_proj contracts over the split channels: partial (dt, B, C) sums are
        # all-reduced over the split before dt_proj.
        r.gemm("ssm_x_proj", "mamba", "mamba", tok, di, R + 2.0 * N, ctx, on=on_gemm)
        r.collective("ssm_x_allreduce", "mamba", "mamba", "allreduce", split, tok * (R + 2.0 * N) * ba)
        r.gemm("ssm_dt_proj", "mamba", "mamba", tok, R, di, ctx, on=on_gemm)
        bc = 2.0 * N
        params = di * N + 2.0 * di  # A, D and the dt bias
    else:
        # B and C of this chip's groups: mamba_ssm's tensor-parallel Mamba-2 splits the groups over the
        # ranks (ngroups // world_size), as its in-projection, conv and ssd_flops do; at least one
        bc = 2.0 * jnp.maximum(m.ssm_groups * share, 1.0) * N
        params = 3.0 * m.ssm_heads * share  # A, D and the dt bias per head
    # The fused selective scan keeps h on chip while it runs over the tokens
    # (Gu & Dao 2023, Sec. 3.3.2): it reads x, dt, z, B and C and writes y.
    # A decode step also reads the sequence's state (SSM state and conv
    # window) and writes it back (state_write); prefill writes it once.
    state = seqs * ssm_state_elements(m, di) * bk
    reads_state = state if phase == "decode" else 0.0
    scan_flops = SCAN_FLOPS[m.ssm] * tok * di * N
    if m.ssm == "mamba2" and phase == "prefill":
        scan_flops = ssd_flops(m, tok, seqs, di, share)
    r.add("ssm_scan", "mamba", "mamba", OpKind.SCAN, f=(scan_flops + GATE_FLOPS * tok * di, 0.0),
          a=(tok * (3.0 * di + bc) * ba + params * bw, 0.0), w=(reads_state, 0.0), o=(tok * di * ba, 0.0),
          stored=params * bw)
    r.add("ssm_state_write", "mamba", "mamba", OpKind.CACHE_WRITE, o=(state, 0.0))
    r.gemm("ssm_out_proj", "mamba", "mamba", tok, di, D, ctx, on=on_gemm)
    r.collective("mamba_allreduce", "mamba", "mamba", "allreduce", split, tok * D * ctx.bs)


def _genz_block(r, ctx, tok, on_gemm):
    """GenZ's Mamba layer (GenZ-LLM-Analyzer GenZ/Models/mamba.py, 0.0.16).

    Inside the block GenZ splits the hidden size over tp too (Dg = D/tp, so
    the in- and out-projections hold 1/tp^2 of their weights) and uses
    F = Dg x expand channels in the conv and the projections. The scan is
    seven einsums over all d_inner channels (not split) of B*T*d_inner*S (or
    B*T*d_inner) multiply-adds each, whose intermediates cross memory as
    GenZ places them (A and dA on chip; dB*u off chip; the recurrence, C*h,
    D and z on chip).
    All GEMMs are off chip in both phases. The conv's weights (F x d_conv)
    are what GenZ counts as the conv state (`state_elements` in memory.py),
    not as weights. After the block runs GenZ's FFN of a model without one:
    an up projection of no columns and a down projection of
    max(ceil(0/tp), 1) = 1 column (its weights are counted), then the FFN
    all-reduce over tp.
    """
    m, ba, bw = ctx.model, ctx.ba, ctx.bw
    split = ctx.tp_attn
    Dg = ctx.ceil(m.hidden / split)
    F = ctx.ceil(m.d_inner / split)
    S, C, R = m.d_state, m.d_conv, m.dt_rank
    off, o_on, wo_on, all_on = (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.0, 1.0, 1.0), (1.0, 1.0, 1.0)
    r.gemm("ssm_in_proj", "mamba", "mamba", tok, Dg, 2.0 * F, ctx, on=off)
    r.add("ssm_conv", "mamba", "mamba", OpKind.SSM, f=(2.0 * tok * F * C, 0.0), a=(tok * F * ba, 0.0),
          w=(F * C * bw, 0.0),
          o=(tok * F * ba, 0.0))
    r.gemm("ssm_x_proj", "mamba", "mamba", tok, F, R + 2.0 * S, ctx, on=off)
    r.gemm("ssm_dt_proj", "mamba", "mamba", tok, R, F, ctx, on=off)
    Fs = m.d_inner  # the scan's channels: GenZ does not split them
    el, big = tok * Fs, tok * Fs * S

    def einsum(name, a, w, o, on, macs):
        r.add(name, "mamba", "mamba", OpKind.SSM, f=(2.0 * macs, 0.0), a=(a * ba, 0.0), w=(w * bw, 0.0),
              o=(o * ba, 0.0), on=on)
    einsum("ssm_delta_a", el, Fs * S, big, wo_on, big)        # exp(dt A): A and dA on chip
    einsum("ssm_delta_b", el, tok * S, big, o_on, big)       # dt B: dB on chip
    einsum("ssm_delta_bu", big, el, big, off, big)           # dB u: all off chip
    einsum("ssm_state_update", big, big, big, all_on, big)   # h = dA h + dBu
    einsum("ssm_output", big, tok * S, el, all_on, big)      # y = C h
    einsum("ssm_skip", el, el, el, all_on, el)               # y + D u
    einsum("ssm_gate", el, el, el, all_on, el)               # y * z
    r.gemm("ssm_out_proj", "mamba", "mamba", tok, F, Dg, ctx, on=off)
    r.collective("mamba_allreduce", "mamba", "mamba", "allreduce", split, tok * Dg * ba)
    # GenZ's FFN of a Mamba-only model (no FFN): the width-1 down projection.
    r.gemm("genz_stub_down", "ffn", "no_ffn", tok, 1.0, m.hidden, ctx, on=on_gemm)
    r.collective("genz_stub_allreduce", "ffn", "no_ffn", "allreduce", ctx.tp, tok * m.hidden * ba)
