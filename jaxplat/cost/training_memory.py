"""Memory per chip of a training step, the model-FLOP conventions and the
feasibility checks of a training configuration (pure jnp, traced numbers).

Weights, gradients and optimizer states per parameter follow the ZeRO
paper's mixed-precision Adam accounting (Rajbhandari et al., "ZeRO: Memory
Optimizations Toward Training Trillion Parameter Models", arXiv 1910.02054,
Sec. 3.1: 2 bytes of fp16/bf16 weights, 2 of gradients, K = 12 of fp32
master weights, momentum and variance, 16 in all), sharded over the
data-parallel group by the ZeRO stage (Sec. 5: stage 1 the optimizer
states, 2 also the gradients, 3 also the weights). Megatron's distributed
optimizer is stage 1, FSDP FULL_SHARD stage 3. The data-parallel group
takes in the context-parallel ranks (dp·cp: they hold the same weights),
and expert weights are sharded over the expert-data-parallel group
(dp·cp / ep: Megatron-Core's expert-data-parallel groups): `shard_groups`.

Activations per transformer layer follow Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (arXiv 2205.05198),
Table 2, with tensor and sequence parallelism over t chips (16-bit
activations, 1-byte dropout masks), for GPT; their Sec. 4.1 accounting term
by term for other shapes (GQA, gated FFNs, no dropout, MoE:
`activation_per_layer`):
  no recomputation          s·b·h·(34 + 5·a·s/h) / t     (eq. 1 split by t)
  selective recomputation   s·b·h·34 / t
  full recomputation        s·b·h·2 / t  (each layer's input only; Megatron
                            stores its sequence-parallel shard)
Without sequence parallelism (Table 2's tensor-parallel rows) the norms'
inputs and outputs and the dropout masks, 10·s·b·h, stay whole on every
rank, as does the full recomputation's layer input; with sequence
parallelism whose autograd saves the gathered inputs (PyTorch DTensor,
`TrainOptions.sp_regather` False) the norms' outputs, 4·s·b·h, do.
The 5·a·s²·b term is the attention matrix (scores, softmax, dropout); a
fused FlashAttention kernel stores none of it (only the output and the
log-sum-exp, Dao 2023), so it is charged only when attention is not fused.
Context parallelism splits s over cp chips (Megatron-Core CP: each rank
keeps the activations of its s/cp tokens).
Pipeline stash (Korthikanti Sec. 4.2.3; Narayanan et al. SC'21 Sec. 2.2):
1F1B keeps p micro-batches of the first stage's L/p layers in flight
(L layers' worth); the interleaved schedule with v virtual stages keeps
L·(1 + (p - 1)/(p·v)) layers' worth; GPipe keeps all m micro-batches; never
more than the m micro-batches there are.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.operators import OpTable
from jaxplat.cost.opkind import names_mask
from jaxplat.cost.roofline import safe_div
from jaxplat.model import Model, attention_layers, ffn_factor, moe_layers, param_count, ssm_in_width

KORTHIKANTI_FULL = 2.0           # s·b·h bytes per layer: the layer's input
LOGIT_BYTES = 4.0                # fp32 logits of the cross-entropy, per vocabulary entry and token


def _stored_qkv(model: Model):
    """(q, k) widths per token of the stored Q and of each of K and V: heads
    x head_dim and kv_heads x head_dim; MLA's decompressed ones (heads x
    (nope + rope) for Q, the mean of K's nope + rope and V's dims for K/V)."""
    a = model.heads
    if model.attention == "mla":
        return a * (model.nope_dim + model.rope_dim), a * (model.nope_dim + model.rope_dim + model.v_head_dim) / 2.0
    return a * model.head_dim, model.kv_heads * model.head_dim


RECOMPUTE_MODULES = ("layernorm", "mla_up_proj", "moe_act", "mlp")  # Megatron-Core's recompute_modules names
# The table rows each of Megatron-Core's recompute_modules runs again in the backward (training_memory.RECOMPUTE_MODULES
# order): the two norms, MLA's query and key/value up-projections, the experts' activation, a dense MLP.
MODULE_ROWS = (("attn_norm", "ffn_norm"), ("q_b", "kv_b"), ("experts_act", "shared_act"), ("up_gate", "act", "down"))


def module_savings(model: Model):
    """16-bit elements x 2 bytes per token and layer that recomputing each of
    RECOMPUTE_MODULES in the backward frees (Megatron-Core's
    TransformerConfig.recompute_modules), the layer's input of that module
    still kept: layernorm, the two norms' outputs (the attention's and the
    MLP's GEMM inputs, 2h each); mla_up_proj, MLA's up-projected Q, K and V
    (2q + 2·2k; the latents stay); moe_act, each routed and shared expert
    copy's activation output (2f_e); mlp, a dense MLP's up-projection and
    activation outputs (2·g·f + 2f). MoE and dense shares as in
    `activation_per_layer`. Returns a [4] array, RECOMPUTE_MODULES order."""
    h, g, fe = model.hidden, ffn_factor(model), model.expert_intermediate
    q, kv = _stored_qkv(model)
    moe_share, dense_share = _ffn_shares(model)
    mla = 1.0 if model.attention == "mla" else 0.0
    return jnp.stack([4.0 * h, mla * (2.0 * q + 4.0 * kv),
                      moe_share * (model.top_k + model.shared_experts) * 2.0 * fe,
                      dense_share * (2.0 * g * model.intermediate + 2.0 * model.intermediate)])


def _ffn_shares(model: Model):
    """(MoE, dense) shares of the layers: the FFN each layer holds on average
    (layers without an FFN, pure Mamba's or Nemotron-H's mixers, hold none)."""
    return safe_div(moe_layers(model), model.layers), safe_div(model.dense_layers, model.layers)


def module_flags(twl) -> jax.Array:
    """[4] 0/1 of a TrainWorkload's recomputed modules, RECOMPUTE_MODULES order."""
    return jnp.stack([getattr(twl, f"recompute_{mod}") for mod in RECOMPUTE_MODULES])


def module_rows(t: OpTable, twl, row_values) -> jax.Array:
    """The recomputed modules' rows (MODULE_ROWS) of table `t` summed:
    seconds per micro-batch for row_values [rows] the rank's forward
    seconds per row, FLOPs for its FLOPs per row."""
    masks = np.stack([names_mask(t, rows) for rows in MODULE_ROWS])  # [4, rows]
    return jnp.sum(module_flags(twl) @ jnp.asarray(masks) * row_values)


def activation_per_layer(model: Model, tp, cp, micro_batch, seq, recompute, fused_attention: bool, dropout=1.0,
                         modules=None, sequence_parallel: bool = True, sp_regather: bool = True):
    """Bytes one chip keeps per transformer layer for one micro-batch
    (Korthikanti et al. Sec. 4.1 term by term, tensor + sequence parallel:
    everything over t; see the module doc; `sequence_parallel` and
    `sp_regather` as TrainOptions: what stays whole). recompute: traced code, 0 none,
    1 selective, 2 full. dropout: 1 when the model trains with dropout (its
    1-byte masks: GPT in Megatron), 0 without (Llama, most models since).
    modules: [4] 0/1 of RECOMPUTE_MODULES recomputed besides (their
    `module_savings` not kept; no effect under full recomputation); None:
    none.

    Per token, in 16-bit elements x 2 bytes (h hidden, q = heads·head_dim,
    k = kv_heads·head_dim, f the FFN width, g = 2 gated or 1):
      norms' inputs 4h; attention: QKV input 2h, Q 2q, K and V 2·2k, output
      projection input 2q, dropout mask h; MLP: input 2h, up-projection
      output 2·g·f, activation output 2f, dropout mask h. With q = k = h,
      f = 4h, g = 1 and dropout this is Korthikanti's 34h (11h + 19h + 4h).
      Without fusion the scores add (2 + 3·dropout)·a·s per token (5as).
    MoE layers' MLP holds each of the top-k copies' input, up-projection
    and activation outputs, and the shared experts'; the layer's share of
    MoE layers mixes the two. MLA counts its decompressed K and V (heads x
    their dims) like GQA's. Mamba layers hold `mamba_activations` in the
    attention's place, in the share of layers that are Mamba.
    """
    s_loc, h, a = seq / cp, model.hidden, model.heads
    g = ffn_factor(model)
    q, kv = _stored_qkv(model)
    attn = 2.0 * h + 2.0 * q + 4.0 * kv + 2.0 * q + dropout * h
    dense_mlp = 2.0 * h + 2.0 * g * model.intermediate + 2.0 * model.intermediate + dropout * h
    fe = model.expert_intermediate
    moe_mlp = 2.0 * h + dropout * h + (model.top_k * (2.0 * h + 2.0 * g * fe + 2.0 * fe)
                                       + model.shared_experts * (2.0 * g * fe + 2.0 * fe))
    moe_share, dense_share = _ffn_shares(model)
    mamba_share = safe_div(model.mamba_layers, model.layers)
    mixer = (1.0 - mamba_share) * attn + mamba_share * mamba_activations(model)
    per_token = 4.0 * h + mixer + dense_share * dense_mlp + moe_share * moe_mlp
    if modules is not None:
        per_token = per_token - jnp.sum(jnp.asarray(modules) * module_savings(model))
    # Kept whole on every tp rank: the GEMMs' gathered inputs (the mixer's and the FFN's norm outputs), and
    # without SP the norms' inputs and the dropout masks too (Korthikanti Table 2: 10·s·b·h of GPT's 34).
    gathered = 2.0 * h + (moe_share + dense_share) * 2.0 * h
    if modules is not None:  # recomputed norms keep no output, gathered or not
        gathered = gathered * (1.0 - jnp.asarray(modules)[0])
    whole = (gathered + 4.0 * h + 2.0 * dropout * h if not sequence_parallel
             else 0.0 if sp_regather else gathered)
    layer_input = KORTHIKANTI_FULL * h * (1.0 if sequence_parallel else tp)
    tokens = s_loc * micro_batch
    scores = 0.0 if fused_attention else (1.0 - mamba_share) * (2.0 + 3.0 * dropout) * a * seq * tokens
    selective = (per_token + (tp - 1.0) * whole) * tokens / tp
    none = selective + scores / tp
    full = layer_input * tokens / tp
    return jnp.where(recompute >= 1.5, full, jnp.where(recompute >= 0.5, selective, none))


def mamba_activations(model: Model):
    """16-bit elements x 2 bytes per token that a Mamba block keeps for its
    backward, as the mamba_ssm kernels save them (d = d_inner, h hidden):
    Mamba-2 (ssd_combined.MambaSplitConv1dScanCombinedFn, Megatron-Core's
    MambaMixer path): the in-projection's input 2h, its output zxbcdt
    2·(2d + 2·groups·d_state + heads), the scan's output 2d and the
    out-projection's input 2d (the conv and dt are recomputed). Mamba-1
    (selective_scan_interface.MambaInnerFn at its default checkpoint_lvl 1):
    the input 2h, xz 2·2d, x_dbl (dt, B, C) 2·(dt_rank + 2·d_state) and the
    out-projection's input 2d (the conv output and delta are recomputed).
    Zero for transformers."""
    h, d = model.hidden, model.d_inner
    stored = 2.0 * h + 2.0 * ssm_in_width(model)  # the in-projection's input and output (zxbcdt; Mamba-1: xz)
    if model.ssm == "mamba2":
        return stored + 4.0 * d
    if model.ssm == "mamba1":
        return stored + 2.0 * (model.dt_rank + 2.0 * model.d_state) + 2.0 * d
    return jnp.zeros_like(h)


def in_flight(pp, vp, microbatches, schedule: str):
    """Micro-batches' worth of the first stage's layers its stash holds
    (module doc): 1F1B p, interleaved p + (p - 1)/v, GPipe m; at most m."""
    if schedule == "gpipe":
        return microbatches
    one_f_one_b = jnp.where(vp > 1.0, pp + safe_div(pp - 1.0, vp), pp)
    return jnp.minimum(one_f_one_b, microbatches)


def shard_groups(par):
    """(dense, expert) data-parallel group sizes: the ranks holding the same
    dense weights, dp·cp (context-parallel ranks hold the same weights and
    sum their tokens' gradients: Megatron-Core's DistributedDataParallel
    reduces dense gradients, and its distributed optimizer shards, over
    the data-parallel group with context parallelism, intra_dp_cp_group;
    TorchTitan's FSDP shards over dp_shard x cp), and those holding the same
    expert shard, dp·cp/ep (its expert-data-parallel group, expt_dp_group:
    world / (pp·etp·ep) ranks)."""
    dense = par.dp * par.cp
    return dense, jnp.maximum(dense / par.ep, 1.0)


def state_groups(par, dp_shard):
    """(dense, expert) ranks each parameter's ZeRO shards span: the
    data-parallel groups (`shard_groups`), or with `dp_shard` > 0 (hybrid
    sharding: PyTorch HSDP, TorchTitan's data_parallel_shard_degree) dp_shard·cp
    of them, the states replicated over the group's other ranks."""
    g_dense, g_expert = shard_groups(par)
    cap = dp_shard * par.cp
    return tuple(jnp.where(dp_shard > 0, jnp.minimum(cap, g), g) for g in (g_dense, g_expert))


def state_bytes(params_dense, params_expert, par, zero, bytes_param, bytes_grad, bytes_optim, dp_shard=0.0):
    """(weights, gradients, optimizer states) bytes per chip under ZeRO
    stage `zero` (traced 0..3), dense and expert parameters sharded over
    their data-parallel groups (`state_groups`; ZeRO paper Sec. 5.1-5.3,
    Fig. 1)."""
    g_dense, g_expert = state_groups(par, dp_shard)

    def shard(stage):
        on = zero >= stage - 0.5
        return params_dense / jnp.where(on, g_dense, 1.0) + params_expert / jnp.where(on, g_expert, 1.0)
    return bytes_param * shard(3), bytes_grad * shard(2), bytes_optim * shard(1)


def flop_params(model: Model) -> jax.Array:
    """Parameters a token's matmuls touch: the active ones (top-k and
    shared experts of each MoE layer, not all experts), without the input
    embedding (a lookup) but with the LM head (a matmul even when tied)."""
    f = ffn_factor(model) + 1.0
    idle = moe_layers(model) * f * model.hidden * model.expert_intermediate * (model.experts - model.top_k)
    emb = model.vocab * model.hidden * (2.0 - model.tied)
    return param_count(model) - jnp.maximum(idle, 0.0) - emb + model.vocab * model.hidden


def attention_width(model: Model) -> jax.Array:
    """heads x (query-key dim + value dim) of one attention layer."""
    if model.attention == "mla":
        return model.heads * (model.nope_dim + model.rope_dim + model.v_head_dim)
    return model.heads * 2.0 * model.head_dim


def model_flops_per_token(model: Model, seq) -> jax.Array:
    """Model FLOPs per trained token (forward + backward, no recomputation):
    6·N (N = `flop_params`) plus attention 6·L_attn·s·heads·(d_qk + d_v)
    over the whole (non-causal) s×s matrix, = 12·L·s·h·d for multi-head
    attention: PaLM's MFU convention (Chowdhery et al. 2022, App. B) and
    Narayanan et al. SC'21 eq. (3)."""
    return 6.0 * flop_params(model) + 3.0 * attention_layers(model) * 2.0 * seq * attention_width(model)


def recompute_flops_per_token(model: Model, seq, recompute) -> jax.Array:
    """Hardware FLOPs per token beyond the model FLOPs: full recomputation
    repeats the forward (2·N + the attention's forward), selective only the
    attention's score and value products (Korthikanti Sec. 5)."""
    attn_fwd = attention_layers(model) * 2.0 * seq * attention_width(model)
    full = 2.0 * flop_params(model) + attn_fwd
    return jnp.where(recompute >= 1.5, full, jnp.where(recompute >= 0.5, attn_fwd, 0.0))


def checks(model: Model, par, twl) -> dict:
    """Named feasibility checks of a training configuration (bool arrays):
    "whole" degrees are whole numbers >= 1; "heads" tp divides the heads;
    "kv_heads" tp and the KV heads divide one another; "experts" ep divides
    the experts; "ep_dp" ep divides the data-parallel degree (expert
    parallelism is carved out of it); "batch" micro-batch x dp divides the
    global batch; "virtual" pp·vp <= layers (a virtual stage holds at least
    one layer); "interleave" with vp > 1 the micro-batches are a multiple of
    pp (Megatron's interleaved schedule requires it); "cp" 2·cp divides the
    sequence (load-balanced ring attention splits it in 2·cp chunks);
    "dp_shard" a hybrid sharding group divides dp and has ZeRO states to shard."""
    div = lambda x, d: jnp.mod(x, d) == 0  # noqa: E731
    deg = jnp.stack([par.tp, par.pp, par.vp, par.cp, par.ep, par.dp])
    mb = safe_div(twl.global_batch, twl.micro_batch * par.dp)
    return {"whole": jnp.all((deg >= 1.0) & (deg == jnp.round(deg))),
            "heads": div(model.heads, par.tp),
            "kv_heads": div(model.kv_heads, par.tp) | div(par.tp, model.kv_heads),
            "experts": jnp.where(model.experts > 0, div(model.experts, par.ep), par.ep == 1.0),
            "ep_dp": div(par.dp, par.ep),
            "batch": div(twl.global_batch, twl.micro_batch * par.dp) & (mb >= 1.0),
            "virtual": par.pp * par.vp <= model.layers,
            "interleave": (par.vp <= 1.0) | div(mb, par.pp),
            "cp": div(twl.seq, 2.0 * par.cp) | (par.cp == 1.0),
            "dp_shard": (twl.dp_shard == 0.0) | ((twl.dp_shard >= 1.0) & div(par.dp, jnp.maximum(twl.dp_shard, 1.0))
                                                & (twl.zero >= 0.5))}


__all__ = ["MODULE_ROWS", "RECOMPUTE_MODULES", "activation_per_layer", "attention_width", "checks", "flop_params",
           "in_flight", "model_flops_per_token", "module_flags", "module_rows", "module_savings",
           "recompute_flops_per_token", "shard_groups", "state_bytes", "state_groups"]
