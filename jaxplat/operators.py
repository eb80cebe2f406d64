"""The operator table: one row per operator of a layer group, as arrays.

The table *is* the model: roofline, decode sums, memory footprint and the
per-operator breakdown that users read are all computed from these arrays.
Profile conventions (what is costed, which tensors sit on chip) are chosen
here, when rows are built, so evaluation has no profile branches.

Every row describes one operator on one chip (after tensor/expert splits):
  count       how many times it runs per forward pass (layers of its group)
  f0, f1      FLOPs at s = 0 and per generated token s in the KV cache
  a*, w*, o*  bytes of the input activation (A), the weight or KV operand (W)
              and the output (O), likewise affine in s
  on_a/w/o    1 where that tensor lives on chip (charged at SRAM bandwidth)
  stored      weight bytes the operator keeps resident (for the footprint)
  comm_n/b    collective group size and payload bytes (collective rows only)
  m, k, n     GEMM dims (tokens, reduction, outputs) for display
Prefill rows have f1 = a1 = w1 = o1 = 0.
"""

import dataclasses

import jax
import jax.numpy as jnp

from jaxplat._pytree import pytree_dataclass, static
from jaxplat.model import Model, ffn_factor, moe_layers
from jaxplat.options import Options
from jaxplat.parallel import Parallel
from jaxplat.workload import Workload

NUMERIC = ("count", "f0", "f1", "a0", "a1", "w0", "w1", "o0", "o1",
           "on_a", "on_w", "on_o", "stored", "comm_n", "comm_b", "m", "k", "n")

# Nominal FLOPs per element of element-wise ops. They are memory-bound by
# orders of magnitude on every chip, so these only keep FLOP totals honest.
NORM_FLOPS = 4.0      # RMSNorm: square, sum, scale, weight
ROPE_FLOPS = 3.0      # rotate-half: two multiplies and an add
SOFTMAX_FLOPS = 5.0   # max, subtract, exp, sum, divide
ACT_FLOPS = 4.0       # SiLU/GELU and the gate multiply
ADD_FLOPS = 1.0


@pytree_dataclass
class OpTable:
    """Struct of arrays, each [rows] float; names and groups are static."""

    count: jax.Array
    f0: jax.Array
    f1: jax.Array
    a0: jax.Array
    a1: jax.Array
    w0: jax.Array
    w1: jax.Array
    o0: jax.Array
    o1: jax.Array
    on_a: jax.Array
    on_w: jax.Array
    on_o: jax.Array
    stored: jax.Array
    comm_n: jax.Array
    comm_b: jax.Array
    m: jax.Array
    k: jax.Array
    n: jax.Array
    names: tuple = static(())
    groups: tuple = static(())
    comm_kinds: tuple = static(())  # "" for rows without a collective


@dataclasses.dataclass
class _Rows:
    """Host-side accumulator of rows while a table is built (inside jit)."""

    rows: list = dataclasses.field(default_factory=list)

    def add(self, name, group, count, f=(0.0, 0.0), a=(0.0, 0.0), w=(0.0, 0.0), o=(0.0, 0.0),
            on=(0.0, 0.0, 0.0), stored=0.0, comm=("", 1.0, 0.0), mkn=(0.0, 0.0, 0.0)):
        self.rows.append(dict(
            names=name, groups=group, comm_kinds=comm[0], count=count,
            f0=f[0], f1=f[1], a0=a[0], a1=a[1], w0=w[0], w1=w[1], o0=o[0], o1=o[1],
            on_a=on[0], on_w=on[1], on_o=on[2], stored=stored, comm_n=comm[1], comm_b=comm[2],
            m=mkn[0], k=mkn[1], n=mkn[2]))

    def gemm(self, name, group, count, m, k, n, ctx, on=(0.0, 0.0, 0.0), stored=None, traffic=True):
        """A weight GEMM: [m, k] activations times a [k, n] weight."""
        wbytes = k * n * ctx.bw
        self.add(name, group, count, f=(2.0 * m * k * n, 0.0), a=(m * k * ctx.ba, 0.0),
                 w=(wbytes if traffic else 0.0, 0.0), o=(m * n * ctx.ba, 0.0), on=on,
                 stored=wbytes if stored is None else stored, mkn=(m, k, n))

    def eltwise(self, name, group, count, elems_in, elems_out, flops_per, ctx, on=0.0):
        """An element-wise op: memory traffic of its input and output."""
        self.add(name, group, count, f=(flops_per * elems_out, 0.0), a=(elems_in * ctx.ba, 0.0),
                 o=(elems_out * ctx.ba, 0.0), on=(on, 0.0, on))

    def collective(self, name, group, count, kind, n, nbytes):
        self.add(name, group, count, comm=(kind, n, nbytes))

    def table(self, dtype) -> OpTable:
        cols = {}
        for key in NUMERIC:
            cols[key] = jnp.stack([jnp.asarray(r[key], dtype) for r in self.rows])
        for key in ("names", "groups", "comm_kinds"):
            cols[key] = tuple(r[key] for r in self.rows)
        return OpTable(**cols)


@dataclasses.dataclass
class _Ctx:
    """Derived per-chip quantities shared by the row builders (traced)."""

    model: Model
    opts: Options
    smooth: bool
    ba: jax.Array   # bytes per activation element
    bw: jax.Array   # bytes per weight element
    bk: jax.Array   # bytes per KV element
    tp: jax.Array   # chips the attention heads and FFN width are split over
    tp_attn: jax.Array  # genz splits heads over tp*ep
    ep: jax.Array
    h: jax.Array    # query heads per chip
    hk: jax.Array   # KV heads per chip (replicated when tp > kv heads)
    b: jax.Array    # sequences per micro-batch
    beams: jax.Array
    prompt: jax.Array

    def ceil(self, x):
        """ceil, or its straight-through twin in smooth mode (exact forward)."""
        c = jnp.ceil(x)
        return x + jax.lax.stop_gradient(c - x) if self.smooth else c

    def floor(self, x):
        f = jnp.floor(x)
        return x + jax.lax.stop_gradient(f - x) if self.smooth else f


def _context(model: Model, par: Parallel, wl: Workload, opts: Options) -> _Ctx:
    tp_attn = par.tp * par.ep if opts.genz else par.tp
    ctx = _Ctx(model=model, opts=opts, smooth=opts.smooth, ba=wl.bytes_act, bw=wl.bytes_weight,
               bk=wl.bytes_kv, tp=par.tp, tp_attn=tp_attn, ep=par.ep, h=None, hk=None,
               b=wl.batch, beams=wl.beams, prompt=wl.prompt)
    ctx.h = ctx.ceil(model.heads / tp_attn)
    ctx.hk = jnp.maximum(ctx.ceil(model.kv_heads / tp_attn), 1.0)
    return ctx


def _attn_pair(r: _Rows, ctx: _Ctx, suffix: str, count, *, bf, bq, bkv, t, n, pairs,
               dqk, dv, k_width, v_width, on_q, score_on):
    """Logit (Q·K^T) and attend (scores·V) over `n` keys, affine in s.

    Args:
      bf: sequences whose dot products are computed (and scores stored).
      bq: sequences whose queries are read and outputs written.
      bkv: distinct KV copies read (beams share the prompt's KV).
      t: query tokens per sequence. n, pairs: (value at s = 0, slope) of
        keys and of query-key pairs per sequence and head.
      dqk, dv: per-head dot-product and value dims. k_width, v_width: KV
        elements per token read by logit and by attend (v_width = 0 when the
        attend reuses the logit's operand, as MLA's latent does).
      on_q: 1 if Q and the output sit on chip. score_on: 1 if scores do.
    """
    h, ba, bk = ctx.h, ctx.ba, ctx.bk
    aff = lambda c, v: (c * v[0], c * v[1])  # noqa: E731
    r.add("logit" + suffix, "attention", count, f=aff(2.0 * bf * h * dqk, pairs),
          a=(bq * t * h * dqk * ba, 0.0), w=aff(bkv * k_width * bk, n), o=aff(bf * h * ba, pairs),
          on=(on_q, 0.0, score_on), mkn=(bf * t, dqk, n[0]))
    if not ctx.opts.genz:
        r.add("softmax" + suffix, "attention", count, f=aff(SOFTMAX_FLOPS * bf * h, pairs),
              a=aff(bf * h * ba, pairs), o=aff(bf * h * ba, pairs), on=(score_on, 0.0, score_on))
    r.add("attend" + suffix, "attention", count, f=aff(2.0 * bf * h * dv, pairs),
          a=aff(bf * h * ba, pairs), w=aff(bkv * v_width * bk, n), o=(bq * t * h * dv * ba, 0.0),
          on=(score_on, 0.0, on_q), mkn=(bf * t, n[0], dv))


def _attention(r: _Rows, ctx: _Ctx, phase: str, seqs, T, kv):
    """Attention over the KV cache: prefill (causal over T) or one decode step.

    `kv` = (dqk, dv, k_width, v_width) as in `_attn_pair`.
    """
    genz, L = ctx.opts.genz, ctx.model.layers
    dqk, dv, k_width, v_width = kv
    score_on = 1.0 if (genz or ctx.opts.fused_attention) else 0.0
    if phase == "prefill":
        # Query-key pairs per sequence and head: causal T(T+1)/2; GenZ counts
        # the full T^2 (CONVENTIONS.md, item 2).
        pairs = T * T if genz else T * (T + 1.0) / 2.0
        _attn_pair(r, ctx, "", L, bf=seqs, bq=seqs, bkv=seqs, t=T, n=(T, 0.0), pairs=(pairs, 0.0),
                   dqk=dqk, dv=dv, k_width=k_width, v_width=v_width, on_q=0.0, score_on=score_on)
        return
    b, B, P = ctx.b, ctx.b * ctx.beams, ctx.prompt
    on_q = 1.0 if genz else 0.0
    # The prompt's KV is shared by the beams of a sequence and read once per
    # sequence; GenZ also computes it once per sequence (a GenZ quirk).
    bf = b if genz else B
    _attn_pair(r, ctx, "_prefix", L, bf=bf, bq=bf, bkv=b, t=1.0, n=(P, 0.0), pairs=(P, 0.0),
               dqk=dqk, dv=dv, k_width=k_width, v_width=v_width, on_q=on_q, score_on=score_on)
    _attn_pair(r, ctx, "_suffix", L, bf=B, bq=B, bkv=B, t=1.0, n=(0.0, 1.0), pairs=(0.0, 1.0),
               dqk=dqk, dv=dv, k_width=k_width, v_width=v_width, on_q=on_q, score_on=score_on)


def _gqa_layer(r: _Rows, ctx: _Ctx, phase: str, seqs, tok, T, on_gemm):
    m, L = ctx.model, ctx.model.layers
    D, Dq, h, hk = m.hidden, m.head_dim, ctx.h, ctx.hk
    r.gemm("qkv", "attention", L, tok, D, (h + 2.0 * hk) * Dq, ctx, on=on_gemm)
    if not ctx.opts.genz:
        r.eltwise("rope", "attention", L, tok * (h + hk) * Dq, tok * (h + hk) * Dq, ROPE_FLOPS, ctx)
        if phase == "decode":
            r.add("kv_write", "attention", L, o=(tok * 2.0 * hk * Dq * ctx.bk, 0.0))
    _attention(r, ctx, phase, seqs, T, (Dq, Dq, hk * Dq, hk * Dq))
    r.gemm("out_proj", "attention", L, tok, h * Dq, D, ctx, on=on_gemm)


def _mla_layer(r: _Rows, ctx: _Ctx, phase: str, seqs, tok, T):
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1).

    Prefill decompresses K and V (kv_b); decode uses the absorbed form: the
    query is projected into the latent space (W_UK) and attention reads only
    the compressed latent plus the shared RoPE key, then W_UV up-projects.
    The down-projections (q_a, kv_a) are replicated on every TP rank.
    """
    m, L = ctx.model, ctx.model.layers
    D, h, qr, kvr = m.hidden, ctx.h, m.q_lora_rank, m.kv_lora_rank
    rope, nope, dv = m.rope_dim, m.nope_dim, m.v_head_dim
    qk = nope + rope
    has_qa = qr > 0
    r.gemm("q_a", "attention", L, tok, D, qr, ctx)  # zero when q_lora_rank = 0
    r.eltwise("q_norm", "attention", L, tok * qr, tok * qr, NORM_FLOPS, ctx)
    r.gemm("q_b", "attention", L, tok, jnp.where(has_qa, qr, D), h * qk, ctx)
    r.gemm("kv_a", "attention", L, tok, D, kvr + rope, ctx)  # writes the latent cache
    r.eltwise("kv_norm", "attention", L, tok * kvr, tok * kvr, NORM_FLOPS, ctx)
    r.eltwise("rope", "attention", L, tok * (h + 1.0) * rope, tok * (h + 1.0) * rope, ROPE_FLOPS, ctx)
    w_uk = h * nope * kvr * ctx.bw
    w_uv = h * kvr * dv * ctx.bw
    if phase == "prefill":
        r.gemm("kv_b", "attention", L, tok, kvr, h * (nope + dv), ctx)
        _attention(r, ctx, phase, seqs, T, (qk, dv, h * qk, h * dv))
    else:
        r.add("q_absorb", "attention", L, f=(2.0 * tok * h * nope * kvr, 0.0),
              a=(tok * h * nope * ctx.ba, 0.0), w=(w_uk, 0.0), o=(tok * h * kvr * ctx.ba, 0.0),
              stored=w_uk, mkn=(tok, nope, h * kvr))
        _attention(r, ctx, phase, seqs, T, (kvr + rope, kvr, kvr + rope, 0.0))
        r.add("v_up", "attention", L, f=(2.0 * tok * h * kvr * dv, 0.0),
              a=(tok * h * kvr * ctx.ba, 0.0), w=(w_uv, 0.0), o=(tok * h * dv * ctx.ba, 0.0),
              stored=w_uv, mkn=(tok, kvr, h * dv))
    r.gemm("out_proj", "attention", L, tok, h * dv, D, ctx)


def _ffn(r: _Rows, ctx: _Ctx, prefix: str, group: str, count, tok, width, on_gemm, stored_scale=1.0):
    """A (gated) FFN of `width` columns per chip on `tok` tokens."""
    D, fi = ctx.model.hidden, ffn_factor(ctx.model)
    r.gemm(prefix + "up_gate", group, count, tok, D, fi * width, ctx, on=on_gemm,
           stored=stored_scale * D * fi * width * ctx.bw)
    if not ctx.opts.genz:
        r.eltwise(prefix + "act", group, count, fi * tok * width, tok * width, ACT_FLOPS, ctx)
    r.gemm(prefix + "down", group, count, tok, width, D, ctx, on=on_gemm,
           stored=stored_scale * D * width * ctx.bw)


def _moe(r: _Rows, ctx: _Ctx, phase: str, tok, T, on_gemm):
    """Router, routed experts and shared experts of the MoE layers."""
    m, genz = ctx.model, ctx.opts.genz
    n_moe = moe_layers(m)
    D, E, k = m.hidden, jnp.maximum(m.experts, 1.0), m.top_k  # E = 1 keeps dense models finite
    width = ctx.ceil(m.expert_intermediate / ctx.tp)
    fi = ffn_factor(m)
    local = m.experts / ctx.ep  # experts resident per chip
    # GenZ splits the router's K dim over tp and all-reduces its output.
    r.gemm("router", "moe", n_moe, tok, D / ctx.tp if genz else D, E, ctx)
    if genz:
        gate_elems = tok * (E if phase == "prefill" else D)
        r.collective("router_allreduce", "moe", n_moe, "allreduce", ctx.tp, gate_elems * ctx.ba)
    r.collective("dispatch", "moe", n_moe, "alltoall", ctx.ep, tok * k * D * ctx.ba)
    if genz and phase == "prefill":
        # GenZ: every local expert runs floor(T*k/E) tokens of each sequence.
        m_tok = ctx.b * ctx.floor(T * k / E)
        r.gemm("experts_up_gate", "moe", n_moe, m_tok, D, local * width * fi, ctx)
        r.gemm("experts_down", "moe", n_moe, m_tok, local * width, D, ctx)
    elif genz:
        # GenZ decode: max(1, ceil(k/ep)) experts run all tokens; the other
        # ceil(E/ep) - a local experts cost nothing but are resident.
        act = jnp.maximum(1.0, ctx.ceil(k / ctx.ep))
        idle = ctx.ceil(E / ctx.ep) - act
        _ffn(r, ctx, "experts_", "moe", n_moe, tok, act * width, on_gemm)
        r.add("idle_experts", "moe", n_moe, stored=idle * width * (fi + 1.0) * D * ctx.bw)
    else:
        # Tokens routed to this chip's experts (balanced top-k routing), and
        # the experts they touch: E(1 - (1 - k/E)^tokens) distinct experts in
        # expectation under uniform routing, of which 1/ep are local.
        routed = tok * k / ctx.ep
        touched = E * (1.0 - (1.0 - k / E) ** tok) / ctx.ep
        per_expert = D * width * ctx.bw
        r.add("experts_up_gate", "moe", n_moe, f=(2.0 * routed * D * fi * width, 0.0),
              a=(routed * D * ctx.ba, 0.0), w=(touched * fi * per_expert, 0.0),
              o=(routed * fi * width * ctx.ba, 0.0), stored=local * fi * per_expert,
              mkn=(routed, D, fi * width))
        r.eltwise("experts_act", "moe", n_moe, fi * routed * width, routed * width, ACT_FLOPS, ctx)
        r.add("experts_down", "moe", n_moe, f=(2.0 * routed * D * width, 0.0),
              a=(routed * width * ctx.ba, 0.0), w=(touched * per_expert, 0.0),
              o=(routed * D * ctx.ba, 0.0), stored=local * per_expert, mkn=(routed, width, D))
        _ffn(r, ctx, "shared_", "moe", n_moe, tok, m.shared_experts * width, on_gemm)
    r.collective("combine", "moe", n_moe, "alltoall", ctx.ep, tok * k * D * ctx.ba)


def build_table(model: Model, par: Parallel, wl: Workload, phase: str, opts: Options) -> OpTable:
    """The operator table of one forward pass (prefill) or one decode step.

    Args:
      phase: static, "prefill" (all prompt tokens) or "decode" (one token per
        sequence and beam, KV length prompt + s with s affine).
    Returns:
      `OpTable` of per-chip operators.
    """
    if phase not in ("prefill", "decode"):
        raise ValueError(f"unknown phase {phase!r}")
    ctx = _context(model, par, wl, opts)
    m, genz, r = model, opts.genz, _Rows()
    L, D = m.layers, m.hidden
    T = wl.prompt if phase == "prefill" else jnp.float32(1.0)
    seqs = ctx.b if phase == "prefill" else ctx.b * ctx.beams
    tok = seqs * T
    act = tok * D  # elements of one hidden-state tensor
    on_gemm = (1.0, 0.0, 1.0) if genz and phase == "decode" else (0.0, 0.0, 0.0)
    vocab = ctx.floor(m.vocab / ctx.tp_attn) if genz else ctx.ceil(m.vocab / ctx.tp)
    emb_stored = vocab * D * ctx.bw

    # Embedding. GenZ: a one-hot GEMM in prefill, absent in decode.
    if genz and phase == "prefill":
        r.gemm("embedding", "embedding", 1.0, tok, vocab, D, ctx)
        r.collective("embedding_allreduce", "embedding", 1.0, "allreduce", ctx.tp_attn, act * ctx.ba)
    elif not genz:
        r.add("embedding", "embedding", 1.0, w=(act * ctx.bw, 0.0), o=(act * ctx.ba, 0.0), stored=emb_stored)
        r.collective("embedding_allreduce", "embedding", 1.0, "allreduce", ctx.tp, act * ctx.ba)

    # Attention block, every layer.
    if not genz:
        r.eltwise("attn_norm", "attention", L, act, act, NORM_FLOPS, ctx)
    if m.attention == "mla":
        _mla_layer(r, ctx, phase, seqs, tok, T)
    else:
        _gqa_layer(r, ctx, phase, seqs, tok, T, on_gemm)
    r.collective("attn_allreduce", "attention", L, "allreduce", ctx.tp_attn, act * ctx.ba)
    if not genz:
        r.eltwise("attn_residual", "attention", L, 2.0 * act, act, ADD_FLOPS, ctx)
        r.eltwise("ffn_norm", "ffn", L, act, act, NORM_FLOPS, ctx)

    # FFN: dense layers, then MoE layers (a dense model has zero MoE layers).
    _ffn(r, ctx, "", "ffn", m.dense_layers, tok, ctx.ceil(m.intermediate / ctx.tp), on_gemm)
    _moe(r, ctx, phase, tok, T, on_gemm)
    r.collective("ffn_allreduce", "ffn", L, "allreduce", ctx.tp, act * ctx.ba)
    if not genz:
        r.eltwise("ffn_residual", "ffn", L, 2.0 * act, act, ADD_FLOPS, ctx)
        r.eltwise("final_norm", "lm_head", 1.0, act, act, NORM_FLOPS, ctx)

    # LM head. Only the last prompt token needs logits; GenZ computes all T.
    head_tok = tok if genz else seqs
    head_stored = emb_stored * (1.0 if genz else 1.0 - m.tied)
    r.gemm("lm_head", "lm_head", 1.0, head_tok, D, vocab, ctx, stored=head_stored)
    r.collective("lm_head_allgather", "lm_head", 1.0, "allgather", ctx.tp_attn, head_tok * m.vocab * ctx.ba)
    return r.table(m.hidden.dtype)
