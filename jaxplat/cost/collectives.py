"""Collective communication time on a hierarchy of network levels (α-β model).

Each network level l has a domain D_l (chips it connects), a per-chip
bandwidth β_l (bytes/s per direction, derated by efficiency.network), a latency α_l
(s per message step) and a topology (TOPOLOGIES). A group of n chips placed
on consecutive ranks joins f_l = min(n, D_l) / min(n, D_{l-1}) sub-groups at
level l (`level_factors`).

Algorithms (costs from the α-β analyses of Thakur, Rabenseifner & Gropp,
IJHPCA 2005, and Chan et al., CCPE 2007; tree: Sanders, Speck & Träff,
"Two-tree algorithms", Parallel Computing 2009, as in NCCL; Bruck et al.,
IEEE TPDS 1997 for the log-step all-to-all):
  ring      bandwidth-optimal; on a d-dimensional torus or mesh it runs
            dimension by dimension, so its latency is d(k-1) steps (k = f^(1/d))
            instead of f-1 (the TPU pattern, "How to Scale Your Model", ch. 3).
  tree      all-reduce in 2·log2(f) latency steps, the whole buffer twice
            through each chip (pipelined double binary tree).
  one-shot  every chip sends its buffer to every peer at once (one latency,
            f-1 times the bytes): wins for small messages (TRT-LLM one-shot
            all-reduce).
  nvls      all-reduce on a switch that reduces in the network (NVLink
            SHARP; a level with `switch_reduction`): each chip sends its
            buffer to the switch once and gets the sum back, so the bytes do
            not grow with the group (NVLS_BYTES).
  pairwise / Bruck   for all-to-all.
  direct    on a fully connected mesh of point-to-point links (AMD Infinity
            Fabric: each of 8 MI300X linked to each other by its own
            64 GB/s link, AMD CDNA 3 white paper), every peer is one link
            away and the f-1 links run at once: all-to-all sends bytes/f to
            each peer over its own link (one step); all-reduce is two-shot,
            a direct reduce-scatter then a direct all-gather (2 steps, 2
            bytes/f through each link; the all-pairs algorithm of MSCCL and
            TensorRT-LLM's two-shot all-reduce). All-gather and
            reduce-scatter run so as one-shot.
Each call takes the fastest algorithm (as NCCL's tuner does), or a smooth
minimum of them in smooth mode. On direct networks (ring, torus, mesh) bytes
that are not sent to a neighbour cross several links; the non-ring algorithms
pay the mean hop count as a bandwidth factor, and the 2D mesh halves the ring
bandwidth (no wrap-around links: a line emulates a ring over both directions).
On a fully connected mesh (`fully_connected`) a level's bandwidth is the
chip's aggregate over its D-1 links (D: the level's domain), one link
carries 1/(D-1) of it, and an algorithm is as fast as its busiest link: a
ring, a tree, pairwise and Bruck steps each use one link; one-shot and
direct spread their sends over f-1 links. A sub-group of f < D chips still
has one link per pair (a TP2 all-reduce on 8 MI300X runs at 64 GB/s, not
448).

Hierarchy: a group larger than the innermost domain runs the collective
hierarchically (reduce-scatter inside, the collective across on the reduced
shard, all-gather inside: Megatron-LM's and NCCL's 2D schemes), so level l
carries the payload left after the levels inside it; or flat, one ring over
the whole group at the outermost level's speed. The faster of the two is used.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.roofline import chosen_max, chosen_min, safe_div
from jaxplat.model import MAX_NET_LEVELS, TOPOLOGIES, Hardware

KINDS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")

GENZ_COLLECTIVE_OVERHEAD = 5e-6  # s; GenZ adds 5 µs to each AR/AG/A2A (CONVENTIONS.md)
UNBOUNDED_DOMAIN = 1e9  # chips; specs.py pads missing network levels with this domain
SMOOTH_MIN_P = 20.0  # p of the smooth minimum when none is given (<= k^(1/p) - 1 above the min of k)

# Dimensions of each topology (switch and ring are one-dimensional for the ring algorithm).
_DIMS = {"switch": 1.0, "ring": 1.0, "torus2d": 2.0, "torus3d": 3.0, "mesh2d": 2.0, "fully_connected": 1.0}


def level_factors(hw: Hardware, n: jax.Array, stride=1.0) -> jax.Array:
    """[..., MAX_NET_LEVELS] chips of a group of `n` (shape [...]) that each
    level joins.

    The group's members are `stride` ranks apart (ranks fill the innermost
    domain first; tensor parallel is innermost, stride 1). Level l holds
    r_l = min(n, max(D_l / stride, 1)) members, so it joins f_l = r_l / r_{l-1}
    sub-groups (r_{-1} = 1) and the product of the factors is n.
    """
    reach, below = reach_levels(hw, n, stride)
    return jnp.maximum(reach / below, 1.0)


def reach_levels(hw: Hardware, n, stride=1.0):
    """[..., levels] members of the group within level l's domain, and within l-1's."""
    n, stride = jnp.broadcast_arrays(jnp.asarray(n, jnp.float32), jnp.asarray(stride, jnp.float32))
    reach = jnp.minimum(n[..., None], jnp.maximum(hw.network.domain / stride[..., None], 1.0))
    below = jnp.concatenate([jnp.ones_like(reach[..., :1]), reach[..., :-1]], axis=-1)
    return reach, below


def chips_available(hw: Hardware) -> jax.Array:
    """Chips in the system: the outermost declared network domain.

    Padded levels (domain >= UNBOUNDED_DOMAIN) do not count, so a spec whose
    outermost level is a 256-GPU pod offers 256 chips.
    """
    real = hw.network.domain < UNBOUNDED_DOMAIN
    return jnp.where(jnp.any(real), chosen_max(jnp.where(real, hw.network.domain, 1.0), -1), UNBOUNDED_DOMAIN)


def smooth_min(times, p=SMOOTH_MIN_P):
    """Smooth minimum of non-negative times along axis 0: their average
    weighted by t^-p (a softmin over log-times with temperature 1/p).

    A convex combination, so never below the minimum (an upper bound, like
    the p-norm smooth max of roofline.smooth_max); it tends to the minimum as
    p grows and equals it at ties or when one time is far below the others
    (at most ~1/(e·p) above it in between). 0 when any time is 0.
    Scale-free and gradient-safe (both sides of each `where` guarded).
    """
    # The result does not depend on m (it cancels between the sums), so m
    # carries no derivative: jnp.min's own can be NaN (roofline.chosen_max).
    m = jax.lax.stop_gradient(jnp.min(times, axis=0))
    ok = m > 0
    ms = jnp.where(ok, m, 1.0)
    ts = jnp.where(ok, times, 1.0)
    u = (ms / ts) ** p  # 1 for the minimum, -> 0 for slower algorithms
    return jnp.where(ok, jnp.sum(u * ts, axis=0) / jnp.sum(u, axis=0), 0.0)


def _pick(times, p):
    """Minimum over algorithms: exact (p None), or `smooth_min` of sharpness p."""
    times = jnp.stack(times)
    if p is None:
        return chosen_min(times, 0)  # not jnp.min: its derivative can be NaN (roofline.chosen_max)
    return smooth_min(times, p)


# The one set of collective formulas (`_algorithm_coefficients`, combined
# with the links' latency and bandwidth in `_algorithm_times`), used by
# `collective_time`, `table_comm_times`, `level_times` and `describe`: every
# row, every network level (plus the flat form as one extra "level") and
# every algorithm a kind has, as [rows, levels + 1] arrays per algorithm, so
# a table's collectives trace to one small set of array ops.
_ALGS = ("ring", "tree", "oneshot", "pairwise", "bruck", "nvls", "direct")
_RUNS = {"allreduce": (1, 1, 1, 0, 0, 1, 1), "allgather": (1, 0, 1, 0, 0, 0, 0),
         "reducescatter": (1, 0, 1, 0, 0, 0, 0), "alltoall": (0, 0, 0, 1, 1, 0, 1)}
_NVLS = _ALGS.index("nvls")
_DIRECT = _ALGS.index("direct")  # only on a fully connected mesh (_algorithm_affine)
_FULLY_CONNECTED = float(TOPOLOGIES.index("fully_connected"))
# NVLS all-reduce: bytes through a link per byte of payload, at the link rate
# the ring reaches. On 8 H100s NCCL's ring all-reduce reaches a bus bandwidth
# of 365-370 GB/s at 2 to 8 GPUs and NVLS 480 GB/s at 8 (NVIDIA/nccl issue
# 1455; "algbw ~275 GB/s", nccl-tests issue 212): the ring moves
# 2(n-1)/n = 1.75 payloads per chip, so NVLS takes the time of
# 1.75 x 370 / 480 = 1.35 payloads whatever the group. So it beats the ring
# from 4 chips on (1.5 payloads), as NCCL's measurements show from 5.
NVLS_BYTES = 1.35
NVLS_STEPS = 2.0  # latency steps: to the switch, and the reduced result back
_NOT_RUN = 1e30  # s; a finite stand-in for algorithms a kind does not have (smooth_min stays NaN-free)
# Per topology (TOPOLOGIES order): dimensions, ring bandwidth factor, mean-hop divisor.
_TOPO_DIMS = np.array([_DIMS[t] for t in TOPOLOGIES], np.float32)
_TOPO_RBF = np.array([0.5 if t == "mesh2d" else 1.0 for t in TOPOLOGIES], np.float32)
_TOPO_HOPDIV = np.array([3.0 if t == "mesh2d" else 4.0 for t in TOPOLOGIES], np.float32)


def _select(table, i):
    """table[i] for an integer index array i (values in range), as a
    one-hot sum: element-wise operations, which the sweep engine maps over
    its grid by rule, where a gather falls back to jax.vmap (the training
    study's group sizes vary on the grid)."""
    table = jnp.asarray(table)
    return jnp.sum(jnp.where(i[..., None] == jnp.arange(table.shape[-1]), table, 0.0), axis=-1)


def _topology_terms_vec(topo, f):
    """(ring steps, ring bandwidth factor, mean hops) of f chips on each
    element's topology (topo: float index into TOPOLOGIES, gathered).

    Mean hop counts: switch 1; ring of f with both directions f/4; a torus of
    side k: k/4 per dimension; a line of k: ~k/3 per dimension (never < 1).
    """
    i = jnp.round(jnp.clip(topo, 0, len(TOPOLOGIES) - 1)).astype(jnp.int32)
    # (a fully connected mesh is one hop everywhere: its link split is in `_algorithm_coefficients`)
    d, rbf, div = _select(_TOPO_DIMS, i), _select(_TOPO_RBF, i), _select(_TOPO_HOPDIV, i)
    # k = f^(1/d): sqrt for d = 2 (exact on squares), exp/log for d = 3
    # (XLA:CPU runs `pow` as a scalar call, 4x the cost of exp and log).
    k = jnp.where(d == 1.0, f, jnp.where(d == 2.0, jnp.sqrt(f), jnp.exp(jnp.log(jnp.maximum(f, 1.0)) / 3.0)))
    switch = (i == TOPOLOGIES.index("switch")) | (i == TOPOLOGIES.index("fully_connected"))
    hops = jnp.where(switch, 1.0, jnp.maximum(d * k / div, 1.0))
    return d * (k - 1.0), rbf, hops


def _algorithm_grid(kinds: tuple, hw: Hardware, n, bytes_, stride):
    """[R, L + 1, A] seconds of R collectives (kinds static, none
    "sendrecv") at each network level of the hierarchical form (columns :L)
    and in the flat form (column L), per algorithm (_NOT_RUN where a kind
    has no such algorithm); also F [R, L + 1], the chips joined there, the
    level the flat form runs on [R], and the static indices into _ALGS of
    the A algorithms kept (those some kind in `kinds` runs).
    n, bytes_: [R] group sizes and payloads; stride: [R] rank strides.
    """
    times, F, lvl, algs = _algorithm_times(kinds, hw, n, bytes_, stride)
    return jnp.stack(times, axis=-1), F, lvl, algs


def _algorithm_times(kinds: tuple, hw: Hardware, n, bytes_, stride):
    """`_algorithm_grid` with the algorithms as a list of [R, L + 1] arrays.

    Every algorithm's time is affine in the latency and the inverse
    bandwidth, t = c_alpha·α + c_beta/β, with coefficients that depend only
    on the group (sizes, strides, domains, topologies); sweeps over link
    speeds reuse them. Reductions over algorithms run over this list (not
    over a short last axis, which XLA:CPU does not vectorize).
    """
    (fixed, per_byte), F, lvl, algs = _algorithm_affine(kinds, hw, n, stride)
    return [a + b * bytes_[:, None] for a, b in zip(fixed, per_byte)], F, lvl, algs


def kept_algorithms(kinds: tuple) -> tuple:
    """Indices into _ALGS of the algorithms some kind in `kinds` runs."""
    return tuple(a for a in range(len(_ALGS)) if any(_RUNS[k][a] for k in kinds))


def _algorithm_affine(kinds: tuple, hw: Hardware, n, stride):
    """Each algorithm's time as fixed + per_byte x payload: two lists (one
    [R, L + 1] array per kept algorithm, as `_algorithm_times`), F, lvl and
    the kept algorithms. The bytes through a link are linear in the payload
    (every coefficient of `_algorithm_coefficients` is), so rows that share
    a group (n, stride) and kind share these arrays whatever their payloads."""
    algs = kept_algorithms(kinds)
    coefs, F, lvl, fc = _algorithm_coefficients(kinds, hw, n, jnp.ones_like(n), stride)
    R, L = F.shape[0], F.shape[1] - 1
    inv_beta = safe_div(1.0, hw.network.bandwidth * hw.efficiency.network)  # 0 for a level without bandwidth
    alpha = jnp.concatenate([jnp.broadcast_to(hw.network.latency, (R, L)), _select(hw.network.latency, lvl)[:, None]],
                            axis=-1)
    inv_b = jnp.concatenate([jnp.broadcast_to(inv_beta, (R, L)), _select(inv_beta, lvl)[:, None]], axis=-1)
    fixed, per_byte = [], []
    for a in algs:
        c_alpha, c_beta = coefs[a]
        runs = np.array([_RUNS[k][a] for k in kinds], bool)[:, None]
        if a == _NVLS:  # only where the switch reduces (the flat form: at the level it runs on)
            reduce = hw.network.switch_reduction > 0.5
            runs = runs & jnp.concatenate([jnp.broadcast_to(reduce, (R, L)), _select(reduce, lvl)[:, None] > 0.5],
                                          axis=-1)
        if a == _DIRECT:  # only over point-to-point links to every peer
            runs = runs & fc
        fixed.append(jnp.where(runs, c_alpha * alpha, _NOT_RUN))
        per_byte.append(jnp.where(runs, c_beta * inv_b, 0.0))
    return (fixed, per_byte), F, lvl, algs


def _algorithm_coefficients(kinds: tuple, hw: Hardware, n, bytes_, stride):
    """Per algorithm of _ALGS, (latency steps, bytes through a link), each
    [R, L + 1] (see `_algorithm_grid`), the bytes in units of the level's
    whole bandwidth (on a fully connected mesh, links x the bytes through
    the busiest of its links); with F [R, L + 1], lvl [R] and fc [R, L + 1]
    (the level is a fully connected mesh)."""
    a2a = np.array([k == "alltoall" for k in kinds])
    reach, below = reach_levels(hw, n, stride)  # [R, L]
    f = jnp.maximum(reach / below, 1.0)
    # Payload at each level: what the levels inside left (bytes / Π_{j<l} f_j);
    # all-to-all: the bytes for peers first reached at level l (level_times).
    pay = None
    if not a2a.all():
        inner = jnp.concatenate([jnp.ones_like(f[:, :1]), jnp.cumprod(f[:, :-1], axis=-1)], axis=-1)
        pay = bytes_[:, None] / inner
    if a2a.any():
        crossing = safe_div(reach - below, n[:, None]) * bytes_[:, None]
        pay_a2a = safe_div(crossing * f, f - 1.0)
        pay = pay_a2a if pay is None else jnp.where(a2a[:, None], pay_a2a, pay)
    # The flat form as one more level: n chips at the outermost level reached.
    span = n * stride
    lvl = first_holding(hw, span)
    topo_flat = jnp.where(span > hw.network.domain[0], jnp.float32(TOPOLOGIES.index("switch")), hw.network.topology[0])
    R, L = f.shape
    F = jnp.concatenate([f, n[:, None]], axis=-1)  # [R, L + 1]
    P = jnp.concatenate([pay, bytes_[:, None]], axis=-1)
    topo = jnp.concatenate([jnp.broadcast_to(hw.network.topology, (R, L)), topo_flat[:, None]], axis=-1)
    steps, rbf, hops = _topology_terms_vec(topo, F)
    # Fully connected mesh: D - 1 links per chip, each 1/(D - 1) of the level's bandwidth
    # (the flat form is one only inside level 0's domain, topo_flat).
    fc = jnp.abs(topo - _FULLY_CONNECTED) < 0.5
    dom = jnp.concatenate([jnp.broadcast_to(hw.network.domain, (R, L)), jnp.broadcast_to(hw.network.domain[0], (R, 1))],
                          axis=-1)
    links = jnp.where(fc, jnp.maximum(dom - 1.0, 1.0), 1.0)
    rbf = jnp.where(fc, 1.0 / links, rbf)  # a ring step uses one link
    hops = jnp.where(fc, links, hops)  # tree, pairwise and Bruck steps use one link each
    spread = jnp.where(fc, safe_div(links, F - 1.0), hops)  # one-shot: f - 1 sends, each on its own link
    frac = safe_div(F - 1.0, F)
    lg = jnp.ceil(jnp.log2(jnp.maximum(F, 1.0)))
    ar = np.array([k == "allreduce" for k in kinds])[:, None]
    mult = np.where(ar, 2.0, 1.0).astype(np.float32)
    coefs = (                                                    # (latency steps, bytes through a link)
        (mult * steps, mult * frac * P / rbf),                   # ring
        (2.0 * lg, 2.0 * P * hops),                              # tree (all-reduce)
        (1.0, jnp.where(ar, F - 1.0, frac) * P * spread),        # one-shot
        (F - 1.0, frac * P * hops),                              # pairwise (all-to-all)
        (lg, 0.5 * lg * P * hops),                               # Bruck (all-to-all)
        (NVLS_STEPS, NVLS_BYTES * P),                            # NVLS (all-reduce, reducing switch)
        (mult, mult * safe_div(P, F) * links))                   # direct (fully connected): two-shot / all-pairs
    return coefs, F, lvl, fc


def _hier_or_flat(times, F, p):
    """([R] seconds, [R, L + 1] per-level minima) of collectives whose
    per-algorithm times [R, L + 1] (a list, `_algorithm_times`) are given:
    the fastest algorithm at each level where it joins chips (F > 1), then
    the faster of the hierarchical form (levels summed) and the flat one."""
    L = F.shape[1] - 1
    best = jnp.where(F > 1.0, _pick(times, p), 0.0)
    return _pick([jnp.sum(best[:, :L], axis=-1), best[:, L]], p), best


def _fused_times(kinds: tuple, hw: Hardware, n, bytes_, stride, p, groups=None) -> jax.Array:
    """[R] seconds of R collectives (kinds static, none "sendrecv"): the
    faster of hierarchical (per-level minima summed) and flat, each level's
    algorithm chosen exactly (p None) or by `smooth_min`. n, bytes_, stride: [R].
    Rows are costed in groups of one kind, so each pays only for the
    algorithms its kind has. `groups`: static per-row labels (None: all
    distinct); rows of one kind with equal labels have equal n and stride,
    and share one computation of the per-algorithm coefficients
    (`_algorithm_affine`), only their payloads differing."""
    groups = tuple(range(len(kinds))) if groups is None else groups
    by_kind = {k: [i for i, kk in enumerate(kinds) if kk == k] for k in dict.fromkeys(kinds)}
    parts = []
    for k, rows in by_kind.items():
        first = {}
        for i in rows:
            first.setdefault(groups[i], i)
        rep = np.array(list(first.values()))  # one row per distinct group
        at = np.array([list(first).index(groups[i]) for i in rows])  # each row's group
        (fixed, per_byte), F, _, _ = _algorithm_affine((k,) * len(rep), hw, n[rep], stride[rep])
        if len(rep) < len(rows):  # static row picks: slices and a concatenation (no gather)
            take = lambda x, at=at: jnp.concatenate([x[j:j + 1] for j in at])  # noqa: E731
            fixed, per_byte, F = [take(x) for x in fixed], [take(x) for x in per_byte], take(F)
        b = bytes_[np.array(rows)][:, None]
        parts.append(_hier_or_flat([a + c * b for a, c in zip(fixed, per_byte)], F, p)[0])
    order = np.concatenate([np.array(rows) for rows in by_kind.values()])
    return jnp.concatenate(parts)[np.argsort(order)]


def times_and_levels(kind: str, hw: Hardware, n, payloads, p=None, stride=1.0) -> list:
    """[(seconds [G], [G, MAX_NET_LEVELS] seconds)] for each [G] payload in
    `payloads` of one collective kind (not "sendrecv") on G groups (n,
    stride: [G]): `collective_time` and `level_times` of each, from one
    evaluation of the algorithms' coefficients, which depend on the groups
    only (`_algorithm_affine`): the same formulas, computed once for all
    the payloads and for both results."""
    if kind not in _RUNS:
        raise ValueError(f"unknown collective {kind!r}; allowed: {', '.join(_RUNS)}")
    n, stride = (jnp.asarray(x, jnp.float32) for x in jnp.broadcast_arrays(n, stride))
    (fixed, per_byte), F, _, _ = _algorithm_affine((kind,) * n.shape[0], hw, n, stride)
    out = []
    for b in payloads:
        times = [a + c * jnp.asarray(b, jnp.float32)[:, None] for a, c in zip(fixed, per_byte)]
        t, best = _hier_or_flat(times, F, p)
        exact = best if p is None else jnp.where(F > 1.0, _pick(times, None), 0.0)  # level_times: exact minima
        out.append((t, exact[:, :MAX_NET_LEVELS]))
    return out


def flat_ring_affine(kind: str, hw: Hardware, n, stride=1.0):
    """([G, L] latency seconds per call, [G, L] seconds per payload byte) of
    one all-gather or reduce-scatter as NCCL runs it: a ring over all n ranks
    (NCCL has no hierarchical form of these two). Its bytes cross each level's
    links as the hierarchical ring's do (one ring per NIC: level l carries the
    payload the levels inside it leave); its steps are the hierarchical ring's
    at level l once for every group of the chips joined up to l, n/Π_{j<=l} f_j
    of them, so that on switches they sum to n - 1 (NCCL's tuning model,
    src/graph/tuning.cc: (nsteps - nInterSteps)·intraLat + nInterSteps·interLat).
    n, stride: [G]."""
    if kind not in ("allgather", "reducescatter"):
        raise ValueError(f"flat_ring_affine: {kind!r} is not allgather or reducescatter")
    n, stride = (jnp.asarray(x, jnp.float32) for x in jnp.broadcast_arrays(n, stride))
    (fixed, per_byte), F, _, algs = _algorithm_affine((kind,), hw, n, stride)
    ring, L = algs.index(_ALGS.index("ring")), F.shape[1] - 1
    joined = F[:, :L] > 1.0
    groups = n[:, None] / jnp.cumprod(jnp.maximum(F[:, :L], 1.0), axis=-1)
    return (jnp.where(joined, fixed[ring][:, :L] * groups, 0.0), jnp.where(joined, per_byte[ring][:, :L], 0.0))


def level_times(kind: str, hw: Hardware, n: jax.Array, bytes_: jax.Array, stride=1.0) -> jax.Array:
    """[..., MAX_NET_LEVELS] seconds of the hierarchical form at each level
    (fastest algorithm per level; the levels of `_algorithm_grid`).

    n, bytes_: group sizes and payloads, any broadcastable shape [...].
    All-reduce, all-gather, reduce-scatter: level l runs the collective over
    f_l chips on the payload left by the levels inside it (bytes / Π_{j<l} f_j).
    All-to-all: the bytes addressed to peers beyond level l-1 cross level l.
    Send/recv: one message at the innermost level whose domain holds `n`
    (n is then the span of ranks between sender and receiver, inclusive).
    `stride`: ranks between the group's members (see `level_factors`).
    """
    n, bytes_, stride = jnp.broadcast_arrays(*(jnp.asarray(x, jnp.float32) for x in (n, bytes_, stride)))
    big = n[..., None] > 1.0
    if kind == "sendrecv":
        beta = hw.network.bandwidth * hw.efficiency.network
        first = first_holding(hw, n)
        t = hw.network.latency + safe_div(bytes_[..., None], beta)
        return jnp.where((jnp.arange(MAX_NET_LEVELS) == first[..., None]) & big, t, 0.0)
    if kind not in _RUNS:
        raise ValueError(f"unknown collective {kind!r}; allowed: {', '.join(KINDS)}")
    flat = lambda x: x.reshape(-1)  # noqa: E731
    times, F, _, _ = _algorithm_grid((kind,) * n.size, hw, flat(n), flat(bytes_), flat(stride))
    best = jnp.where(F[:, :MAX_NET_LEVELS] > 1.0, chosen_min(times[:, :MAX_NET_LEVELS], -1), 0.0)
    return jnp.where(big, best.reshape(n.shape + (MAX_NET_LEVELS,)), 0.0)


def first_holding(hw: Hardware, n):
    """[...] index of the innermost level whose domain holds n chips."""
    holds = hw.network.domain >= jnp.asarray(n)[..., None]
    return jnp.where(jnp.any(holds, axis=-1), jnp.argmax(holds, axis=-1), MAX_NET_LEVELS - 1)


def collective_time(kind: str, hw: Hardware, n: jax.Array, bytes_: jax.Array, p=None, stride=1.0) -> jax.Array:
    """Default profile: time of one collective, seconds.

    Args:
      kind: static, one of KINDS.
      hw: uses network.domain, network.bandwidth (bytes/s per chip per direction),
        network.latency (s), network.topology and efficiency.network.
      n: chips in the group (float, any shape [...]); for sendrecv, the rank
        span between the two ends (2 for neighbours).
      bytes_: payload per chip in bytes (broadcast with n): the full buffer
        for all-reduce, the gathered result for all-gather, the input for
        reduce-scatter, what one chip sends in all for all-to-all, the
        message for send/recv.
      p: None for the exact minimum over algorithms; a sharpness p > 0
        (traced allowed) for the smooth minimum `smooth_min` (gradients).
      stride: ranks between the group's members (1 for tensor parallel;
        tp for context parallel; tp·sp for expert parallel), so that a group
        spread over nodes pays the scale-out network.
    Returns:
      [...] seconds; 0 where n <= 1. The faster of hierarchical and flat.
    """
    if kind == "sendrecv":
        return jnp.sum(level_times(kind, hw, n, bytes_, stride), axis=-1)
    if kind not in _RUNS:
        raise ValueError(f"unknown collective {kind!r}; allowed: {', '.join(KINDS)}")
    n, bytes_, stride = jnp.broadcast_arrays(*(jnp.asarray(x, jnp.float32) for x in (n, bytes_, stride)))
    flat = lambda x: x.reshape(-1)  # noqa: E731
    t = _fused_times((kind,) * n.size, hw, flat(n), flat(bytes_), flat(stride), p)
    return t.reshape(n.shape)


def table_comm_times(kinds: tuple, n: jax.Array, bytes_: jax.Array, hw: Hardware, genz: bool = False,
                     p=None, stride=None, groups=None) -> jax.Array:
    """[rows] seconds of the collective of each row of an operator table.

    One vectorized call per collective kind (not per row), so a table costs a
    handful of collective evaluations to trace and compile.

    Args:
      kinds: static per-row kinds ("" for rows without a collective).
      n, bytes_: [rows] group sizes and payloads; stride: [rows] rank
        strides of the groups (None: 1).
      genz: static, GenZ's flat formulas instead of ours.
      groups: static per-row labels (OpTable.comm_groups; None: all rows
        distinct): rows with equal labels have equal n and stride.
    """
    stride = jnp.ones_like(bytes_) if stride is None else stride
    if genz:
        return _genz_rows(kinds, hw, n, bytes_)
    # The collective rows in one vectorized call (send/recv apart: one level),
    # then put back in row order with one gather (zeros for the other rows).
    coll = [i for i, k in enumerate(kinds) if k and k != "sendrecv"]
    send = [i for i, k in enumerate(kinds) if k == "sendrecv"]
    parts, order = [], coll + send
    if coll:
        idx = np.array(coll)
        grp = None if groups is None else tuple(groups[i] for i in coll)
        parts.append(_fused_times(tuple(kinds[i] for i in coll), hw, n[idx], bytes_[idx], stride[idx], p, grp))
    if send:
        idx = np.array(send)
        parts.append(collective_time("sendrecv", hw, n[idx], bytes_[idx], p, stride[idx]))
    if not parts:
        return jnp.zeros_like(bytes_)
    pos = np.full(len(kinds), len(order))  # rows without a collective read the trailing 0
    pos[np.array(order)] = np.arange(len(order))
    return jnp.concatenate(parts + [jnp.zeros((1,), bytes_.dtype)])[pos]


def _genz_rows(kinds: tuple, hw: Hardware, n, bytes_) -> jax.Array:
    """GenZ's flat formulas over its one link (CONVENTIONS.md), every row at
    once (0 for rows without a collective):

    AR = 5µs + 2(n-1)α + 2(n-1)·bytes/(n·β); AG = A2A = 5µs + (n-1)α +
    (n-1)·bytes/(n·β); message pass = α + bytes/β. Never derated.
    """
    kinds_a = np.array(kinds)
    alpha, beta = hw.network.latency[0], hw.network.bandwidth[0]
    steps = n - 1.0
    mult = np.where(kinds_a == "allreduce", 2.0, 1.0).astype(np.float32)
    t_coll = GENZ_COLLECTIVE_OVERHEAD + mult * (steps * alpha + safe_div(steps * bytes_, n * beta))
    t = jnp.where(kinds_a == "sendrecv", alpha + safe_div(bytes_, beta), t_coll)
    return jnp.where((kinds_a != "") & (n > 1), t, 0.0)


def genz_collective_time(kind: str, hw: Hardware, n: jax.Array, bytes_: jax.Array) -> jax.Array:
    """GenZ profile: the seconds of one `kind` collective of n chips (`_genz_rows`)."""
    n, bytes_ = jnp.broadcast_arrays(jnp.asarray(n, jnp.float32), jnp.asarray(bytes_, jnp.float32))
    return _genz_rows((kind,), hw, n.reshape(1), bytes_.reshape(1))[0]


def describe(kind: str, hw: Hardware, n, bytes_, stride=1.0) -> dict:
    """How `collective_time` (exact mode) runs one collective, for reports.

    Host-side (not for jit). Returns {"form": "hierarchical" | "flat" |
    "point-to-point", "levels": [seconds per network level], "algorithms":
    [fastest algorithm per level, "" where idle], "seconds": total}.
    """
    return describe_rows(kind, jax.device_get(describe_arrays(kind, hw, n, bytes_, stride)))


def describe_arrays(kind: str, hw: Hardware, n, bytes_, stride=1.0) -> dict:
    """The arrays `describe` reads for R collectives of one kind (n, bytes_,
    stride: [R], or scalars for one), each with a leading [R] axis when
    vectors are given (traceable: a report computes them in the compiled
    call that evaluates, cli.compiled; `describe_rows` reads row i of them)."""
    one = jnp.ndim(n) == 0
    n, bytes_, stride = (jnp.reshape(jnp.asarray(x, jnp.float32), (-1,)) for x in jnp.broadcast_arrays(n, bytes_,
                                                                                                         stride))
    if kind == "sendrecv":
        out = {"n": n, "levels": level_times(kind, hw, n, bytes_)}
    else:
        times, F, lvl, _ = _algorithm_grid((kind,) * n.shape[0], hw, n, bytes_, stride)
        out = {"n": n, "times": times, "F": F, "lvl": lvl}
    return {k: v[0] for k, v in out.items()} if one else out


def describe_rows(kind: str, a: dict) -> dict:
    """`describe`'s answer from `describe_arrays` (host numpy)."""
    if float(a["n"]) <= 1.0:
        return {"form": "-", "levels": [0.0] * MAX_NET_LEVELS, "algorithms": [""] * MAX_NET_LEVELS, "seconds": 0.0}
    if kind == "sendrecv":
        lv = [float(x) for x in a["levels"]]
        return {"form": "point-to-point", "levels": lv, "algorithms": ["send" if x else "" for x in lv],
                "seconds": sum(lv)}
    kept = kept_algorithms((kind,))
    times, F, lvl = (np.asarray(a[k]) for k in ("times", "F", "lvl"))
    used = F > 1.0
    best = np.where(used, times.min(axis=-1), 0.0)
    names = [_ALGS[kept[i]] if u else "" for i, u in zip(times.argmin(axis=-1), used)]
    hier = [float(x) for x in best[:MAX_NET_LEVELS]]
    if best[MAX_NET_LEVELS] < sum(hier):
        levels, algs = [0.0] * MAX_NET_LEVELS, [""] * MAX_NET_LEVELS
        levels[int(lvl)], algs[int(lvl)] = float(best[MAX_NET_LEVELS]), names[MAX_NET_LEVELS]
        return {"form": "flat", "levels": levels, "algorithms": algs, "seconds": float(best[MAX_NET_LEVELS])}
    return {"form": "hierarchical", "levels": hier, "algorithms": names[:MAX_NET_LEVELS], "seconds": sum(hier)}
