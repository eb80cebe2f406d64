"""Pipeline layout of one replica: micro-batches and the layers of each kind
a pass and the busiest pipeline stage hold (the counts `operators` gives its
rows). Discrete counts are floor/ceil, straight-through in smooth mode."""

import jax
import jax.numpy as jnp

from jaxplat.model import Model, Options, Parallel, Workload, attention_layers, ffn_layers, moe_layers


def ceil_st(x, smooth):
    """ceil; in smooth mode straight-through (exact forward, identity gradient)."""
    c = jnp.ceil(x)
    return x + jax.lax.stop_gradient(c - x) if smooth else c


def floor_st(x, smooth):
    """floor; in smooth mode straight-through (exact forward, identity gradient)."""
    f = jnp.floor(x)
    return x + jax.lax.stop_gradient(f - x) if smooth else f


def microbatching(par: Parallel, wl: Workload, opts: Options):
    """(micro-batches, sequences per micro-batch) of one replica.

    Default: `par.microbatches`, clipped to [1, batch], each of
    ceil(batch / micro-batches) sequences. GenZ (CONVENTIONS.md, "PP"):
    ub = max(batch // pp, 1) and nmb = batch // ub, whatever is asked.
    """
    if opts.conv.microbatching == "batch_over_pp":
        ub = jnp.maximum(floor_st(wl.batch / par.pp, opts.smooth), 1.0)
        return floor_st(wl.batch / ub, opts.smooth), ub
    nmb = jnp.clip(floor_st(par.microbatches, opts.smooth), 1.0, jnp.maximum(wl.batch, 1.0))
    # A batch that is not split stays as given: serving passes mean (fractional) batches.
    return nmb, jnp.where(nmb > 1.0, ceil_st(wl.batch / nmb, opts.smooth), wl.batch)


def stage_paths(par: Parallel):
    """Chips of one pipeline stage of a replica, tp·ep·cp: the paths through
    the pp stages whose work an operator table holds one of (its `count`)."""
    return par.tp * par.ep * par.cp


def stage_counts(model: Model, par: Parallel, smooth: bool = False) -> dict:
    """Layer counts per pass and in the busiest pipeline stage, per row tag.

    The busiest stage holds ceil(layers / pp) layers; with dense-first MoE
    models (DeepSeek-V3) it is taken to be as MoE-heavy as the model allows
    (MoE layers carry more weight), an upper bound for uneven mixes. Hybrid
    models (Jamba) spread their Mamba layers evenly: the busiest stage holds
    ceil(its layers x the Mamba share) of them and attention in the rest.
    It is charged the embedding and the LM head too (an upper bound when pp
    > 1: they sit on the first and last stages). Stage-to-stage sends:
    pp - 1 per pass, one per stage. Tags: "layer" every layer, "attn" and
    "mamba" the layers of each mixer, "ffn" / "no_ffn" layers with and
    without an FFN, "dense" / "moe" those with each kind of FFN, "global" /
    "local" the attention layers over the whole context and over a window
    (the busiest stage as global-heavy as the model allows).
    """
    L, pp = model.layers, jnp.maximum(par.pp, 1.0)
    per_stage = jnp.minimum(ceil_st(L / pp, smooth), L)
    moe_s = jnp.minimum(per_stage, moe_layers(model))
    dense_s = jnp.minimum(per_stage - moe_s, model.dense_layers)
    share = jnp.where(L > 0, model.mamba_layers / jnp.where(L > 0, L, 1.0), 0.0)
    mamba_s = jnp.minimum(ceil_st(per_stage * share, smooth), per_stage)
    ffn = ffn_layers(model)
    attn, attn_s = attention_layers(model), per_stage - mamba_s
    # as global-attention-heavy as the model allows (global layers cost more)
    glob_s = jnp.minimum(attn_s, attn - model.local_layers)
    return {"layer": (L, per_stage), "attn": (attn, attn_s),
            "global": (attn - model.local_layers, glob_s), "local": (model.local_layers, attn_s - glob_s),
            "mamba": (model.mamba_layers, mamba_s), "ffn": (ffn, dense_s + moe_s),
            "no_ffn": (L - ffn, jnp.maximum(per_stage - dense_s - moe_s, 0.0)),
            "dense": (model.dense_layers, dense_s), "moe": (moe_layers(model), moe_s), "once": (1.0, 1.0),
            "send": (pp - 1.0, jnp.where(pp > 1.0, 1.0, 0.0))}


__all__ = ["ceil_st", "floor_st", "microbatching", "stage_counts"]
