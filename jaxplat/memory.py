"""Memory footprint per chip: weights, KV cache, activations, and fit."""

import jax
import jax.numpy as jnp

from jaxplat.hardware import Hardware
from jaxplat.model import Model, kv_elements_per_token
from jaxplat.operators import OpTable
from jaxplat.workload import Workload


def weights_bytes(table: OpTable) -> jax.Array:
    """Weight bytes resident per chip: Σ count·stored over the table's rows."""
    return jnp.sum(table.count * table.stored)


def kv_bytes(model: Model, wl: Workload, kv_heads_per_chip: jax.Array) -> jax.Array:
    """KV-cache bytes per chip at the end of generation.

    Beams share the prompt's KV: b·prompt + b·beams·output tokens per layer
    (GenZ counts it the same way, CONVENTIONS.md "Summary numbers").
    """
    tokens = wl.batch * wl.prompt + wl.batch * wl.beams * wl.output
    return model.layers * kv_elements_per_token(model, kv_heads_per_chip) * tokens * wl.bytes_kv


def activation_bytes(table: OpTable) -> jax.Array:
    """Peak activation working set in main memory during prefill, bytes:
    the largest off-chip input + output of any one operator (operators run
    one after another, so their buffers are reused)."""
    live = (1.0 - table.on_a) * table.a0 + (1.0 - table.on_o) * table.o0
    return jnp.max(live)


def capacity_bytes(hw: Hardware) -> jax.Array:
    """Bytes a chip can hold over all its memory levels."""
    return hw.sram_size + jnp.sum(hw.mem_size)
