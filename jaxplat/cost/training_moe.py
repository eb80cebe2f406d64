"""MoE layers in a training step (`cost.training`): where the experts sit
(MoE parallel folding: expert tensor parallelism below tp) and how the
token dispatcher moves each token copy (Megatron-Core's all-to-all
dispatcher and the fused DeepEP/HybridEP ones), as changes to the forward
table's dispatch, combine and permutation rows."""

import dataclasses

import jax.numpy as jnp
import numpy as np

from jaxplat.cost.operators import OpTable
from jaxplat.model import Model, Parallel, replace


def fold_experts(par: Parallel, etp) -> Parallel:
    """`par` with its experts folded over the tp ranks at expert tensor-parallel
    degree `etp` (MoE parallel folding, `folded_experts`): `par.ep` counts
    every expert-parallel rank, as Megatron-Core's expert_model_parallel_size
    does; the result has Parallel.moe_ep = tp/etp and the table's ep =
    ep/moe_ep (at least 1). etp = tp leaves `par` as it is."""
    moe_ep = par.tp / etp
    return replace(par, moe_ep=moe_ep, ep=jnp.maximum(par.ep / moe_ep, 1.0))


def fold_valid(par: Parallel, etp):
    """Whether `fold_experts(par, etp)` describes a layout: tp/etp is a whole
    number and divides `par.ep` (every expert-parallel rank counted, as
    Megatron-Core's expert_model_parallel_size: ep·etp ranks hold one copy
    of the experts, the tp ranks' tp/etp slices of them included)."""
    fold = par.tp / etp
    return (fold >= 1.0) & (fold == jnp.round(fold)) & (par.ep / fold == jnp.round(par.ep / fold))


def moe_dispatch(t: OpTable, model: Model, par: Parallel, twl, dispatcher: str) -> OpTable:
    """The routed experts' token movement as Megatron-Core moves it in
    training. Both dispatchers send the layer's 16-bit hidden states: a
    low-precision recipe quantizes them inside Transformer Engine's grouped
    linear layers, after dispatch (the casts are `training._scaling_time`'s), where
    the inference table dispatches at the GEMM input's width (DeepEP's FP8
    dispatch). "alltoall" (MoEAlltoAllTokenDispatcher): permute,
    all_to_all, then sort_chunks_by_idxs when a rank holds more than one
    expert, and the mirror image to combine; per copy of a token's hidden
    state the permute and the sort each read and write 16 bits, the unsort
    too, and the unpermute reads 16 bits (the down GEMMs' outputs) to write
    each token's sum. "fused" (the flex dispatcher on DeepEP or HybridEP):
    the communication kernels permute as they send and receive, so no
    pass of its own."""
    if "moe_permute" not in t.names:  # a dense model, or an MoE without the elementwise passes (GenZ)
        return t
    wide = jnp.maximum(twl.bytes_act, 2.0)
    up = wide / twl.bytes_act  # the table's GEMM-input width -> 16 bits
    perm, fin = (np.array([t.names.index(n)]) for n in ("moe_permute", "moe_finalize"))
    comm_b = t.comm_b.at[np.array([t.names.index("dispatch")])].multiply(up)
    if dispatcher == "fused":
        rows = np.concatenate([perm, fin])
        return dataclasses.replace(t, f0=t.f0.at[rows].set(0.0), a0=t.a0.at[rows].set(0.0),
                                   o0=t.o0.at[rows].set(0.0), comm_b=comm_b)
    # sort_chunks_by_idxs runs when a rank holds more than one expert
    sort = jnp.where(model.experts / (par.ep * par.moe_ep) > 1.0, 1.0, 0.0)
    copies16 = t.a0[perm]  # the permute reads each copy's 16-bit hidden state
    a0 = t.a0.at[perm].set(copies16 * (1.0 + sort)).at[fin].set(t.a0[fin] * up + sort * copies16)
    o0 = t.o0.at[perm].set(t.o0[perm] * up * (1.0 + sort)).at[fin].add(sort * copies16)
    return dataclasses.replace(t, a0=a0, o0=o0, comm_b=comm_b)


def folded_experts(t: OpTable, par: Parallel) -> OpTable:
    """MoE parallel folding (Megatron-Core's expert_tensor_parallel_size
    etp below tp; Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960):
    with `Parallel.moe_ep` = tp/etp > 1 the experts are split over the tp
    ranks too (the table's moe_ep: E/(ep·moe_ep) experts per chip, each
    1/etp wide) and each rank dispatches the copies of its own
    sequence-parallel shard (tokens/tp x k, as the table counts them) to
    the whole expert group, ep·moe_ep ranks whose etp-rank slices are
    consecutive (the MoE group order tp-ep-dp-pp, expert TP innermost):
    dispatch and combine over ep·moe_ep ranks at stride etp, and the
    MoE block's TP collectives over the etp ranks only (none at etp 1: the
    combine returns each token to its shard). moe_ep 1: the table as built."""
    fold = par.moe_ep > 1.0
    etp = par.tp / par.moe_ep
    a2a = np.array([t.names.index(n) for n in ("dispatch", "combine")])
    ffn = np.array([t.names.index("ffn_allreduce")]) if "ffn_allreduce" in t.names else np.zeros(0, np.int64)
    comm_n = t.comm_n.at[a2a].set(jnp.where(fold, t.comm_n[a2a] * par.moe_ep, t.comm_n[a2a]))
    comm_s = t.comm_s.at[a2a].set(jnp.where(fold, etp, t.comm_s[a2a]))
    comm_n = comm_n.at[ffn].set(jnp.where(fold, etp, comm_n[ffn]))
    return dataclasses.replace(t, comm_n=comm_n, comm_s=comm_s)


__all__ = ["fold_experts", "fold_valid", "folded_experts", "moe_dispatch"]
