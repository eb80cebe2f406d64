"""`Parallel`: how one model replica is split over chips (degrees are floats)."""

import dataclasses
import numbers

import jax
import jax.numpy as jnp

from jaxplat._pytree import pytree_dataclass


def _one():
    return jnp.float32(1.0)


def _zero():
    return jnp.float32(0.0)


@pytree_dataclass
class Parallel:
    """Parallel degrees. All are traced floats, so they can be swept or vmapped.

    `Parallel(tp=8)` casts Python numbers to float32 scalars, so different
    degrees reuse one compiled program.

    Attributes:
      tp: tensor parallel (heads, FFN width and vocabulary split).
      pp: pipeline stages.
      ep: expert parallel (MoE experts split over chips).
      dp: data-parallel replicas (multiply throughput, not latency).
      sp: sequence (context) parallel for long prompts.
      microbatches: pipeline micro-batches in flight (1 = no pipelining).
      overlap: fraction of communication hidden behind compute (0 = none).
    """

    tp: jax.Array = dataclasses.field(default_factory=_one)
    pp: jax.Array = dataclasses.field(default_factory=_one)
    ep: jax.Array = dataclasses.field(default_factory=_one)
    dp: jax.Array = dataclasses.field(default_factory=_one)
    sp: jax.Array = dataclasses.field(default_factory=_one)
    microbatches: jax.Array = dataclasses.field(default_factory=_one)
    overlap: jax.Array = dataclasses.field(default_factory=_zero)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, numbers.Number):
                object.__setattr__(self, f.name, jnp.float32(v))


def chips(p: Parallel) -> jax.Array:
    """Chips used by one deployment: the product of all degrees."""
    return p.tp * p.pp * p.ep * p.dp * p.sp
