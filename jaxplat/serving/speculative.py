"""Speculative decoding: a draft model proposes k tokens, the target checks
them in one pass (Leviathan et al. 2023).
"""

import jax.numpy as jnp

from jaxplat.model import Hardware, Model, Options, Parallel, Workload
from jaxplat.serving.iteration import decode_time, iteration_time


def expected_tokens(k, alpha):
    """Tokens produced per verify step with k drafted tokens, each accepted
    with probability alpha: (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et
    al., ICML 2023, Eq. 1); k + 1 at alpha = 1."""
    a = jnp.clip(alpha, 0.0, 1.0 - 1e-6)
    return (1.0 - a ** (k + 1.0)) / (1.0 - a)


def speculative_tpot(model: Model, hw: Hardware, par: Parallel, wl: Workload, opts: Options,
                     batch, k, alpha, draft_model: Model | None = None, draft_fraction=0.0,
                     draft_par: Parallel | None = None):
    """Mean time per output token with speculative decoding, seconds.

    One step: k draft forward passes, then one target pass verifying k + 1
    tokens per sequence (the same shape as a prompt chunk of k + 1 tokens at
    the sequence's context: `iteration_time` with a chunk per sequence),
    producing `expected_tokens(k, alpha)` tokens. The draft is a model spec
    (its own decode step on `draft_par`, default the target's), or, with
    draft_model None, `draft_fraction` of a target decode step per drafted
    token (MTP heads: about 1 / layers per head for DeepSeek-V3's one-layer
    module; n-gram lookup: 0). Returns (tpot_spec, tpot_plain): speculation
    pays off when the first is smaller; it stops paying at large batch, where
    the verify pass becomes compute-bound.
    """
    ctx = wl.prompt + wl.output / 2.0
    plain = decode_time(model, hw, par, wl, opts, batch, ctx)
    if draft_model is None:
        draft = draft_fraction * plain
    else:
        draft = decode_time(draft_model, hw, draft_par or par, wl, opts, batch, ctx)
    # verify: `batch` sequences each with a chunk of k + 1 tokens at context
    # ctx, logits for all k + 1 of them; each reads its KV once.
    one = jnp.ones((1,), jnp.float32)
    verify = iteration_time(model, hw, par, wl, opts, jnp.float32(0.0), ctx, (k + 1.0) * one, ctx * one,
                            batch * one, k + 1.0)
    step = k * draft + verify
    return step / expected_tokens(k, alpha), plain
