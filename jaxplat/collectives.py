"""Collective communication time on a hierarchy of network levels (α-β model).

Costs follow the classic α-β analysis of ring collectives (Thakur, Rabenseifner
& Gropp, IJHPCA 2005; Chan et al., "Collective communication: theory,
practice, and experience", 2007). A group larger than the innermost domain
runs hierarchically: reduce-scatter inside, the collective across on the
reduced shard, all-gather inside (as NCCL's tree/hierarchical algorithms and
Megatron's 2D all-reduce do), so each level l contributes with its own group
factor f_l and the payload left at that level.
"""

import jax
import jax.numpy as jnp

from jaxplat.hardware import MAX_NET_LEVELS, Hardware
from jaxplat.roofline import safe_div

KINDS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")

GENZ_COLLECTIVE_OVERHEAD = 5e-6  # s; GenZ adds 5 µs to each AR/AG/A2A (CONVENTIONS.md)


def level_factors(hw: Hardware, n: jax.Array) -> jax.Array:
    """[MAX_NET_LEVELS] chips of a group of `n` that each level joins.

    Level l joins f_l = min(n, D_l) / min(n, D_{l-1}) sub-groups (D_{-1} = 1),
    so the product of the factors is n when the outermost domain holds n.
    """
    reach = jnp.minimum(n, hw.net_domain)
    below = jnp.concatenate([jnp.ones((1,), reach.dtype), reach[:-1]])
    return jnp.maximum(reach / below, 1.0)


def _per_level(kind: str, f, bytes_, alpha, beta):
    """Ring-algorithm time at one level: f chips, `bytes_` payload per chip."""
    steps = f - 1.0
    share = safe_div(steps, f) * bytes_
    if kind == "allreduce":
        return 2.0 * steps * alpha + 2.0 * safe_div(share, beta)
    return steps * alpha + safe_div(share, beta)


def collective_time(kind: str, hw: Hardware, n: jax.Array, bytes_: jax.Array) -> jax.Array:
    """Default profile: time of one collective, seconds.

    Args:
      kind: static, one of KINDS.
      hw: uses net_domain, net_bw (bytes/s per chip per direction),
        net_latency (s) and eff_network.
      n: chips in the group (float scalar).
      bytes_: payload per chip in bytes: the full buffer for all-reduce, the
        gathered result for all-gather, the input for reduce-scatter, what
        one chip sends in all for all-to-all, the message for send/recv.
    Returns:
      Seconds; 0 when n <= 1.
    """
    beta = hw.net_bw * hw.eff_network
    if kind == "sendrecv":
        # Point-to-point between neighbouring stages: the innermost level
        # that holds two chips (stages are adjacent in the domain).
        return jnp.where(n > 1, hw.net_latency[0] + safe_div(bytes_, beta[0]), 0.0)
    f = level_factors(hw, n)
    if kind == "alltoall":
        # Traffic to peers outside the domain below crosses level l.
        reach = jnp.minimum(n, hw.net_domain)
        below = jnp.concatenate([jnp.ones((1,), reach.dtype), reach[:-1]])
        frac = safe_div(reach - below, n)
        t = (f - 1.0) * hw.net_latency + safe_div(frac * bytes_, beta)
        return jnp.where(n > 1, jnp.sum(t), 0.0)
    total = 0.0
    payload = bytes_
    for lvl in range(MAX_NET_LEVELS):
        total = total + _per_level(kind, f[lvl], payload, hw.net_latency[lvl], beta[lvl])
        payload = payload / f[lvl]
    return jnp.where(n > 1, total, 0.0)


def genz_collective_time(kind: str, hw: Hardware, n: jax.Array, bytes_: jax.Array) -> jax.Array:
    """GenZ profile: GenZ's flat formulas over its one link (CONVENTIONS.md).

    AR = 5µs + 2(n-1)α + 2(n-1)·bytes/(n·β); AG = A2A = 5µs + (n-1)α +
    (n-1)·bytes/(n·β); message pass = α + bytes/β. Never derated.
    """
    alpha, beta = hw.net_latency[0], hw.net_bw[0]
    steps = n - 1.0
    if kind == "sendrecv":
        t = alpha + safe_div(bytes_, beta)
    else:
        mult = 2.0 if kind == "allreduce" else 1.0
        t = GENZ_COLLECTIVE_OVERHEAD + mult * (steps * alpha + safe_div(steps * bytes_, n * beta))
    return jnp.where(n > 1, t, 0.0)
