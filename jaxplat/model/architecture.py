"""`Model`: a decoder-only transformer's dimensions as a pytree of float leaves.

Only the attention kind is static (it changes which operators exist). Dense
and MoE models share one tree structure: a dense model has zero MoE layers,
so one compiled program serves both.
"""

import jax
import jax.numpy as jnp

from jaxplat.model.pytree import pytree_dataclass, static

ATTENTION_KINDS = ("gqa", "mla")  # gqa covers MHA (kv = heads) and MQA (kv = 1)


@pytree_dataclass
class Model:
    """Model dimensions (Hugging Face `config.json` meanings), float32 leaves.

    Attributes:
      layers: decoder layers in all.
      dense_layers: layers with a dense FFN (all of them for a dense model;
        DeepSeek-V3's `first_k_dense_replace`; half of Llama-4 Maverick's).
      hidden, heads, kv_heads, head_dim: attention dims (head_dim is the
        query/key dim for GQA).
      intermediate: dense FFN width.
      vocab: vocabulary size.
      tied: 1 if the LM head shares the embedding table.
      gated: 1 for a gated FFN (SwiGLU/GeGLU: up and gate), 0 for plain.
      experts, top_k, expert_intermediate, shared_experts: MoE layers
        (experts = 0 for dense models). Shared experts have the routed
        experts' width.
      q_lora_rank, kv_lora_rank, rope_dim, nope_dim, v_head_dim: MLA dims
        (zero for GQA). q_lora_rank = 0 means a direct query projection.
      attention: static, one of ATTENTION_KINDS.
    """

    layers: jax.Array
    dense_layers: jax.Array
    hidden: jax.Array
    heads: jax.Array
    kv_heads: jax.Array
    head_dim: jax.Array
    intermediate: jax.Array
    vocab: jax.Array
    tied: jax.Array
    gated: jax.Array
    experts: jax.Array
    top_k: jax.Array
    expert_intermediate: jax.Array
    shared_experts: jax.Array
    q_lora_rank: jax.Array
    kv_lora_rank: jax.Array
    rope_dim: jax.Array
    nope_dim: jax.Array
    v_head_dim: jax.Array
    attention: str = static("gqa")


def moe_layers(m: Model) -> jax.Array:
    """Number of MoE layers."""
    return m.layers - m.dense_layers


def ffn_factor(m: Model) -> jax.Array:
    """Weight matrices in the up projection: 2 if gated (up and gate), else 1."""
    return 1.0 + m.gated


def kv_elements_per_token(m: Model, kv_heads_per_chip: jax.Array) -> jax.Array:
    """KV-cache elements stored per token per layer on one chip.

    GQA: K and V for each KV head. MLA (DeepSeek-V2 paper, Sec. 2.1.2): one
    compressed latent plus the shared RoPE key, replicated on every TP rank.
    """
    if m.attention == "mla":
        return m.kv_lora_rank + m.rope_dim
    return 2.0 * kv_heads_per_chip * m.head_dim


def param_count(m: Model) -> jax.Array:
    """Total parameters (weights only, no biases or norms), a float."""
    d = m.hidden
    if m.attention == "mla":
        qk = m.nope_dim + m.rope_dim
        q = jnp.where(m.q_lora_rank > 0, d * m.q_lora_rank + m.q_lora_rank * m.heads * qk, d * m.heads * qk)
        attn = q + d * (m.kv_lora_rank + m.rope_dim) + m.kv_lora_rank * m.heads * (m.nope_dim + m.v_head_dim) \
            + m.heads * m.v_head_dim * d
    else:
        attn = d * (m.heads + 2 * m.kv_heads) * m.head_dim + m.heads * m.head_dim * d
    f = ffn_factor(m) + 1.0
    dense = f * d * m.intermediate
    moe = f * d * m.expert_intermediate * (m.experts + m.shared_experts) + d * m.experts
    emb = m.vocab * d * (2.0 - m.tied)
    return m.layers * attn + m.dense_layers * dense + moe_layers(m) * moe + emb
