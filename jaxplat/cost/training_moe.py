"""MoE layers in a training step (`cost.training`): where the experts sit
(MoE parallel folding: expert tensor parallelism below tp) and how the
token dispatcher moves each token copy (Megatron-Core's all-to-all
dispatcher and the fused DeepEP/HybridEP ones), as changes to the forward
table's dispatch, combine and permutation rows; the host time a MoE layer
leaves exposed (`moe_host_time`)."""

import dataclasses

import jax.numpy as jnp
import numpy as np

from jaxplat.cost.operators import OpTable
from jaxplat.cost.roofline import safe_div
from jaxplat.model import Model, Parallel, replace

# Host time a MoE layer exposes in Megatron-Core (eager PyTorch and Transformer Engine), per micro-batch, forward
# and backward: its dropless token dispatcher copies the token counts per expert to the host every layer (the
# all-to-all's split sizes and the grouped GEMMs' per-expert sizes are host lists: MoEAlltoAllTokenDispatcher
# .preprocess; Megatron-Core's inference dispatcher keeps them on the device "without host synchronization"),
# so the host cannot queue kernels ahead of that layer and the GPU waits while it issues them: a part per layer
# (router, aux loss, dispatch, norms, residuals) and a part per expert the chip holds (its GEMMs, quantizations and
# their gradients: Transformer Engine's default grouped GEMM launches one GEMM per expert over several CUDA
# streams, and profiles of Megatron-LM on B-series chips show the GPU idle behind those launches). A PyTorch
# operator costs 5-25 us of host work (Python, autograd, ATen dispatch, cudaLaunchKernel). No microbenchmark or
# profile in the data gives these two numbers, so the 2x check against one cannot be made. Fitted on the Qwen3
# rows of the Megatron-Bridge dev tables and judged on the DeepSeek-V3 ones (data/measured/training_split.yaml,
# experiments/training/fit_moe_host.py: grid 0.1 ms x 5 us; within 5% of its objective 1.8-2.1 ms and 80-100 us;
# refitted after attention's diagonal tiles and 2-norm (2026-12-06, fifteenth session), was 2.0 ms and 90 us; refitted
# after the softmax's exponentials got their own time (2026-12-06), was 1.8 ms and 105 us; refitted
# after the inference calibration's compute / tile_latency pin of 2026-12-05, was 1.8 ms and 155 us, then
# 2.2 ms and 115 us until the rows' gradients were reduced in bf16 as their recipes set, then 2.1 ms and 125 us
# until Megatron's backward re-gather of sequence-parallel inputs was modelled, then 2.1 ms and 135 us until the
# chip's power limit (energy.clock_share) slowed the B200 rows, then 2.2 ms and 115 us until the activations
# outside low-precision GEMMs' inputs were made 16-bit and backward_efficiency refitted): 72-360 operators per
# layer and 4-21 launches per expert at 5-25 us each, counts of that order but not checked against a profile.
# A graph-captured or fused stack has less of it.
MOE_LAYER_HOST_S = 1.8e-3
MOE_EXPERT_HOST_S = 100e-6


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


def moe_dispatch(t: OpTable, model: Model, par: Parallel, dispatcher: str) -> OpTable:
    """The routed experts' token movement as Megatron-Core moves it in
    training, on a table whose activations are 16-bit (`training.forward_table`).
    Both dispatchers send the layer's 16-bit hidden states: a low-precision
    recipe quantizes them inside Transformer Engine's grouped linear layers,
    after dispatch (the casts are `training._scaling_time`'s), where the
    inference table dispatches at the GEMM input's width (DeepEP's FP8
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
    perm, fin = (np.array([t.names.index(n)]) for n in ("moe_permute", "moe_finalize"))
    if dispatcher == "fused":
        rows = np.concatenate([perm, fin])
        return dataclasses.replace(t, f0=t.f0.at[rows].set(0.0), a0=t.a0.at[rows].set(0.0),
                                   o0=t.o0.at[rows].set(0.0))
    # sort_chunks_by_idxs runs when a rank holds more than one expert
    sort = jnp.where(model.experts / (par.ep * par.moe_ep) > 1.0, 1.0, 0.0)
    copies16 = t.a0[perm]  # the permute reads each copy's 16-bit hidden state
    a0 = t.a0.at[perm].set(copies16 * (1.0 + sort)).at[fin].add(sort * copies16)
    o0 = t.o0.at[perm].set(t.o0[perm] * (1.0 + sort)).at[fin].add(sort * copies16)
    return dataclasses.replace(t, a0=a0, o0=o0)


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


def moe_host_time(t: OpTable, model: Model, par: Parallel, twl, w):
    """Seconds per micro-batch of host time the rank's MoE layers expose
    (`MOE_LAYER_HOST_S`): per MoE layer on the rank (the router row's
    executions in w [rows], the rank's executions of each row per
    micro-batch), twl.moe_layer_host_s plus twl.moe_expert_host_s per
    expert the chip holds, E / (ep·moe_ep) (twl: a TrainWorkload). 0
    without MoE layers."""
    if "router" not in t.names:
        return jnp.float32(0.0)
    layers = w[t.names.index("router")]
    local = safe_div(model.experts, par.ep * par.moe_ep)
    return layers * (twl.moe_layer_host_s + local * twl.moe_expert_host_s)


__all__ = ["MOE_EXPERT_HOST_S", "MOE_LAYER_HOST_S", "fold_experts", "fold_valid", "folded_experts", "moe_dispatch",
           "moe_host_time"]
