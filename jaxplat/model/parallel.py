"""`Parallel`: how one model replica is split over chips (degrees are floats)."""

import dataclasses
import numbers

import jax
import jax.numpy as jnp

from jaxplat.model.pytree import pytree_dataclass


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
      pp: pipeline stages (layers split as evenly as possible; the stage
        with ceil(layers/pp) layers sets the pace).
      ep: expert parallel. The ep ranks run attention (and dense FFNs) data
        parallel, each on batch/ep sequences, and split the MoE experts
        (DeepSeek-V3's deployment, SGLang's DP attention; Megatron-Core's
        EP is carved from data parallelism the same way). Tokens reach their
        experts by all-to-all dispatch and come back by all-to-all combine.
      dp: data-parallel replicas (multiply throughput, not latency).
      cp: context parallel (Megatron-Core / NeMo `context_parallel_size`;
        this project's `sp` before, still accepted as `sp=` and readable as
        `.sp`): prefill splits the prompt over cp chips and all-gathers K/V
        (ring attention in training); decode splits the KV cache and merges
        the partial attention outputs with an all-reduce. Sequence
        parallelism as Megatron means it (norms and dropout split over the
        tp ranks, all-gather / reduce-scatter in place of all-reduce) is not
        a degree: training runs it whenever tp > 1.
      vp: virtual pipeline stages per pipeline rank (Megatron's interleaved
        1F1B, `virtual_pipeline_model_parallel_size`; 1 = plain 1F1B). Only
        training reads it: the bubble is (pp - 1) / (vp x micro-batches).
      microbatches: micro-batches the batch is split into (pipelining; 1 =
        the whole batch at once). The genz profile uses GenZ's own rule.
      overlap: fraction of communication run beside compute (0 = none,
        GenZ's assumption; 1 = all of it). Inference, as GenZ: that share
        costs no time. Training: it hides only up to the compute it runs
        beside (each TP collective beside the GEMMs it is fused with, one of
        tp chunks alone; PP sends beside the pass: `cost.training_comm`).
      imbalance: MoE load imbalance, tokens of the busiest expert-parallel
        rank over the mean (1 = perfectly balanced routing; no effect
        without expert parallelism, ep = moe_ep = 1, where every chip holds
        a slice of every expert).
      moe_ep: expert parallelism inside the tensor-parallel group, as
        engines run it with attention TP (TRT-LLM moe_expert_parallel_size,
        vLLM --enable-expert-parallel): the MoE experts are split moe_ep ways
        over the tp chips and each expert's width tp / moe_ep ways (MoE TP).
        Must divide tp and the experts. Attention stays TP over all tp chips.
      moe_gather: how tokens reach the experts of the ep ranks (ep > 1). 0:
        all-to-all, each token copy to the rank of its expert and back
        (DeepEP, wide EP; k copies per token). 1: every rank all-gathers the
        ep ranks' tokens and reduce-scatters the experts' outputs
        (TensorRT-LLM attention DP without its MNNVL all-to-all, the
        allgather/reducescatter path of its fused MoE; SGLang's DP attention
        without DeepEP): ep copies per token whatever the top-k, so for
        top-1 routing ep times the all-to-all's bytes, the same for k = ep.
    """

    tp: jax.Array = dataclasses.field(default_factory=_one)
    pp: jax.Array = dataclasses.field(default_factory=_one)
    ep: jax.Array = dataclasses.field(default_factory=_one)
    dp: jax.Array = dataclasses.field(default_factory=_one)
    cp: jax.Array = dataclasses.field(default_factory=_one)
    microbatches: jax.Array = dataclasses.field(default_factory=_one)
    overlap: jax.Array = dataclasses.field(default_factory=_zero)
    imbalance: jax.Array = dataclasses.field(default_factory=_one)
    moe_ep: jax.Array = dataclasses.field(default_factory=_one)
    moe_gather: jax.Array = dataclasses.field(default_factory=_zero)
    vp: jax.Array = dataclasses.field(default_factory=_one)

    @property
    def sp(self) -> jax.Array:
        """Context-parallel degree under its former name (`cp`)."""
        return self.cp

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, numbers.Number):
                object.__setattr__(self, f.name, jnp.float32(v))


def chips(p: Parallel) -> jax.Array:
    """Chips used by one deployment: the product of all degrees."""
    return p.tp * p.pp * p.ep * p.dp * p.cp


def stage_chips(p: Parallel) -> jax.Array:
    """Chips of one pipeline stage of one replica (tp x ep x cp)."""
    return p.tp * p.ep * p.cp


_init = Parallel.__init__


def _init_with_alias(self, *args, sp=None, **kwargs):
    # `sp=` was this project's name for context parallelism; users' scripts keep it.
    if sp is not None:
        if "cp" in kwargs:
            raise TypeError("Parallel: give cp (context parallel) or its former name sp, not both")
        kwargs["cp"] = sp
    _init(self, *args, **kwargs)


Parallel.__init__ = _init_with_alias
