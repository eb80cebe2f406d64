"""`Model`: a decoder-only model's dimensions as a pytree of float leaves.

Only the attention and state-space kinds are static (they change which
operators exist). Dense, MoE, state-space (Mamba) and hybrid models share
one tree structure: a dense model has zero MoE layers and zero Mamba layers,
so one compiled program serves them all.
"""

import dataclasses

import jax
import jax.numpy as jnp

from jaxplat.model.pytree import pytree_dataclass, static

ATTENTION_KINDS = ("gqa", "mla")  # gqa covers MHA (kv = heads) and MQA (kv = 1)
SSM_KINDS = ("none", "mamba1", "mamba2")  # Gu & Dao 2023 (arXiv 2312.00752); Dao & Gu 2024 (arXiv 2405.21060)


def _zero():
    return dataclasses.field(default_factory=lambda: jnp.float32(0.0))


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
      mamba_layers: layers whose mixer is a Mamba block instead of attention
        (all of them for Mamba / Falcon-Mamba, 28 of Jamba's 32). Attention
        layers are the others (`attention_layers`).
      no_ffn_layers: layers with a mixer but no FFN, besides the pure Mamba
        models' (which have neither dense nor MoE layers): Nemotron-H's
        single-sublayer blocks, paired mixer with FFN, leave the mixers
        without a partner here (`model_spec._nemotron_h`). MoE layers are
        the layers that are neither dense nor these.
      d_inner, d_state, d_conv, dt_rank: Mamba dims (expand x hidden, the
        SSM state per channel, the causal conv's kernel width, the rank of
        the dt projection). Zero for transformers.
      ssm_heads, ssm_groups: Mamba-2 heads (of d_inner / heads channels each)
        and B/C groups; zero for Mamba-1.
      ssm_chunk: Mamba-2's SSD chunk length, tokens (config `chunk_size`;
        256, mamba_ssm's default, when the config gives none); zero for
        Mamba-1.
      local_layers: attention layers whose attention is local (0 for none):
        a sliding window of `window` tokens (Mistral, Gemma-2, gpt-oss) or,
        with chunked = 1, the query's own chunk of `window` tokens (Llama-4's
        attention_chunk_size). The other layers attend to the whole context.
      window: tokens of the window or chunk (0 when no layer is local).
      chunked: 1 for chunked-local attention, 0 for a sliding window.
      max_context: max_position_embeddings, tokens (0 when unknown).
      attention: static, one of ATTENTION_KINDS.
      ssm: static, one of SSM_KINDS: "none" for transformers (no Mamba rows
        are built), else the kind of the Mamba layers.
      windowed: static, True when the operator table has rows for local
        layers (a model with local_layers > 0 needs it; models without
        local layers leave it False and compile without those rows).
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
    mamba_layers: jax.Array = _zero()
    no_ffn_layers: jax.Array = _zero()
    d_inner: jax.Array = _zero()
    d_state: jax.Array = _zero()
    d_conv: jax.Array = _zero()
    dt_rank: jax.Array = _zero()
    ssm_heads: jax.Array = _zero()
    ssm_groups: jax.Array = _zero()
    ssm_chunk: jax.Array = _zero()
    local_layers: jax.Array = _zero()
    window: jax.Array = _zero()
    chunked: jax.Array = _zero()
    max_context: jax.Array = _zero()
    attention: str = static("gqa")
    ssm: str = static("none")
    windowed: bool = static(False)


def moe_layers(m: Model) -> jax.Array:
    """Number of MoE layers, when there are experts: the layers whose FFN is
    neither dense nor absent (`no_ffn_layers`)."""
    return jnp.where(m.experts > 0, m.layers - m.dense_layers - m.no_ffn_layers, 0.0)


def attention_layers(m: Model) -> jax.Array:
    """Number of layers whose mixer is attention (the others are Mamba)."""
    return m.layers - m.mamba_layers


def ffn_layers(m: Model) -> jax.Array:
    """Number of layers with an FFN, dense or MoE (pure Mamba models: none)."""
    return m.dense_layers + moe_layers(m)


def ssm_in_width(m: Model) -> jax.Array:
    """Columns of a Mamba block's input projection (whole model, not per chip).

    Mamba-1: x and the gate z (2 d_inner; Gu & Dao 2023, Sec. 3.4). Mamba-2:
    z, x, B, C and dt in one projection (2 d_inner + 2 groups d_state + heads;
    Dao & Gu 2024, Sec. 7.1).
    """
    if m.ssm == "mamba2":
        return 2.0 * m.d_inner + 2.0 * m.ssm_groups * m.d_state + m.ssm_heads
    return 2.0 * m.d_inner


def ssm_conv_channels(m: Model) -> jax.Array:
    """Channels of the depthwise causal conv: x (Mamba-1), x, B and C (Mamba-2)."""
    if m.ssm == "mamba2":
        return m.d_inner + 2.0 * m.ssm_groups * m.d_state
    return m.d_inner


def ssm_state_elements(m: Model, d_inner_per_chip: jax.Array) -> jax.Array:
    """Recurrent state of one sequence in one Mamba layer on one chip, elements:
    the SSM state (d_inner x d_state) and the conv window (d_conv per conv
    channel), a constant that replaces the KV cache (Gu & Dao 2023, Sec. 3.4;
    Hugging Face's MambaCache keeps the same two tensors)."""
    conv = ssm_conv_channels(m) * d_inner_per_chip / jnp.maximum(m.d_inner, 1.0)
    return d_inner_per_chip * m.d_state + conv * m.d_conv


def local_keys(m: Model, context):
    """Keys a local-attention layer attends to for the query at position
    `context` (1-based: the context holds `context` tokens): min(context,
    window) for a sliding window; ((context - 1) mod window) + 1 for
    chunked attention (the query sees its own chunk so far). `context`
    itself when no layer is local (window 0)."""
    w = jnp.where(m.window > 0, m.window, 1.0)
    sliding = jnp.minimum(context, w)
    chunk = context - jnp.floor(jnp.maximum(context - 1.0, 0.0) / w) * w
    return jnp.where(m.window > 0, jnp.where(m.chunked > 0, chunk, sliding), context)


def local_pairs(m: Model, n, floor=jnp.floor):
    """Query-key pairs of causal local attention over n tokens per head:
    sum of `local_keys` over positions 1..n. Sliding window W: n(n+1)/2 up
    to W, then W per token (W(W+1)/2 + (n - W)W); chunked: full chunks of
    C(C+1)/2 each plus r(r+1)/2 for the last r tokens (Beltagy et al.,
    Longformer, arXiv 2004.05150; Llama 4's attention_chunk_size). `floor`:
    jnp.floor or its straight-through twin in smooth mode."""
    w = jnp.where(m.window > 0, m.window, 1.0)
    c = jnp.minimum(n, w)
    sliding = c * (c + 1.0) / 2.0 + jnp.maximum(n - w, 0.0) * w
    q = floor(n / w)
    r = n - q * w
    chunk = q * w * (w + 1.0) / 2.0 + r * (r + 1.0) / 2.0
    return jnp.where(m.window > 0, jnp.where(m.chunked > 0, chunk, sliding), n * (n + 1.0) / 2.0)


def local_tokens(m: Model, context):
    """Tokens of KV a local layer holds at `context` tokens: min(context,
    window) (a chunk never needs more than its window); `context` when no
    layer is local."""
    return jnp.where(m.window > 0, jnp.minimum(context, m.window), context)


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
    return attention_layers(m) * attn + m.mamba_layers * ssm_params(m) + m.dense_layers * dense \
        + moe_layers(m) * moe + emb


def ssm_params(m: Model) -> jax.Array:
    """Weights of one Mamba block: in-projection, conv, x-projection (dt, B, C)
    and dt-projection (Mamba-1 only), A and D, out-projection; no biases."""
    d, di, n = m.hidden, m.d_inner, m.d_state
    conv = ssm_conv_channels(m) * m.d_conv
    if m.ssm == "mamba2":
        return d * ssm_in_width(m) + conv + 2.0 * m.ssm_heads + di * d
    return d * 2.0 * di + conv + di * (m.dt_rank + 2.0 * n) + m.dt_rank * di + di * n + di + di * d
