"""`Hardware`: one chip and the network around it, as a pytree of float leaves."""

import dataclasses

import jax
import jax.numpy as jnp

from jaxplat.model.pytree import pytree_dataclass
from jaxplat.specs.units import DTYPES

# Memory and network levels are padded to these counts so that every chip has
# the same tree shape (one compiled program serves all chips).
MAX_MEM_LEVELS = 3
MAX_NET_LEVELS = 3
TOPOLOGIES = ("switch", "ring", "torus2d", "torus3d", "mesh2d")


@pytree_dataclass
class Hardware:
    """One chip, its memory levels and the network levels around it. SI units.

    Attributes:
      flops: [len(units.DTYPES)] dense peak FLOP/s per dtype (fallbacks filled).
      sram_size, sram_bw: on-chip memory, bytes and bytes/s (0 when absent:
        then on-chip tensors cost no time).
      mem_size, mem_bw: [MAX_MEM_LEVELS] off-chip levels (HBM, then host/DDR),
        fastest first, bytes and bytes/s; padded levels have size 0, bw 1.
        A chip with only SRAM (Groq, Cerebras) has its SRAM as level 0.
      net_domain, net_bw, net_latency, net_topology: [MAX_NET_LEVELS] network
        levels, innermost first: chips per domain, bytes/s per chip per
        direction, seconds, index into TOPOLOGIES. Padded levels have an
        infinite-like domain (1e9 chips) copied from the outermost real level.
      eff_compute, eff_memory, eff_network: achievable fractions of peak.
      tdp, price: board power in W and price in USD (0 when unknown).
      energy_flop: [len(DTYPES)] J per FLOP in each dtype (0 when unknown).
      energy_sram: J per byte moved to or from on-chip SRAM.
      energy_mem: [MAX_MEM_LEVELS] J per byte moved at each off-chip level.
      energy_net: [MAX_NET_LEVELS] J per byte one chip sends at each level.
      static_power: W per chip drawn whatever it does (leakage, idle).
      lifetime: s over which the chip's price is amortized (0: no capex).
      energy_price: USD per J of facility energy. pue: power usage
        effectiveness (facility energy / IT energy, >= 1).
      The spec loader fills technology defaults (jaxplat.energy, jaxplat.cost);
      a `Hardware` built directly gets zero energy and cost.
    """

    flops: jax.Array
    sram_size: jax.Array
    sram_bw: jax.Array
    mem_size: jax.Array
    mem_bw: jax.Array
    net_domain: jax.Array
    net_bw: jax.Array
    net_latency: jax.Array
    net_topology: jax.Array
    eff_compute: jax.Array
    eff_memory: jax.Array
    eff_network: jax.Array
    tdp: jax.Array
    price: jax.Array
    energy_flop: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((len(DTYPES),), jnp.float32))
    energy_sram: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    energy_mem: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((MAX_MEM_LEVELS,), jnp.float32))
    energy_net: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((MAX_NET_LEVELS,), jnp.float32))
    static_power: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    lifetime: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    energy_price: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    pue: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
