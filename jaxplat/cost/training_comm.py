"""The collectives of a training step (`cost.training`): each call's time
from `collectives.collective_time` and the stack's fixed cost, split over
the network levels; the table rows' TP, EP and PP collectives of one
micro-batch and the part of them overlap hides (TP beside the GEMMs each is
fused with); the fused MoE dispatchers' two-level all-to-all; the
data-parallel gradient and weight collectives of each ZeRO stage (see
`cost.training`'s module doc)."""

import jax.numpy as jnp
import numpy as np

from jaxplat.cost import efficiency
from jaxplat.cost import training_memory as tm
from jaxplat.cost.collectives import collective_time, flat_ring_affine, level_times, times_and_levels
from jaxplat.cost.operators import OpTable
from jaxplat.cost.opkind import names_mask
from jaxplat.cost.roofline import safe_div
from jaxplat.model import Hardware

BUCKET_PARAMS = 4.0e7  # Megatron-Core DistributedDataParallel: bucket_size = max(4e7, 1e6 x dp) parameters
BUCKET_PARAMS_PER_RANK = 1.0e6
CE_STATS_BYTES = 12.0     # per token: max, sum of exponentials and the target logit, fp32 (vocab-parallel CE)

# The GEMMs each TP collective row runs beside when TP communication is overlapped (Megatron-Core /
# Transformer Engine tp_comm_overlap, TorchTitan's async TP): (first, last) — the all-gather before a
# sublayer decomposed into its first, column-parallel GEMMs, the reduce-scatter (or all-reduce) after it
# into its last, row-parallel one (Wang et al. ASPLOS'23, "Overlap Communication with Dependent Computation
# via Decomposition"). The head's all-gather (with SP) runs beside the head's GEMM.
TP_OVERLAP_GEMMS = {
    "attn_allreduce": (("qkv", "q_a", "kv_a"), ("out_proj",)),
    "ffn_allreduce": (("up_gate", "shared_up_gate", "experts_up_gate"), ("down", "shared_down", "experts_down")),
    "mamba_allreduce": (("ssm_in_proj",), ("ssm_out_proj",)),
    "ssm_x_allreduce": ((), ("ssm_x_proj",)),
}


def exposed(c, ov, window):
    """Seconds of c s of collectives left showing when a share `ov` of them
    runs beside `window` s of compute: the rest, and what outlasts the window."""
    return c - ov * jnp.minimum(c, window)


def ring_collective(hw, n, payloads, stride, opts, u):
    """[(seconds, [levels] seconds)] of `u` calls of one all-gather or
    reduce-scatter per payload (the payload split evenly over the calls) as
    NCCL runs them: rings over all n ranks (`collectives.flat_ring_affine`:
    a latency linear in n where the hierarchical form's grows with the
    levels only), each call paying the stack's fixed cost too."""
    lat, per_byte = flat_ring_affine("allgather", hw, n, stride)  # reduce-scatter: the same ring, reversed
    fixed = jnp.where(n > 1.0, efficiency.collective_latency(hw, opts), 0.0)
    u = jnp.broadcast_to(u, fixed.shape)
    out = []
    for b in payloads:
        lv = u[:, None] * lat + per_byte * b[:, None]
        t = jnp.sum(lv, axis=-1) + u * fixed
        out.append((t, lv * safe_div(t, jnp.sum(lv, axis=-1))[:, None]))  # the calls' fixed cost pro rata
    return out


def step_calls(t: OpTable, hw: Hardware, par, twl, topts, dense, expert, top_k) -> dict:
    """name -> (kind, n, payload, stride, launch): the calls of a training
    step that run a collective algorithm (all but the pipeline's sends,
    `send_comm`, and the data-parallel rings), made as the functions below use them (`costs`
    there): "tp0"/"tp1" the layer collectives of `tp_comm`, "embedding",
    "ce", "head" its other rows; "ep" the all-to-all (or "ep_inter" and
    "ep_intra", `fused_ep_comm`'s two), "cp" ring attention's gathers;
    "dp_ar" and "dp_rep" `dp_comm`'s all-reduces. A row call is absent when
    the table has no such row."""
    sp = topts.sequence_parallel
    calls = {}

    def rows(key, names, kind, nbytes=None):
        idx = _row_index(t, names)
        if idx.size:
            b = t.comm_b[idx] if nbytes is None else nbytes
            calls[key] = (kind, t.comm_n[idx], b, t.comm_s[idx], True)

    idx = np.array([t.names.index(n) for n in TP_OVERLAP_GEMMS if n in t.names])  # in `tp_comm`'s order
    for side, kind in enumerate(("allgather", "reducescatter") if sp else (None, "allreduce")):
        if kind is not None:
            calls[f"tp{side}"] = (kind, t.comm_n[idx], t.comm_b[idx], t.comm_s[idx], True)
    rows("embedding", ("embedding_allreduce",), "reducescatter" if sp else "allreduce")
    head = np.array([t.names.index("lm_head")])
    rows("ce", ("lm_head_allgather",), "allreduce", nbytes=t.m[head] * CE_STATS_BYTES)
    if sp:  # the head's input, gathered from the sequence-parallel shards (the FFN's hidden states)
        rows("head", ("lm_head_allgather",), "allgather", nbytes=t.comm_b[np.array([t.names.index("ffn_allreduce")])])
    if topts.moe_dispatcher == "fused" and "dispatch" in t.names:
        calls.update(_fused_ep_calls(t, hw, top_k))
    else:
        rows("ep", ("dispatch", "combine"), "alltoall")
    rows("cp", ("cp_kv_allgather",), "allgather")
    n, stride, _, grads, _, sh = _dp_groups(par, twl, dense, expert)
    calls["dp_ar"] = ("allreduce", n, grads, stride, True)
    calls["dp_rep"] = ("allreduce", safe_div(n, sh), safe_div(grads, sh), stride * sh, True)
    return calls


def call_costs(calls: dict, hw: Hardware, opts, p) -> dict:
    """name -> (seconds, [levels] seconds) of each call of `step_calls`
    (`collectives.times_and_levels` plus each call's fixed software cost
    unless its `launch` is False, a phase of a kernel launched already;
    shaped as its broadcast n, payload and stride),
    the calls of one kind costed together: one `times_and_levels` for all
    of them, so a step's program holds one copy of the algorithms per kind
    rather than one per call (a smaller program; the same per-element
    formulas)."""
    out = {}
    for kind in dict.fromkeys(c[0] for c in calls.values()):
        names = [k for k, c in calls.items() if c[0] == kind]
        shapes = [jnp.broadcast_shapes(*(jnp.shape(x) for x in calls[k][1:4])) for k in names]
        flat = lambda i: jnp.concatenate([jnp.broadcast_to(jnp.asarray(calls[k][i], jnp.float32), sh).reshape(-1)  # noqa: E731
                                          for k, sh in zip(names, shapes)])
        launch = np.concatenate([np.full(int(np.prod(sh)), bool(calls[k][4])) for k, sh in zip(names, shapes)])
        n = flat(1)
        (t, lv), = times_and_levels(kind, hw, n, [flat(2)], p, flat(3))
        t, lv = _with_launch(t, lv, n, jnp.where(launch, efficiency.collective_latency(hw, opts), 0.0))
        ends = np.cumsum([int(np.prod(sh)) for sh in shapes])
        for k, sh, tk, lk in zip(names, shapes, jnp.split(t, ends[:-1]), jnp.split(lv, ends[:-1])):
            out[k] = (tk.reshape(sh), lk.reshape(sh + (lv.shape[-1],)))
    return out


def _with_launch(t, lv, n, fixed):
    """(seconds, [.., levels] seconds) of calls of α-β time t and per-level
    times lv with each call's fixed software cost (on groups of n > 1), split
    over the levels in proportion to lv (the first level where lv is 0)."""
    t = t + jnp.where(n > 1.0, fixed, 0.0)
    tot = jnp.sum(lv, axis=-1, keepdims=True)
    first = (jnp.arange(lv.shape[-1]) == 0).astype(lv.dtype)
    share = jnp.where(tot > 0, lv / jnp.where(tot > 0, tot, 1.0), first)
    return t, t[:, None] * share


def _row_index(t: OpTable, names) -> np.ndarray:
    """Static indices of the table's rows named in `names`, in table order."""
    return np.array([i for i, nm in enumerate(t.names) if nm in names], np.int64)


def _weighted(costs: dict, key, t: OpTable, names, w, hw: Hardware):
    """(s, [levels] s) of the call `key` of `call_costs` on the rows `names`,
    weighted by w (0 when the table has none of them)."""
    if key not in costs:
        return jnp.float32(0.0), jnp.zeros_like(hw.network.bandwidth)
    idx, (s, levels) = _row_index(t, names), costs[key]
    return jnp.sum(w[idx] * s), jnp.sum(w[idx][:, None] * levels, axis=0)


def send_comm(t: OpTable, hw: Hardware, w, opts, p, scale):
    """(s, [levels] s) of the pipeline's stage sends (the rows "stage_send",
    their payload x scale), weighted by w: one message at one level, no
    algorithm to choose (collectives.collective_time, level_times), each
    call paying the stack's fixed cost."""
    idx = _row_index(t, ("stage_send",))
    if not idx.size:
        return jnp.float32(0.0), jnp.zeros_like(hw.network.bandwidth)
    n, b, s = (jnp.asarray(x, jnp.float32) for x in (t.comm_n[idx], t.comm_b[idx] * scale, t.comm_s[idx]))
    c, levels = _with_launch(collective_time("sendrecv", hw, n, b, p, s), level_times("sendrecv", hw, n, b, s), n,
                             efficiency.collective_latency(hw, opts))
    return jnp.sum(w[idx] * c), jnp.sum(w[idx][:, None] * levels, axis=0)


def fused_ep_comm(t: OpTable, hw: Hardware, w, costs: dict):
    """(s, [levels] s) of the EP dispatch and combine rows on a fused
    dispatcher, sent as DeepEP's normal kernels and HybridEP send them: a
    token crosses the scale-out network once per remote node that holds one
    of its experts (to the GPU of its own local rank there), and NVLink
    forwards it inside that node to each GPU holding one (DeepEP README,
    normal kernels: NVLink and RDMA forwarding; DeepSeek-V3 report, Sec.
    3.2.2), where the plain all-to-all sends every copy to its rank. With a
    row's n EP ranks (stride s) in groups of g inside the first network
    level's domain, N = n/g nodes, and a token's k experts uniform over them,
    it reaches (N - 1)(1 - (1 - 1/N)^k) remote nodes in expectation
    (choices with replacement: a slight over-count when k nears the experts
    of a node). Two all-to-alls: over the N nodes (stride s·g) with those
    bytes per token, then over the g ranks of a node with every copy. On one
    node it is the plain all-to-all. `costs`: `call_costs` of the step's
    calls ("ep_inter" and "ep_intra": `_fused_ep_calls`)."""
    idx = _ep_rows(t)
    (s1, l1), (s2, l2) = costs["ep_inter"], costs["ep_intra"]
    return jnp.sum(w[idx] * (s1 + s2)), jnp.sum(w[idx][:, None] * (l1 + l2), axis=0)


def _ep_rows(t: OpTable) -> np.ndarray:
    """Static indices of the dispatch and combine rows, in that order: the calls of `_fused_ep_calls`
    and the weights `fused_ep_comm` applies to them must name the same rows in the same order."""
    return np.array([t.names.index(n) for n in ("dispatch", "combine")])


def _fused_ep_calls(t: OpTable, hw: Hardware, top_k) -> dict:
    """The two all-to-alls of `fused_ep_comm` (`step_calls` entries)."""
    idx = _ep_rows(t)
    n, s, b = t.comm_n[idx], t.comm_s[idx], t.comm_b[idx]
    g = jnp.clip(hw.network.domain[0] / s, 1.0, n)
    nodes = n / g
    remote = (nodes - 1.0) * (1.0 - (1.0 - safe_div(1.0, nodes)) ** top_k)
    # An all-to-all's payload is what one rank sends to all n ranks, its own share included: (N-1)/N of it
    # crosses, so tokens x remote nodes x hidden state crossing is a payload of that x N/(N-1).
    inter = safe_div(safe_div(b, top_k) * remote * nodes, nodes - 1.0)
    return {"ep_inter": ("alltoall", nodes, inter, s * g, False),  # one kernel does both
            "ep_intra": ("alltoall", g, b, s, True)}


def _dp_groups(par, twl, dense, expert):
    """([2] group sizes, strides, parameters, gradient bytes and weight bytes
    of the dense and the expert parameters' data-parallel groups, [2] state
    groups): `dp_comm`'s groups (`training_memory.shard_groups`)."""
    # dense over dp·cp at stride tp (ranks: tp, cp, dp); experts over dp·cp/ep at stride tp·ep (Megatron-Core
    # orders the expert ranks etp-ep-edp over the same tp·cp·dp ranks: its expert rank generator has no cp)
    n = jnp.stack(tm.shard_groups(par))
    params = jnp.stack([dense, expert])
    return (n, jnp.stack([par.tp, par.tp * par.ep]), params, params * twl.bytes_grad_comm, params * twl.bytes_param,
            jnp.stack(tm.state_groups(par, twl.dp_shard)))


def dp_comm(hw, par, twl, dense, expert, t_fwd, t_bwd, opts, units, costs):
    """(total s per step, exposed s per step, exposed [levels] per step,
    exposed s per micro-batch (ZeRO 3)) of the data-parallel collectives,
    over the groups of `training_memory.shard_groups`. `units`: the FSDP
    units a ZeRO-3 rank gathers and reduces one by one (its layers).
    `costs`: `call_costs` of the step's calls ("dp_ar", "dp_rep")."""
    # Calls: ZeRO 3 gathers and reduces one FSDP unit at a time (one per transformer block: the auto-wrap policy
    # of PyTorch FSDP, Zhao et al., VLDB 2023); ZeRO 1/2 in buckets of max(4e7, 1e6·dp) parameters (Megatron-Core
    # DistributedDataParallel's default bucket size). Each call pays the ring's latency (ring_collective).
    n, stride, params, grads, weights, sh = _dp_groups(par, twl, dense, expert)
    # ZeRO 0: NCCL's all-reduce (its tree's latency grows with log n: the hierarchical form holds it)
    ar = costs["dp_ar"]
    z = twl.zero
    # ZeRO 1-3 shard over the state groups (the whole group, or HSDP's shard groups: the replicas, n / shard
    # of them at stride x shard, all-reduce their gradient shards once per step, as ZeRO 0 does the whole:
    # "dp_rep")
    buckets = jnp.ceil(safe_div(params, jnp.maximum(BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK * n)))
    calls = jnp.where(params > 0, jnp.where(z >= 2.5, jnp.maximum(units, 1.0), buckets), 0.0)  # none without experts
    rs, ag = ring_collective(hw, sh, [grads, weights], stride, opts, calls)
    rep = costs["dp_rep"]
    has = (params > 0).astype(jnp.float32)  # a group without parameters (a dense model's experts) calls nothing
    tot = lambda c: (jnp.sum(has * c[0]), jnp.sum(has[:, None] * c[1], axis=0))  # noqa: E731
    (t_ar, l_ar), (t_rs, l_rs), (t_ag, l_ag), (t_rep, l_rep) = tot(ar), tot(rs), tot(ag), tot(rep)
    ov = jnp.clip(twl.dp_overlap, 0.0, 1.0)
    hide = lambda c, window: exposed(c, ov, window)  # noqa: E731
    # ZeRO 0: all-reduce; 1/2: reduce-scatter (+ the replicas' all-reduce) + all-gather, once per step.
    grad_t = jnp.where(z < 0.5, t_ar, t_rs + t_rep)
    grad_l = jnp.where(z < 0.5, l_ar, l_rs + l_rep)
    step_ag = jnp.where(z < 0.5, 0.0, 1.0)
    once_total = grad_t + step_ag * t_ag
    once_exp = hide(grad_t, t_bwd) + step_ag * hide(t_ag, t_fwd)
    once_lv = safe_div(hide(grad_t, t_bwd), grad_t) * grad_l + step_ag * safe_div(hide(t_ag, t_fwd), t_ag) * l_ag
    # ZeRO 3 (FSDP): per micro-batch, gather before forward and backward, reduce-scatter the gradients;
    # once per step the replicas' all-reduce (HSDP; none without replicas).
    mb_total = 2.0 * t_ag + t_rs
    mb_exp = hide(t_ag, t_fwd) + hide(t_ag + t_rs, t_bwd)
    mb_lv = safe_div(mb_exp, mb_total) * (2.0 * l_ag + l_rs)
    fsdp = z >= 2.5
    rep_exp = hide(t_rep, t_bwd)
    return (jnp.where(fsdp, t_rep, once_total), jnp.where(fsdp, rep_exp, once_exp),
            jnp.where(fsdp, safe_div(rep_exp, t_rep) * l_rep, once_lv),
            jnp.where(fsdp, mb_total, 0.0), jnp.where(fsdp, mb_exp, 0.0), jnp.where(fsdp, mb_lv, 0.0))


def _tp_windows(t: OpTable, w, per_row, names, side):
    """[len(names)] s: the GEMMs each TP collective row of `names` runs beside
    (TP_OVERLAP_GEMMS[name][side]: 0 the first GEMMs, 1 the last), their
    `per_row` seconds on the rank per execution of the collective."""
    pairs = jnp.asarray(np.array([names_mask(t, TP_OVERLAP_GEMMS[n][side]) for n in names]))  # [names, rows]
    idx = np.array([t.names.index(n) for n in names])
    return safe_div(pairs @ (w * per_row), w[idx])


def tp_comm(t, hw, par, w, rec_full, topts, gemm_fwd, gemm_bwd, costs):
    """(total s, exposed s, [levels] s before overlap) of one micro-batch's TP
    collectives on the rank. Each layer collective runs beside the GEMMs it
    is fused with (TP_OVERLAP_GEMMS), a share `Parallel.overlap` of it
    decomposed into tp chunks of which one cannot overlap: exposed
    max(c - g·(tp - 1)/tp, 0) beside g s of GEMMs. Forward (and full
    recompute): the all-gather beside the first GEMMs, the reduce-scatter
    (all-reduce without SP) beside the last; backward: their conjugates
    beside the same GEMMs' gradients, and with `TrainOptions.sp_regather`
    the first GEMMs' (and the head's) input all-gathered again for their
    weight gradients beside them (Megatron-Core's
    LinearWithGradAccumulationAndAsyncCommunication.backward: the gather
    beside the data-gradient GEMM, the reduce-scatter beside the weight
    gradient's). The embedding's collective and the cross-entropy
    statistics have no GEMM beside them: exposed. `costs`: `call_costs`
    of the step's calls ("tp0", "tp1", "embedding", "ce", "head")."""
    sp = topts.sequence_parallel
    ov = jnp.clip(par.overlap, 0.0, 1.0)
    chunk = safe_div(par.tp - 1.0, par.tp)
    beside = lambda c, g: exposed(c, ov, chunk * g)  # noqa: E731  (c s of a collective beside g s of GEMMs)

    names = [n for n in TP_OVERLAP_GEMMS if n in t.names]
    idx = np.array([t.names.index(n) for n in names])
    kinds = ("allgather", "reducescatter") if sp else (None, "allreduce")
    regather = float(sp and topts.sp_regather)  # a second all-gather in the backward of each gathered input
    tot, exp, lv = 0.0, 0.0, 0.0
    for side, kind in enumerate(kinds):
        if kind is None:
            continue
        c, levels = costs[f"tp{side}"]
        g_f, g_b = (_tp_windows(t, w, x, names, side) for x in (gemm_fwd, gemm_bwd))
        wi = w[idx]
        bwd = 1.0 + (regather if side == 0 else 0.0)  # collectives of this row in the backward
        tot = tot + (1.0 + bwd + rec_full) * jnp.sum(wi * c)
        exp = exp + jnp.sum(wi * ((1.0 + rec_full) * beside(c, g_f) + beside(bwd * c, g_b)))
        lv = lv + (1.0 + bwd + rec_full) * jnp.sum(wi[:, None] * levels, axis=0)
    head = np.array([t.names.index("lm_head")])
    emb = _weighted(costs, "embedding", t, ("embedding_allreduce",), w, hw)
    ce = _weighted(costs, "ce", t, ("lm_head_allgather",), w, hw)
    tot, exp, lv = tot + 2.0 * emb[0] + ce[0], exp + 2.0 * emb[0] + ce[0], lv + 2.0 * emb[1] + ce[1]
    if sp:  # the head's input, gathered from the sequence-parallel shards (the FFN's hidden states)
        g, g_lv = _weighted(costs, "head", t, ("lm_head_allgather",), w, hw)
        wins = [jnp.sum(w[head] * x[head]) for x in (gemm_fwd, gemm_bwd)]  # the head's GEMM on the rank
        n = 2.0 + regather
        tot, exp, lv = tot + n * g, exp + beside(g, wins[0]) + beside((n - 1.0) * g, wins[1]), lv + n * g_lv
    return tot, exp, lv


def micro_batch_comm(t, hw, par, w, rec_full, topts, p, attn, windows, gemms, ep_overlap, costs):
    """{"tp", "cp", "ep", "pp"}: (total s, exposed [levels] s) per
    micro-batch on the busiest rank (module doc). TP: `tp_comm` beside the
    GEMMs of `gemms` ([rows] forward and backward s per execution).
    `attn`: (forward, backward) s of the attention core, which ring
    attention's K/V passes run beside. `windows`: the compute seconds of
    the micro-batch's forward, backward and recompute that PP sends (a
    share `Parallel.overlap`: overlapped P2P) and EP all-to-alls (a share
    `ep_overlap`, TrainWorkload.ep_overlap) run beside, each against the
    pass's compute. `costs`: `call_costs` of the step's calls (`step_calls`)."""
    opts = topts.options
    tp_tot, tp_exp, lv_tp = tp_comm(t, hw, par, w, rec_full, topts, *gemms, costs)
    if topts.moe_dispatcher == "fused" and "dispatch" in t.names:
        ep, lv_ep = fused_ep_comm(t, hw, w, costs)
    else:
        ep, lv_ep = _weighted(costs, "ep", t, ("dispatch", "combine"), w, hw)
    # Each tp rank sends 1/tp of the activations: its sequence-parallel shard, or without SP Megatron's
    # scatter/gather optimization (Narayanan et al. SC'21 Sec. 4.1; the NVLink all-gather after it is left out).
    send_scale = 1.0 / par.tp
    pp, lv_pp = send_comm(t, hw, w, opts, p, send_scale)
    # Per pass: forward, backward (the gradients' sends), full recompute.
    ov, ov_ep = jnp.clip(par.overlap, 0.0, 1.0), jnp.clip(ep_overlap, 0.0, 1.0)
    pps = (pp, pp, jnp.zeros_like(pp))  # full recompute sends nothing
    share_pp = safe_div(sum(exposed(c, ov, win) for c, win in zip(pps, windows)), sum(pps))
    eps = (ep, ep, rec_full * ep)
    share_ep = safe_div(sum(exposed(c, ov_ep, win) for c, win in zip(eps, windows)), sum(eps))
    out = {"tp": (tp_tot, safe_div(tp_exp, tp_tot) * lv_tp),
           "ep": ((2.0 + rec_full) * ep, share_ep * (2.0 + rec_full) * lv_ep),
           "pp": (2.0 * pp, share_pp * 2.0 * lv_pp)}
    cp, lv_cp = _weighted(costs, "cp", t, ("cp_kv_allgather",), w, hw)
    cp_total = (3.0 + rec_full) * cp  # K/V forward, K/V and their gradients backward
    cp_exposed = jnp.maximum(cp - attn[0], 0.0) * (1.0 + rec_full) + jnp.maximum(2.0 * cp - attn[1], 0.0)
    out["cp"] = (cp_total, safe_div(cp_exposed, cp) * lv_cp)
    return out


__all__ = ["BUCKET_PARAMS", "BUCKET_PARAMS_PER_RANK", "CE_STATS_BYTES", "TP_OVERLAP_GEMMS", "call_costs", "dp_comm",
           "exposed", "fused_ep_comm", "micro_batch_comm", "ring_collective", "send_comm", "step_calls", "tp_comm"]
