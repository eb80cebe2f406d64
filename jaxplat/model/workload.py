"""`Workload`: what is asked of the deployment (batch, lengths, dtypes, SLOs)."""

import jax
import jax.numpy as jnp

from jaxplat.model.pytree import pytree_dataclass


@pytree_dataclass
class Workload:
    """Float32 leaves, so batch and lengths can be swept and vmapped.

    Attributes:
      batch: sequences in flight per replica.
      prompt: prompt tokens per sequence.
      output: output tokens per sequence (the first comes from prefill).
      beams: beams per sequence (they share the prompt's KV cache).
      bytes_weight, bytes_act, bytes_kv: bytes per element of weights (as
        stored, with a block scale's share: units.WEIGHT_BYTES_PER_ELEMENT),
        activations and KV cache.
      compute_dtype: index into units.DTYPES of the dtype GEMMs run in.
      bytes_expert_weight: bytes per element of the routed experts' weights
        when a checkpoint stores them apart from the rest (gpt-oss: MXFP4
        experts, BF16 attention); 0: as `bytes_weight`. Their GEMMs still run
        in `compute_dtype`.
      ttft_slo, tpot_slo: service-level targets in seconds.
    """

    batch: jax.Array
    prompt: jax.Array
    output: jax.Array
    beams: jax.Array
    bytes_weight: jax.Array
    bytes_act: jax.Array
    bytes_kv: jax.Array
    compute_dtype: jax.Array
    ttft_slo: jax.Array
    tpot_slo: jax.Array
    bytes_expert_weight: jax.Array

    @property
    def bytes_experts(self):
        """Bytes per element of the routed experts' weights as stored:
        `bytes_expert_weight`, or `bytes_weight` where that is 0."""
        return jnp.where(self.bytes_expert_weight > 0, self.bytes_expert_weight, self.bytes_weight)
