"""Energy per token and average power, from the operator tables.

Energy of one request batch on one replica = dynamic energy (FLOPs times J
per FLOP in the compute dtype, bytes moved at each memory level times J per
byte there, bytes sent at each network level times J per byte there) plus
static power times the time. This is the usual first-order accelerator energy
model (Horowitz, "Computing's energy problem", ISSCC 2014; Sze et al.,
"Efficient processing of deep neural networks", Proc. IEEE 2017): energy is
work, not time, so it reads the same FLOP and byte columns that the roofline
turns into seconds.

The spec loader fills in default J/FLOP and J/byte figures when a hardware
YAML does not give its own (`jaxplat.model.hardware_spec`, with sources).
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import memory
from jaxplat.cost.collectives import first_holding, reach_levels
from jaxplat.cost.compute import executed_flops
from jaxplat.cost.efficiency import row_dtypes
from jaxplat.cost.operators import OpTable
from jaxplat.cost.optable import joined_tables
from jaxplat.cost.roofline import safe_div
from jaxplat.model import Hardware, Options, Workload


def table_work(table: OpTable, passes, steps_sum):
    """FLOPs, on-chip bytes and off-chip bytes of a table over several passes.

    Each column is affine in s (generated tokens in the KV cache), so over
    passes at s = s_1..s_n the total of x0 + x1*s is n*x0 + (sum s)*x1.

    Args:
      table: per-chip `OpTable`.
      passes: number of passes n (scalar). steps_sum: sum of s over them.
    Returns:
      (flops, on_bytes, off_bytes), scalars per chip.
    """
    tot = lambda x0, x1: table.count * (passes * x0 + steps_sum * x1)  # noqa: E731
    a, w, o = tot(table.a0, table.a1), tot(table.w0, table.w1), tot(table.o0, table.o1)
    on = table.on_a * a + table.on_w * w + table.on_o * o
    off = (1.0 - table.on_a) * a + (1.0 - table.on_w) * w + (1.0 - table.on_o) * o
    return jnp.sum(tot(table.f0, table.f1)), jnp.sum(on), jnp.sum(off)


def collective_bytes(kind: str, hw: Hardware, n, nbytes, stride=1.0) -> jax.Array:
    """[..., MAX_NET_LEVELS] bytes one chip sends at each network level, one collective.

    Counts the bandwidth-optimal traffic of hierarchical ring collectives
    (Thakur, Rabenseifner & Gropp, IJHPCA 2005; Chan et al., CCPE 2007): level l
    joins f_l sub-groups (`collectives.level_factors`) and carries the payload
    left after the levels inside it; all-reduce sends 2(f_l - 1)/f_l of it,
    all-gather and reduce-scatter (f_l - 1)/f_l; all-to-all sends each level
    the share of peers first reached there; send/recv the message once on the
    innermost level whose domain holds its rank span. Levels are assigned as
    `collectives.level_times` does, so a group spread `stride` ranks apart
    (context- or expert-parallel groups) pays its outer levels. An algorithm
    the time model picks for latency (tree, one-shot) may move more bytes:
    this is a lower bound on traffic, kept as a byte count (not a second
    time model) because differentiating the time
    model for it made `evaluate` compile several times slower.

    Args:
      kind: static, one of collectives.KINDS. n: chips in the group
        (for sendrecv, the rank span), any shape [...].
      nbytes: payload per chip, as in `collectives.collective_time`.
      stride: ranks between the group's members (`OpTable.comm_s`).
    """
    n, nbytes, stride = jnp.broadcast_arrays(*(jnp.asarray(x, jnp.float32) for x in (n, nbytes, stride)))
    if kind == "sendrecv":
        lvl = jnp.arange(hw.network.bandwidth.shape[0]) == first_holding(hw, n)[..., None]
        return jnp.where(lvl & (n[..., None] > 1), nbytes[..., None], 0.0)
    reach, below = reach_levels(hw, n, stride)
    return _spread_bytes(np.asarray(kind == "allreduce"), np.asarray(kind == "alltoall"), reach, below, n, nbytes)


def _spread_bytes(allreduce, alltoall, reach, below, n, nbytes) -> jax.Array:
    """[..., MAX_NET_LEVELS] bytes per level of ring collectives (all-reduce,
    all-gather, reduce-scatter) and all-to-alls, as in `collective_bytes`.

    allreduce, alltoall: static numpy bool masks broadcastable to n (which
    rows are which kind). reach, below: `reach_levels` of the groups.
    """
    f = jnp.maximum(reach / below, 1.0)  # = collectives.level_factors(hw, n, stride)
    inner = jnp.concatenate([jnp.ones_like(f[..., :1]), jnp.cumprod(f, axis=-1)[..., :-1]], axis=-1)
    mult = np.where(allreduce, 2.0, 1.0).astype(np.float32)[..., None]
    ring = mult * safe_div(f - 1.0, f) * nbytes[..., None] / inner
    a2a = safe_div(reach - below, n[..., None]) * nbytes[..., None]
    return jnp.where(alltoall[..., None], a2a, ring)


def comm_bytes(table: OpTable, hw: Hardware, opts: Options) -> jax.Array:
    """[MAX_NET_LEVELS] bytes one chip sends per pass of the table:
    `collective_bytes` of every collective row at once."""
    b = _collective_row_bytes(table, hw)
    return jnp.sum(b, axis=0) if b.shape[0] else jnp.zeros_like(hw.network.bandwidth)


def _collective_row_bytes(table: OpTable, hw: Hardware) -> jax.Array:
    """[c, MAX_NET_LEVELS] bytes one chip sends per pass for each of the
    table's c collective rows, in order (their `count` included)."""
    kinds = np.array(table.comm_kinds)
    idx = np.flatnonzero(kinds != "")
    if idx.size == 0:
        return jnp.zeros((0, hw.network.bandwidth.shape[0]), table.comm_b.dtype)
    # All collective rows at once, each kind selected per row by static masks
    # (one set of ops instead of one per kind).
    kinds = kinds[idx]
    n, nbytes, stride = table.comm_n[idx], table.comm_b[idx], table.comm_s[idx]
    b = jnp.zeros((idx.size, hw.network.bandwidth.shape[0]), nbytes.dtype)
    if (kinds != "sendrecv").any():
        reach, below = reach_levels(hw, n, stride)
        b = _spread_bytes(kinds == "allreduce", kinds == "alltoall", reach, below, n, nbytes)
    if (kinds == "sendrecv").any():
        send = collective_bytes("sendrecv", hw, n, nbytes, stride)
        b = jnp.where((kinds == "sendrecv")[:, None], send, b)
    return table.count[idx][:, None] * b


def _row_joules(table: OpTable, hw: Hardware, wl: Workload, opts: Options, passes, steps_sum, prices):
    """([rows] FLOP joules, [rows] memory joules) of each row over the
    passes (`dynamic_energy`; passes and steps_sum scalars or [rows])."""
    tot = lambda x0, x1: table.count * (passes * x0 + steps_sum * x1)  # noqa: E731
    dtype, _ = row_dtypes(table, wl, opts)
    executed = executed_flops(table, hw, opts)  # a causal mask's diagonal tiles run whole
    flops = tot(executed, table.f1) * hw.power.energy_flop[dtype.astype(jnp.int32)]
    return flops, prices.energy(tot(table.a0, table.a1), tot(table.w0, table.w1), tot(table.o0, table.o1))


def dynamic_energy(table: OpTable, hw: Hardware, wl: Workload, opts: Options, passes, steps_sum, prices=None):
    """Joules one chip spends on a table's work over the passes (no static).

    FLOPs at the J/FLOP of each row's compute dtype (efficiency.row_dtypes),
    a causal mask's diagonal tiles included (compute.diagonal_flops);
    bytes at the J/byte of the level each operand is placed on, tiling
    re-reads included (`memory.byte_prices`, the same prices as the memory
    time: footprint at s = output; `prices` if already computed); collective
    bytes at each network level's J/byte.
    """
    prices = memory.byte_prices(table, hw, wl, wl.output, opts.hierarchy) if prices is None else prices
    flops, mem = _row_joules(table, hw, wl, opts, passes, steps_sum, prices)
    net = passes * comm_bytes(table, hw, opts)
    return jnp.sum(flops) + jnp.sum(mem) + jnp.sum(net * hw.power.energy_net)


def phase_energy(pre: OpTable, dec: OpTable, hw: Hardware, wl: Workload, opts: Options, steps, steps_sum, copies,
                 prices=None, joined=None):
    """Dynamic joules (no static) one replica spends on the prefill and on
    the decode of one request batch.

    Args:
      pre, dec: prefill and decode tables of one chip's share of each layer;
        `count` covers every layer, so a table is one path through the
        pipeline (all its stages).
      steps: decode passes; steps_sum: the sum of s over them (s = 1..steps
        gives steps(steps+1)/2; the genz profile costs every step at s = output).
      copies: how many times the tables' work is done (tp·ep·sp parallel
        paths through the pipeline, times the micro-batches, as a table
        holds one micro-batch).
      prices: both tables' `memory.joined_byte_prices`, if already computed.
      joined: optable.joined_tables((pre, dec)), if already built.
    Returns:
      (prefill joules, decode joules), scalars: each `dynamic_energy` of its
      table, both tables' rows computed in one pass (optable.joined_tables).
    """
    both = joined_tables((pre, dec)) if joined is None else joined
    if prices is None:
        prices = memory.joined_byte_prices((pre, dec), hw, wl, wl.output, opts.hierarchy, both)
    per_row = lambda a, b: jnp.concatenate([jnp.zeros_like(pre.f0) + a, jnp.zeros_like(dec.f0) + b])  # noqa: E731
    flops, mem = _row_joules(both, hw, wl, opts, per_row(1.0, steps), per_row(0.0, steps_sum), prices)
    sent = _collective_row_bytes(both, hw)
    c, n = sum(1 for k in pre.comm_kinds if k), len(pre.kinds)  # the prefill's rows come first

    def joules(rows, sent, passes):
        net = passes * (jnp.sum(sent, axis=0) if sent.shape[0] else jnp.zeros_like(hw.network.bandwidth))
        return copies * (jnp.sum(flops[rows]) + jnp.sum(mem[rows]) + jnp.sum(net * hw.power.energy_net))

    return joules(slice(0, n), sent[:c], 1.0), joules(slice(n, None), sent[c:], steps)


# Power available for dynamic work is at least this share of the limit, so that
# a static power at or above TDP (possible only for a chip built in code, the
# spec loader refuses it) gives a finite clock and gradient.
_MIN_DYNAMIC_SHARE = 0.01


# Below about this share of its rated voltage a GPU's clock falls at a fixed voltage: an RTX 3060 Ti runs
# 0.875-1.081 V at 1,740-1,965 MHz under load and 0.668 V at its 210 MHz floor (TechPowerUp, Zotac RTX 3060
# Ti Twin Edge review, voltage-frequency table, 2020): 0.668 / 1.081 = 0.62. Assumed for data-centre GPUs.
VOLTAGE_FLOOR = 0.62


def power_limit(hw: Hardware, cap_w=0.0) -> jax.Array:
    """W a chip may draw: its TDP, or a run's lower board limit `cap_w`
    (nvidia-smi --power-limit; 0: none); 0 for a chip without either."""
    return jnp.where((cap_w > 0) & ((cap_w < hw.power.tdp) | (hw.power.tdp <= 0)), cap_w, hw.power.tdp)


def clock_share(dynamic_j, seconds, hw: Hardware, chips, cap_w=0.0) -> jax.Array:
    """Share of its rated clock a chip keeps while it spends `dynamic_j`
    joules of dynamic energy (all `chips` together, at the rated clock) in
    `seconds`, held to its power limit: the TDP, or `cap_w` where a run sets
    a lower board limit (nvidia-smi --power-limit; 0: none).

    Above the limit the chip's power management lowers clock and voltage
    together until it fits (NVIDIA's and AMD's board power management; large
    GEMMs on an H100 SXM run at its 700 W limit, He, "Strangely, matrix
    multiplications on GPUs run faster when given predictable data", 2024).
    Dynamic power P = C·V²·f with V about linear in f over the DVFS range,
    so P ∝ f³ (Kim, Gupta, Wei & Brooks, HPCA 2008, Sec. 2): a chip that
    would draw P above its budget (limit - static power) keeps (budget /
    P)^(1/3) of its clock. Below VOLTAGE_FLOOR the voltage stays and P ∝ f:
    budget / (P·floor²). Its compute-bound time grows by the inverse and its
    dynamic energy per operation falls by `energy_share`. 1 under the limit
    or without a TDP (a chip built in code without one).

    Args:
      dynamic_j, seconds: the work's dynamic joules and its time at the
        rated clock (any shape; `seconds` 0 gives 1).
      chips: how many chips share the joules.
    """
    limit = power_limit(hw, cap_w)
    budget = chips * jnp.maximum(limit - hw.power.static_power, _MIN_DYNAMIC_SHARE * limit)
    watts = safe_div(dynamic_j, seconds)
    r = jnp.minimum(safe_div(budget, jnp.maximum(watts, 1e-30)), 1.0)
    share = jnp.where(r >= VOLTAGE_FLOOR ** 3, r ** (1.0 / 3.0), r / VOLTAGE_FLOOR ** 2)
    return jnp.where((hw.power.tdp > 0) & (watts > 0), share, 1.0)


def energy_share(clock) -> jax.Array:
    """Dynamic energy per operation at a clock share (`clock_share`) over
    that at the rated clock: the voltage's square, the voltage following the
    clock down to VOLTAGE_FLOOR."""
    return jnp.maximum(clock, VOLTAGE_FLOOR) ** 2


def per_token(energy, wl: Workload):
    """Joules per output token: energy / (batch x output)."""
    return safe_div(energy, wl.batch * wl.output)


def average_power(energy, e2e, dp):
    """Average power of the deployment (dp replicas), W."""
    return dp * safe_div(energy, e2e)


