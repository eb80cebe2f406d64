"""The operator table: one row per operator of a layer group, as arrays.

The table *is* the model: roofline, decode sums, memory footprint and the
per-operator breakdown that users read are all computed from these arrays.
Profile conventions (what is costed, which tensors sit on chip) are chosen
here, when rows are built, so evaluation has no profile branches.

Every row describes one operator on one chip (after tensor/expert splits):
  count       how many times it runs per forward pass (layers of its group),
              over all pipeline stages: one micro-batch crossing the pipeline
  stage       how many times it runs in the busiest pipeline stage
              (ceil(layers/pp) layers; equal to count when pp = 1)
  f0, f1      FLOPs at s = 0 and per generated token s in the KV cache
  a*, w*, o*  bytes of the input activation (A), the weight or KV operand (W)
              and the output (O), likewise affine in s
  on_a/w/o    1 where that tensor lives on chip (charged at SRAM bandwidth)
  stored      weight bytes the operator keeps resident (for the footprint)
  comm_n/b/s  collective group size, payload bytes and rank stride between
              the group's members (collective rows only; collectives.py)
  m, k, n     GEMM dims (tokens, reduction, outputs) for display
  problems    independent GEMM problems m, k, n are split into: sequences x heads
              for attention (FlashAttention tiles each on its own), 1 otherwise
  queries     query rows x heads that a multi-query attention kernel tiles
              (FlashAttention's forward: prefill, a prompt chunk, training),
              on its score, softmax and weighted-sum rows; 0 elsewhere, and on
              decode steps (one query per sequence: split-KV kernels)
  kinds       static: the kernel each row is (an `OpKind`), which every consumer reads
Prefill rows have f1 = a1 = w1 = o1 = 0.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp

from jaxplat.cost.opkind import OpKind, kind_mask  # noqa: F401 (re-exported: OpTable.kinds)
from jaxplat.cost.optable import NUMERIC, OpTable, _Rows  # noqa: F401 (re-exported)
from jaxplat.cost.roofline import safe_div
from jaxplat.cost.ssm import mamba_block
from jaxplat.cost.stages import ceil_st as _ceil
from jaxplat.cost.stages import microbatching, stage_counts
from jaxplat.model import (
    Model,
    Options,
    Parallel,
    Workload,
    ffn_factor,
    local_keys,
    local_pairs,
    stage_chips,
)

# Nominal FLOPs per element of element-wise ops. They are memory-bound by
# orders of magnitude on every chip, so these only keep FLOP totals honest.
NORM_FLOPS = 4.0      # RMSNorm: square, sum, scale, weight
ROPE_FLOPS = 3.0      # rotate-half: two multiplies and an add
SOFTMAX_FLOPS = 5.0   # max, subtract, exp, sum, divide
ACT_FLOPS = 4.0       # SiLU/GELU and the gate multiply
ADD_FLOPS = 1.0


@dataclasses.dataclass
class _Ctx:
    """Derived per-chip quantities shared by the row builders (traced)."""

    model: Model
    opts: Options
    smooth: bool
    ba: jax.Array   # bytes per activation element of a GEMM's input (its compute dtype)
    bs: jax.Array   # bytes per element of hidden states on the network (Conventions.wide_collectives)
    bw: jax.Array   # bytes per weight element
    bk: jax.Array   # bytes per KV element
    tp: jax.Array   # chips the attention heads and FFN width are split over
    tp_attn: jax.Array  # chips the heads are split over: tp, or tp*ep (Conventions.heads_over_ep)
    ep: jax.Array
    moe_ep: jax.Array  # expert-parallel ways inside the tp group (Parallel.moe_ep)
    sp: jax.Array   # chips the sequence (prefill) or the KV cache (decode) is split over
    imbalance: jax.Array  # busiest expert-parallel rank's tokens over the mean
    moe_gather: jax.Array  # 1: MoE tokens move by all-gather / reduce-scatter (Parallel.moe_gather)
    h: jax.Array    # query heads per chip
    hk: jax.Array   # KV heads per chip (replicated when tp > kv heads)
    b: jax.Array    # sequences per chip in one micro-batch (the busiest attention-data-parallel rank's)
    b_mean: jax.Array  # sequences per attention-data-parallel rank on average (ub / ep; b when ep = 1)
    beams: jax.Array
    prompt: jax.Array
    output: jax.Array
    ep_stride: jax.Array = None  # ranks between expert-parallel peers (tp·sp)
    send_span: jax.Array = None  # rank span of a stage-to-stage send (2 x stage chips)
    bw_head: jax.Array = None  # bytes per weight element of the LM head, embedding and router
    ba_head: jax.Array = None  # bytes per element of their GEMMs' inputs and outputs (Conventions.wide_head)
    bw_experts: jax.Array = None  # bytes per weight element of the routed experts (Workload.bytes_expert_weight)

    def head(self) -> "_Ctx":
        """This context with the LM head's, embedding's and router's weight and GEMM widths."""
        return dataclasses.replace(self, bw=self.bw_head, ba=self.ba_head)

    def labels(self) -> dict:
        """id -> name of the group sizes and strides of collective rows (tp_attn may be tp itself)."""
        named = (("send", self.send_span), ("tp*sp", self.ep_stride), ("sp", self.sp), ("ep", self.ep),
                 ("tp_attn", self.tp_attn), ("tp", self.tp))
        return {id(v): k for k, v in named}

    def ceil(self, x):
        """ceil, or its straight-through twin in smooth mode (exact forward)."""
        c = jnp.ceil(x)
        return x + jax.lax.stop_gradient(c - x) if self.smooth else c

    def floor(self, x):
        f = jnp.floor(x)
        return x + jax.lax.stop_gradient(f - x) if self.smooth else f


def _context(model: Model, par: Parallel, wl: Workload, opts: Options) -> _Ctx:
    over_ep = opts.conv.heads_over_ep
    tp_attn = par.tp * par.ep if over_ep else par.tp
    _, ub = microbatching(par, wl, opts)
    # Default: the ep ranks run attention data parallel, each on a share of
    # the micro-batch (the busiest one on ceil(ub / ep) sequences; ub itself when ep = 1).
    b = ub if over_ep else jnp.where(par.ep > 1.0, _ceil(ub / par.ep, opts.smooth), ub)
    # Their mean: ranks holding no sequence (batch < ep) route nothing to the experts.
    b_mean = ub if over_ep else jnp.where(par.ep > 1.0, ub / par.ep, ub)
    # FP8/FP4 GEMMs write 16-bit outputs, and the hidden states they all-reduce, send or combine
    # cross the network in BF16 (NVIDIA Transformer Engine FP8 recipe; TensorRT-LLM/vLLM all-reduce BF16).
    bs = jnp.maximum(wl.bytes_act, 2.0) if opts.conv.wide_collectives else wl.bytes_act
    ctx = _Ctx(model=model, opts=opts, smooth=opts.smooth, ba=wl.bytes_act, bs=bs, bw=wl.bytes_weight,
               bk=wl.bytes_kv, tp=par.tp, tp_attn=tp_attn, ep=par.ep, moe_ep=par.moe_ep, sp=par.sp,
               imbalance=par.imbalance, moe_gather=par.moe_gather, h=None, hk=None, b=b, b_mean=b_mean,
               beams=wl.beams, prompt=wl.prompt, output=wl.output)
    ctx.h = ctx.ceil(model.heads / tp_attn)
    ctx.hk = jnp.maximum(ctx.ceil(model.kv_heads / tp_attn), 1.0)
    ctx.ep_stride = par.tp * par.sp
    # Quantized checkpoints keep the LM head, the embedding table and the MoE
    # router in 16 bits (Conventions.wide_head: ModelOpt's exclude_modules,
    # DeepSeek-V3 report Sec. 3.3.1), and run those GEMMs in 16 bits.
    wide = opts.conv.wide_head
    ctx.bw_head = jnp.maximum(wl.bytes_weight, 2.0) if wide else wl.bytes_weight
    ctx.ba_head = jnp.maximum(wl.bytes_act, 2.0) if wide else wl.bytes_act
    ctx.bw_experts = wl.bytes_experts
    ctx.send_span = 2.0 * stage_chips(par)
    return ctx


def _attn_pair(r: _Rows, ctx: _Ctx, suffix: str, count, *, bf, bq, bkv, t, n, pairs,
               dqk, dv, k_width, v_width, on_q, score_on, score_bytes=1.0, tiled=False):
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
      score_bytes: 1 if the scores move through a memory level, 0 if they
        stay in the kernel's registers / shared memory (no traffic).
      tiled: the rows of a fused multi-query kernel that tiles the queries
        (FlashAttention's forward in prefill; Options.fused_attention): their
        `queries` are bf x heads x t, else 0 (unfused: batched GEMMs).
    Each row is bf x heads independent problems (`problems`), one per
    (sequence, head), as FlashAttention tiles them.
    """
    h, ba, bk = ctx.h, ctx.ba, ctx.bk
    aff = lambda c, v: (c * v[0], c * v[1])  # noqa: E731
    sb = score_bytes * ba
    q = bf * h * t if tiled else 0.0
    r.add("logit" + suffix, "attention", count, OpKind.SCORES, f=aff(2.0 * bf * h * dqk, pairs),
          a=(bq * t * h * dqk * ba, 0.0), w=aff(bkv * k_width * bk, n), o=aff(bf * h * sb, pairs),
          on=(on_q, 0.0, score_on), mkn=(bf * t, dqk, n[0]), problems=bf * h, queries=q)
    if ctx.opts.conv.elementwise:
        r.add("softmax" + suffix, "attention", count, OpKind.SOFTMAX, f=aff(SOFTMAX_FLOPS * bf * h, pairs),
              a=aff(bf * h * sb, pairs), o=aff(bf * h * sb, pairs), on=(score_on, 0.0, score_on),
              problems=bf * h, queries=q)
    r.add("attend" + suffix, "attention", count, OpKind.ATTEND, f=aff(2.0 * bf * h * dv, pairs),
          a=aff(bf * h * sb, pairs), w=aff(bkv * v_width * bk, n), o=(bq * t * h * dv * ba, 0.0),
          on=(score_on, 0.0, on_q), mkn=(bf * t, n[0], dv), problems=bf * h, queries=q)


def _attention(r: _Rows, ctx: _Ctx, phase: str, seqs, T, kv):
    """Attention over the KV cache: prefill (causal over T) or one decode step.

    `kv` = (dqk, dv, k_width, v_width) as in `_attn_pair`. With context
    parallelism (sp > 1) each chip holds 1/sp of the queries in prefill (a
    load-balanced causal split, as ring attention's zig-zag order: 1/sp of
    the query-key pairs) and 1/sp of the KV cache in decode.
    """
    conv, sp = ctx.opts.conv, ctx.sp
    dqk, dv, k_width, v_width = kv
    score_on = 1.0 if (conv.scores_on_chip or ctx.opts.fused_attention) else 0.0
    # A fused kernel keeps each score tile in registers / shared memory and
    # never writes it to a memory level (FlashAttention, Dao et al. 2022,
    # Alg. 1; FlashAttention-3, Shah et al. 2024, keeps S in the wgmma
    # registers on Hopper): no traffic. GenZ charges them at on-chip bandwidth.
    score_bytes = 0.0 if (ctx.opts.fused_attention and conv.fused_scores_in_registers) else 1.0
    windowed = conv.local_attention and ctx.model.windowed  # rows for local layers (static)
    glob = "global" if windowed else "attn"  # attention layers over the whole context
    common = dict(dqk=dqk, dv=dv, k_width=k_width, v_width=v_width, score_on=score_on, score_bytes=score_bytes)
    if phase == "prefill":
        # Query-key pairs per sequence and head: causal T(T+1)/2; GenZ counts
        # the full T^2 (CONVENTIONS.md, item 2). Local layers: the pairs in
        # their window or chunk (model.local_pairs); every key is still read.
        pairs = T * (T + 1.0) / 2.0 if conv.causal_pairs else T * T
        _attn_pair(r, ctx, "", glob, bf=seqs, bq=seqs, bkv=seqs, t=ctx.ceil(T / sp), n=(T, 0.0),
                   pairs=(pairs / sp, 0.0), on_q=0.0, tiled=ctx.opts.fused_attention, **common)
        if windowed:
            local = local_pairs(ctx.model, T, ctx.floor)
            _attn_pair(r, ctx, "_local", "local", bf=seqs, bq=seqs, bkv=seqs, t=ctx.ceil(T / sp), n=(T, 0.0),
                       pairs=(local / sp, 0.0), on_q=0.0, tiled=ctx.opts.fused_attention, **common)
        return
    b, B, P = ctx.b, ctx.b * ctx.beams, ctx.prompt
    on_q = 1.0 if conv.decode_io_on_chip else 0.0
    # The prompt's KV is shared by the beams of a sequence and read once per
    # sequence; GenZ also computes it once per sequence (a GenZ quirk).
    bf = b if conv.prefix_once_per_sequence else B
    _attn_pair(r, ctx, "_prefix", glob, bf=bf, bq=bf, bkv=b, t=1.0, n=(P / sp, 0.0), pairs=(P / sp, 0.0),
               on_q=on_q, **common)
    _attn_pair(r, ctx, "_suffix", glob, bf=B, bq=B, bkv=B, t=1.0, n=(0.0, 1.0 / sp), pairs=(0.0, 1.0 / sp),
               on_q=on_q, **common)
    if windowed:
        # Local layers: the step at s generated tokens attends to
        # local_keys(P + s) keys, not affine in s. Written a + b·s with a the
        # exact keys at s = 0 and b such that the sum over the decode steps
        # s = 1..S is exact: exact step times at s = 0 (serving) and exact
        # decode sums for rows one side of the roofline bounds throughout
        # (decode attention is memory-bound). Each beam reads its own window
        # (an upper bound when beams share the prompt's part of it).
        m, S = ctx.model, jnp.maximum(ctx.output - 1.0, 0.0)
        a = local_keys(m, P)
        total = local_pairs(m, P + S, ctx.floor) - local_pairs(m, P, ctx.floor)  # sum of local_keys(P + s), s = 1..S
        slope = safe_div(total - S * a, S * (S + 1.0) / 2.0)
        # (named apart from the prefill's "_local" rows: an engine iteration
        # merges rows by name, serving.merge_tables)
        _attn_pair(r, ctx, "_local_step", "local", bf=B, bq=B, bkv=B, t=1.0, n=(a / sp, slope / sp),
                   pairs=(a / sp, slope / sp), on_q=on_q, **common)


def _context_parallel(r: _Rows, ctx: _Ctx, phase: str, seqs, T, kv_width, dv):
    """Collectives of context parallelism over sp chips (zero when sp = 1).

    Prefill: each chip needs every earlier key and value, an all-gather of
    the layer's K/V (ring attention passes the same bytes around the ring:
    Liu et al., arXiv 2310.01889). Decode: each chip attends over its share
    of the cache and the partial outputs and softmax statistics are merged
    with an all-reduce (Yang et al., "Context Parallelism for Scalable
    Million-Token Inference", arXiv 2411.01783).
    """
    if phase == "prefill":
        r.collective("cp_kv_allgather", "attention", "attn", "allgather", ctx.sp,
                     seqs * T * kv_width * ctx.bk, stride=ctx.tp)
    else:
        r.collective("cp_merge_allreduce", "attention", "attn", "allreduce", ctx.sp,
                     seqs * ctx.h * (dv + 2.0) * ctx.bs, stride=ctx.tp)


def _gqa_layer(r: _Rows, ctx: _Ctx, phase: str, seqs, tok, T, on_gemm):
    m = ctx.model
    D, Dq, h, hk = m.hidden, m.head_dim, ctx.h, ctx.hk
    r.gemm("qkv", "attention", "attn", tok, D, (h + 2.0 * hk) * Dq, ctx, on=on_gemm)
    if ctx.opts.conv.elementwise:
        r.eltwise("rope", "attention", "attn", tok * (h + hk) * Dq, tok * (h + hk) * Dq, ROPE_FLOPS, ctx)
        if phase == "decode":
            r.add("kv_write", "attention", "attn", OpKind.CACHE_WRITE, o=(tok * 2.0 * hk * Dq * ctx.bk, 0.0))
    _attention(r, ctx, phase, seqs, T, (Dq, Dq, hk * Dq, hk * Dq))
    _context_parallel(r, ctx, phase, seqs, T, 2.0 * hk * Dq, Dq)
    r.gemm("out_proj", "attention", "attn", tok, h * Dq, D, ctx, on=on_gemm)


def _mla_layer(r: _Rows, ctx: _Ctx, phase: str, seqs, tok, T):
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1).

    Prefill decompresses K and V (kv_b); decode uses the absorbed form: the
    query is projected into the latent space (W_UK) and attention reads only
    the compressed latent plus the shared RoPE key, then W_UV up-projects.
    The down-projections (q_a, kv_a) are replicated on every TP rank.
    """
    m = ctx.model
    D, h, qr, kvr = m.hidden, ctx.h, m.q_lora_rank, m.kv_lora_rank
    rope, nope, dv = m.rope_dim, m.nope_dim, m.v_head_dim
    qk = nope + rope
    has_qa = qr > 0
    r.gemm("q_a", "attention", "attn", tok, D, qr, ctx)  # zero when q_lora_rank = 0
    r.eltwise("q_norm", "attention", "attn", tok * qr, tok * qr, NORM_FLOPS, ctx)
    r.gemm("q_b", "attention", "attn", tok, jnp.where(has_qa, qr, D), h * qk, ctx)
    r.gemm("kv_a", "attention", "attn", tok, D, kvr + rope, ctx)  # writes the latent cache
    r.eltwise("kv_norm", "attention", "attn", tok * kvr, tok * kvr, NORM_FLOPS, ctx)
    r.eltwise("rope", "attention", "attn", tok * (h + 1.0) * rope, tok * (h + 1.0) * rope, ROPE_FLOPS, ctx)
    w_uk = h * nope * kvr * ctx.bw
    w_uv = h * kvr * dv * ctx.bw
    if phase == "prefill":
        r.gemm("kv_b", "attention", "attn", tok, kvr, h * (nope + dv), ctx)
        _attention(r, ctx, phase, seqs, T, (qk, dv, h * qk, h * dv))
    else:
        r.add("q_absorb", "attention", "attn", OpKind.GEMM, f=(2.0 * tok * h * nope * kvr, 0.0),
              a=(tok * h * nope * ctx.ba, 0.0), w=(w_uk, 0.0), o=(tok * h * kvr * ctx.ba, 0.0),
              stored=w_uk, mkn=(tok, nope, h * kvr))
        _attention(r, ctx, phase, seqs, T, (kvr + rope, kvr, kvr + rope, 0.0))
        r.add("v_up", "attention", "attn", OpKind.GEMM, f=(2.0 * tok * h * kvr * dv, 0.0),
              a=(tok * h * kvr * ctx.ba, 0.0), w=(w_uv, 0.0), o=(tok * h * dv * ctx.ba, 0.0),
              stored=w_uv, mkn=(tok, kvr, h * dv))
    # Context parallelism passes the compressed latent (decompressed locally).
    _context_parallel(r, ctx, phase, seqs, T, kvr + rope, dv)
    r.gemm("out_proj", "attention", "attn", tok, h * dv, D, ctx)


def _ffn(r: _Rows, ctx: _Ctx, prefix: str, group: str, count, tok, width, on_gemm, stored_scale=1.0,
         kind=OpKind.GEMM):
    """A (gated) FFN of `width` columns per chip on `tok` tokens; `kind`: its GEMMs' kind."""
    D, fi = ctx.model.hidden, ffn_factor(ctx.model)
    r.gemm(prefix + "up_gate", group, count, tok, D, fi * width, ctx, on=on_gemm,
           stored=stored_scale * D * fi * width * ctx.bw, kind=kind)
    if ctx.opts.conv.elementwise:
        r.eltwise(prefix + "act", group, count, fi * tok * width, tok * width, ACT_FLOPS, ctx)
    r.gemm(prefix + "down", group, count, tok, width, D, ctx, on=on_gemm,
           stored=stored_scale * D * width * ctx.bw, kind=kind)


def _moe(r: _Rows, ctx: _Ctx, phase: str, tok, T, on_gemm):
    """Router, routed experts and shared experts of the MoE layers.

    Default profile: the ep ranks hold E/ep experts each and run attention
    data parallel, so the tokens of all ep ranks are routed over all experts:
    ep·tok_mean, the micro-batch's own tokens (tok_mean = tok·b_mean/b: the
    busiest rank holds ceil(ub/ep) sequences, the mean ub/ep, and with fewer
    sequences than ranks the empty ones route nothing). Each rank's experts
    receive imbalance·tok_mean·k token copies (the hottest experts set the
    time); the busiest rank sends its own tok·k. Dispatch and combine are all-to-alls
    over ep of those token copies' hidden states (GShard, Lepikhin et al.
    2020; DeepSeek-V3 report, Sec. 3.2). Each expert's width is split over tp.

    moe_ep > 1 (expert parallelism inside the tp group, TRT-LLM's
    moe_expert_parallel_size, vLLM's --enable-expert-parallel with attention
    TP): the tp chips hold E/(ep·moe_ep) experts each, each expert's width
    split tp/moe_ep ways (MoE TP), and a chip runs the 1/moe_ep of the token
    copies routed to its experts. The attention all-reduce leaves every
    chip of the group with all of the group's tokens, so dispatch needs no
    traffic (each chip picks its experts' tokens) and the partial outputs
    are summed by the FFN all-reduce over tp that follows (vLLM FusedMoE
    reduce_results; TRT-LLM MoE all-reduce). Across ep groups the chips of a
    tp group share the all-to-all: each sends the copies bound for its own
    expert slice (1/moe_ep of them). Load imbalance applies only when
    experts are split (ep·moe_ep > 1): with pure TP every chip holds a slice
    of every expert.
    """
    m, genz_moe = ctx.model, ctx.opts.conv.moe_accounting == "genz"
    D, E, k = m.hidden, jnp.maximum(m.experts, 1.0), m.top_k  # E = 1 keeps dense models finite
    moe_ep = 1.0 if genz_moe else ctx.moe_ep  # GenZ has no EP inside the tp group (divisibility checks it)
    width = ctx.ceil(m.expert_intermediate * moe_ep / ctx.tp)  # MoE TP = tp / moe_ep
    fi = ffn_factor(m)
    split = ctx.ep * moe_ep  # ways the experts are split
    local = m.experts / split  # experts resident per chip
    imb = 1.0 if genz_moe else jnp.where(split > 1.0, ctx.imbalance, 1.0)
    # GenZ splits the router's K dim over tp and all-reduces its output.
    r.gemm("router", "moe", "moe", tok, D / ctx.tp if genz_moe else D, E, ctx.head(), kind=OpKind.WIDE_GEMM)
    if genz_moe:
        gate_elems = tok * (E if phase == "prefill" else D)
        r.collective("router_allreduce", "moe", "moe", "allreduce", ctx.tp, gate_elems * ctx.ba)
    # All-to-all: each rank sends its k copies per token to the experts'
    # ranks. All-gather + reduce-scatter (moe_gather): every rank receives
    # the other ranks' tokens and sends back partial outputs of them all; on
    # a switch each moves (ep - 1)/ep of ep x tok rows, as an all-to-all of
    # that payload does (collectives.py costs both per rank the same way).
    tok_mean = tok * safe_div(ctx.b_mean, ctx.b)  # tokens per rank on average (tok when ep divides the batch)
    copies = jnp.where(ctx.moe_gather > 0, ctx.ep * tok_mean, jnp.maximum(tok, imb * tok_mean) * k / moe_ep)
    a2a = copies * D * ctx.ba
    r.collective("dispatch", "moe", "moe", "alltoall", ctx.ep, a2a, stride=ctx.ep_stride)
    ex = dataclasses.replace(ctx, bw=ctx.bw_experts)  # the routed experts' weights may be stored apart
    if genz_moe and phase == "prefill":
        # GenZ: every local expert runs floor(T*k/E) tokens of each sequence.
        m_tok = ctx.b * ctx.floor(T * k / E)
        r.gemm("experts_up_gate", "moe", "moe", m_tok, D, local * width * fi, ex, kind=OpKind.EXPERT_GEMM)
        r.gemm("experts_down", "moe", "moe", m_tok, local * width, D, ex, kind=OpKind.EXPERT_GEMM)
    elif genz_moe:
        # GenZ decode: max(1, ceil(k/ep)) experts run all tokens; the other
        # ceil(E/ep) - a local experts cost nothing but are resident.
        act = jnp.maximum(1.0, ctx.ceil(k / ctx.ep))
        idle = ctx.ceil(E / ctx.ep) - act
        _ffn(r, ex, "experts_", "moe", "moe", tok, act * width, on_gemm, kind=OpKind.EXPERT_GEMM)
        r.add("idle_experts", "moe", "moe", OpKind.EXPERT_GEMM, stored=idle * width * (fi + 1.0) * D * ex.bw)
    else:
        # Token copies routed to this chip's experts, and the experts they
        # touch: E(1 - (1 - k/E)^tokens) distinct experts in expectation
        # under uniform routing of the ep·tok_mean tokens, of which 1/split are local.
        routed = imb * tok_mean * k / moe_ep
        touched = E * (1.0 - (1.0 - k / E) ** (ctx.ep * tok_mean)) / split
        per_expert = D * width * ex.bw
        # A grouped GEMM is one GEMM per touched expert, each over its own
        # tokens (CUTLASS grouped GEMM, TensorRT-LLM/vLLM fused MoE): its
        # rows are the tokens per expert (mean field: routed / touched), so
        # tile quantization pays whole row tiles per expert, tiles sized to
        # m_e (efficiency.grouped_tile_m; groups = f / (2 m k n) = touched).
        m_e = routed / jnp.maximum(touched, 1e-6)
        r.add("experts_up_gate", "moe", "moe", OpKind.EXPERT_GEMM, f=(2.0 * routed * D * fi * width, 0.0),
              a=(routed * D * ctx.ba, 0.0), w=(touched * fi * per_expert, 0.0),
              o=(routed * fi * width * ctx.ba, 0.0), stored=local * fi * per_expert,
              mkn=(m_e, D, fi * width))
        r.eltwise("experts_act", "moe", "moe", fi * routed * width, routed * width, ACT_FLOPS, ctx)
        r.add("experts_down", "moe", "moe", OpKind.EXPERT_GEMM, f=(2.0 * routed * D * width, 0.0),
              a=(routed * width * ctx.ba, 0.0), w=(touched * per_expert, 0.0),
              o=(routed * D * ctx.ba, 0.0), stored=local * per_expert, mkn=(m_e, width, D))
        if ctx.opts.conv.elementwise:
            # Copies into expert order before the grouped GEMMs and their
            # weighted sum after (TensorRT-LLM's expandInputRows and
            # finalizeMoeRouting kernels, vLLM's moe_permute and moe_sum):
            # passes over every copy's hidden state that the GEMM rows do
            # not hold. The permute reads 16-bit hidden states and writes
            # the GEMM input's dtype; the sum reads the down GEMM's outputs
            # and writes one 16-bit row per token of this chip.
            r.add("moe_permute", "moe", "moe", OpKind.ELEMENTWISE, a=(routed * D * ctx.bs, 0.0),
                  o=(routed * D * ctx.ba, 0.0))
            r.add("moe_finalize", "moe", "moe", OpKind.ELEMENTWISE, f=(2.0 * routed * D, 0.0),
                  a=(routed * D * ctx.ba, 0.0), o=(tok * D * ctx.bs, 0.0))
        # shared experts are dense, split over all tp chips; without any, no tokens (no read, no launch)
        _ffn(r, ctx, "shared_", "moe", "moe", jnp.where(m.shared_experts > 0, tok, 0.0),
             m.shared_experts * ctx.ceil(m.expert_intermediate / ctx.tp), on_gemm)
    # Out at the GEMM input's precision (FP8 dispatch, DeepEP), back as the experts' 16-bit outputs.
    r.collective("combine", "moe", "moe", "alltoall", ctx.ep, a2a * ctx.bs / ctx.ba, stride=ctx.ep_stride)


# Nested jit: one trace per shape in a caller's trace (serving.iteration: several per program).
@functools.partial(jax.jit, static_argnames=("phase", "opts"))
def build_table(model: Model, par: Parallel, wl: Workload, phase: str, opts: Options) -> OpTable:
    """The operator table of one forward pass (prefill) or one decode step.

    Rows are the operators of one chip of the busiest pipeline stage's
    tensor/expert/context split, for one micro-batch; `count` runs them over
    the whole pipeline (one micro-batch crossing every stage) and `stage`
    over the busiest stage only.

    Args:
      phase: static, "prefill" (all prompt tokens) or "decode" (one token per
        sequence and beam, KV length prompt + s with s affine).
    Returns:
      `OpTable` of per-chip operators.
    """
    if phase not in ("prefill", "decode"):
        raise ValueError(f"unknown phase {phase!r}")
    ctx = _context(model, par, wl, opts)
    m, conv, r = model, opts.conv, _Rows(counts=stage_counts(model, par, opts.smooth), labels=ctx.labels())
    D = m.hidden
    T = wl.prompt if phase == "prefill" else jnp.float32(1.0)
    T_loc = ctx.ceil(T / par.sp) if phase == "prefill" else T  # tokens per chip (context parallel)
    seqs = ctx.b if phase == "prefill" else ctx.b * ctx.beams
    tok = seqs * T_loc
    act = tok * D  # elements of one hidden-state tensor
    on_gemm = (1.0, 0.0, 1.0) if conv.decode_io_on_chip and phase == "decode" else (0.0, 0.0, 0.0)
    # GenZ floors the vocabulary share of a head split over tp·ep.
    vocab = ctx.floor(m.vocab / ctx.tp_attn) if conv.heads_over_ep else ctx.ceil(m.vocab / ctx.tp)
    head = ctx.head()
    emb_stored = vocab * D * head.bw

    # Embedding. GenZ: a one-hot GEMM in prefill, absent in decode.
    if conv.embedding_gemm and phase == "prefill":
        r.gemm("embedding", "embedding", "once", tok, vocab, D, head, kind=OpKind.WIDE_GEMM)
        r.collective("embedding_allreduce", "embedding", "once", "allreduce", ctx.tp_attn, act * ctx.bs)
    elif not conv.embedding_gemm:
        r.add("embedding", "embedding", "once", OpKind.LOOKUP, w=(act * head.bw, 0.0), o=(act * ctx.ba, 0.0),
              stored=emb_stored)
        r.collective("embedding_allreduce", "embedding", "once", "allreduce", ctx.tp, act * ctx.bs)

    # Attention block, every layer.
    if conv.elementwise:
        r.eltwise("attn_norm", "attention", "attn", act, act, NORM_FLOPS, ctx)
    if m.attention == "mla":
        _mla_layer(r, ctx, phase, seqs, tok, T)
    else:
        _gqa_layer(r, ctx, phase, seqs, tok, T, on_gemm)
    r.collective("attn_allreduce", "attention", "attn", "allreduce", ctx.tp_attn, act * ctx.bs)
    if conv.elementwise:
        r.eltwise("attn_residual", "attention", "attn", 2.0 * act, act, ADD_FLOPS, ctx)

    # Mamba blocks in the other layers (state-space and hybrid models).
    if m.ssm != "none":
        if conv.elementwise:
            r.eltwise("mamba_norm", "mamba", "mamba", act, act, NORM_FLOPS, ctx)
        mamba_block(r, ctx, phase, seqs, tok, on_gemm)
        if conv.elementwise:
            r.eltwise("mamba_residual", "mamba", "mamba", 2.0 * act, act, ADD_FLOPS, ctx)

    if conv.elementwise:
        r.eltwise("ffn_norm", "ffn", "ffn", act, act, NORM_FLOPS, ctx)

    # FFN: dense layers, then MoE layers (a dense model has zero MoE layers).
    _ffn(r, ctx, "", "ffn", "dense", tok, ctx.ceil(m.intermediate / ctx.tp), on_gemm)
    _moe(r, ctx, phase, tok, T, on_gemm)
    r.collective("ffn_allreduce", "ffn", "ffn", "allreduce", ctx.tp, act * ctx.bs)
    if conv.elementwise:
        r.eltwise("ffn_residual", "ffn", "ffn", 2.0 * act, act, ADD_FLOPS, ctx)

    # Pipeline: the hidden states of the micro-batch go to the next stage,
    # from every chip of the stage to its peer one stage on (stage_chips
    # ranks apart, so the message crosses the level that holds 2·stage_chips).
    # GenZ: pp - 1 message passes of B·T·D elements (CONVENTIONS.md, "PP").
    r.collective("stage_send", "pipeline", "send", "sendrecv", ctx.send_span, act * ctx.bs)

    if conv.elementwise:
        r.eltwise("final_norm", "lm_head", "once", act, act, NORM_FLOPS, ctx)
    # LM head. Only the last prompt token needs logits; GenZ computes all T.
    head_tok = tok if conv.lm_head_all_tokens else seqs
    head_stored = emb_stored * (1.0 - m.tied if conv.tied_head_stored else 1.0)
    r.gemm("lm_head", "lm_head", "once", head_tok, D, vocab, head, stored=head_stored, kind=OpKind.WIDE_GEMM)
    r.collective("lm_head_allgather", "lm_head", "once", "allgather", ctx.tp_attn, head_tok * m.vocab * ctx.bs)
    return r.table(m.hidden.dtype)
