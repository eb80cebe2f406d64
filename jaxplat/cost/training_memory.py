"""Memory per chip of a training step, the model-FLOP conventions and the
feasibility checks of a training configuration (pure jnp, traced numbers).

Weights, gradients and optimizer states per parameter follow the ZeRO
paper's mixed-precision Adam accounting (Rajbhandari et al., "ZeRO: Memory
Optimizations Toward Training Trillion Parameter Models", arXiv 1910.02054,
Sec. 3.1: 2 bytes of fp16/bf16 weights, 2 of gradients, K = 12 of fp32
master weights, momentum and variance, 16 in all), sharded over the
data-parallel group by the ZeRO stage (Sec. 5: stage 1 the optimizer
states, 2 also the gradients, 3 also the weights). Megatron's distributed
optimizer is stage 1, FSDP FULL_SHARD stage 3. Expert weights are sharded
over the expert-data-parallel group (dp / ep: Megatron-Core's
expert-data-parallel groups).

Activations per transformer layer follow Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (arXiv 2205.05198),
Table 2, with tensor and sequence parallelism over t chips (16-bit
activations, 1-byte dropout masks):
  no recomputation          s·b·h·(34 + 5·a·s/h) / t     (eq. 1 split by t)
  selective recomputation   s·b·h·34 / t
  full recomputation        s·b·h·2 / t  (each layer's input only; Megatron
                            stores its sequence-parallel shard)
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

from jaxplat.cost.roofline import safe_div
from jaxplat.model import Model, attention_layers, ffn_factor, moe_layers, param_count

KORTHIKANTI_NO_RECOMPUTE = 34.0  # s·b·h bytes per layer (Korthikanti Table 2)
KORTHIKANTI_SCORES = 5.0         # a·s²·b bytes per layer: attention matrix, softmax, dropout
KORTHIKANTI_FULL = 2.0           # s·b·h bytes per layer: the layer's input
LOGIT_BYTES = 4.0                # fp32 logits of the cross-entropy, per vocabulary entry and token


def activation_per_layer(model: Model, tp, cp, micro_batch, seq, recompute, fused_attention: bool):
    """Bytes one chip keeps per transformer layer for one micro-batch
    (Korthikanti Table 2, tensor + sequence parallel; see the module doc).
    recompute: traced code, 0 none, 1 selective, 2 full."""
    s_loc, h, a = seq / cp, model.hidden, model.heads
    sbh = s_loc * micro_batch * h
    scores = 0.0 if fused_attention else KORTHIKANTI_SCORES * a * seq * s_loc * micro_batch
    none = (KORTHIKANTI_NO_RECOMPUTE * sbh + scores) / tp
    selective = KORTHIKANTI_NO_RECOMPUTE * sbh / tp
    full = KORTHIKANTI_FULL * sbh / tp
    return jnp.where(recompute >= 1.5, full, jnp.where(recompute >= 0.5, selective, none))


def in_flight(pp, vp, microbatches, schedule: str):
    """Micro-batches' worth of the first stage's layers its stash holds
    (module doc): 1F1B p, interleaved p + (p - 1)/v, GPipe m; at most m."""
    if schedule == "gpipe":
        return microbatches
    one_f_one_b = jnp.where(vp > 1.0, pp + safe_div(pp - 1.0, vp), pp)
    return jnp.minimum(one_f_one_b, microbatches)


def state_bytes(params_dense, params_expert, dp, ep, zero, bytes_param, bytes_grad, bytes_optim):
    """(weights, gradients, optimizer states) bytes per chip under ZeRO
    stage `zero` (traced 0..3), dense parameters sharded over dp, expert
    parameters over dp / ep (ZeRO paper Sec. 5.1-5.3, Fig. 1)."""
    def shard(stage):
        on = zero >= stage - 0.5
        return (params_dense / jnp.where(on, dp, 1.0) +
                params_expert / jnp.where(on, jnp.maximum(dp / ep, 1.0), 1.0))
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
    sequence (load-balanced ring attention splits it in 2·cp chunks)."""
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
            "cp": div(twl.seq, 2.0 * par.cp) | (par.cp == 1.0)}


__all__ = ["activation_per_layer", "attention_width", "checks", "flop_params", "in_flight", "model_flops_per_token",
           "recompute_flops_per_token", "state_bytes"]
