"""`evaluate`: prefill, decode and memory of one deployment -> `Metrics`.

TTFT is the prefill pass. Decode produces output tokens 2..O; the step that
produces token j + 1 attends over prompt + j tokens. TPOT is the mean step
time, summed exactly in closed form per operator (roofline.sum_over_steps).
The GenZ profile instead reports GenZ's decode latency: one step with the KV
cache at prompt + output tokens (CONVENTIONS.md, "Whole model").
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import compute, efficiency, energy, memory, money
from jaxplat.cost.collectives import SMOOTH_MIN_P, chips_available, table_comm_times
from jaxplat.cost.dtypes import computed_workload
from jaxplat.cost.operators import OpTable, build_table
from jaxplat.cost.optable import comm_group_labels, joined_tables
from jaxplat.cost.roofline import combine, safe_div, sum_over_steps
from jaxplat.cost.stages import microbatching, stage_counts, stage_paths
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, chips, pytree_dataclass, replace
from jaxplat.specs import SpecError
from jaxplat.specs.units import DTYPES

DEFAULT_SHARPNESS = 20.0  # p of the smooth max: at most 2^(1/20) - 1 = 3.5% above max


@pytree_dataclass
class Metrics:
    """Results of `evaluate`, scalars in SI units.

    ttft, tpot, e2e: seconds (time to first token, mean time per output token,
      end to end for one request). prefill_time, decode_time: seconds of
      the two phases. throughput: output tokens/s of the whole deployment.
    weights_bytes, kv_bytes, activation_bytes, memory_bytes, capacity_bytes:
      per chip. comm_time: seconds spent in collectives over the request.
    chips: chips used (product of all degrees). fits, feasible: booleans
      (fits: the busiest stage's memory per chip; feasible = fits, divisible
      and chips_ok). divisible: degrees divide what they split. chips_ok:
      chips <= the system's chips (outermost network domain). context_ok:
      prompt + output <= the model's max_position_embeddings (feasible
      needs it too). bubble: idle
      fraction of the prefill pipeline, (pp-1)/(nmb+pp-1).
    """

    ttft: jax.Array
    tpot: jax.Array
    e2e: jax.Array
    throughput: jax.Array
    prefill_time: jax.Array
    decode_time: jax.Array
    comm_time: jax.Array
    weights_bytes: jax.Array
    kv_bytes: jax.Array
    activation_bytes: jax.Array
    memory_bytes: jax.Array
    capacity_bytes: jax.Array
    chips: jax.Array
    fits: jax.Array
    feasible: jax.Array
    # Distribution (jaxplat.parallel): degrees divide what they split, the
    # chips fit in the system, and the pipeline bubble of prefill (fraction).
    divisible: jax.Array = dataclasses.field(default_factory=lambda: jnp.bool_(True))
    chips_ok: jax.Array = dataclasses.field(default_factory=lambda: jnp.bool_(True))
    bubble: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    # Energy and money (jaxplat.energy, jaxplat.cost): J per output token,
    # average W of the whole deployment, USD per million output tokens.
    energy_per_token_j: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    power_w: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    cost_per_mtok_usd: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))
    # prompt + output within the model's max_position_embeddings (`context_ok`)
    context_ok: jax.Array = dataclasses.field(default_factory=lambda: jnp.bool_(True))
    # Power limit (cost.energy.clock_share): e2e over what it would be without
    # the TDP (1 = not power-limited).
    throttle: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    # The share of the rated clock the power limit leaves the prefill and the
    # decode (1 = under the TDP).
    prefill_clock: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))
    decode_clock: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))


def peak_flops(hw: Hardware, wl: Workload, opts: Options = Options()) -> jax.Array:
    """Achievable FLOP/s of a large GEMM in the workload's compute dtype.

    GenZ has one peak (bf16) and scales it by 2 bytes / bytes per element
    (int8/fp8 run at twice the bf16 rate; CONVENTIONS.md "Units and system").
    The default profile derates narrow dtypes (efficiency.gemm_peak); each
    row's shape derates it further (efficiency.row_rates).
    """
    if opts.conv.peak == "bf16_scaled":
        return hw.chip.flops[DTYPES.index("bf16")] * 2.0 / wl.bytes_act * hw.efficiency.compute
    if opts.conv.efficiency == "flat":
        return hw.chip.flops[wl.compute_dtype.astype(jnp.int32)] * hw.efficiency.compute
    return efficiency.gemm_peak(hw, wl.compute_dtype, wl.bytes_act)


# Nested jit: a caller's trace (serving models price a table or an iteration several
# times, at the same shapes) traces it once and lowers one function; XLA inlines the calls.
@functools.partial(jax.jit, static_argnames=("opts",))
def row_components(table: OpTable, hw: Hardware, wl: Workload, opts: Options, p=None, comm=None, prices=None):
    """Per-row compute and memory time (affine in s) and communication time.

    `p`: in smooth mode, the sharpness of the smooth minimum over collective
    algorithms (None: the default of collectives.SMOOTH_MIN_P).

    Compute time comes from the chip's compute structure
    (compute.row_compute_times: the peak, or systolic-array cycles, the
    vector unit, the offload host). Memory time: `memory.byte_prices` (the
    plain roofline charges off-chip bytes at the main memory's bandwidth and
    on-chip bytes at the SRAM bandwidth, free when the chip has none, both
    derated by the memory efficiency: GenZ, CONVENTIONS.md "Per-operator";
    with the hierarchy, at the levels each tensor is placed on, with tiling
    re-reads); offloaded rows pay their link transfer instead
    (compute.offload_memory_times).
    Each row's achieved FLOP/s (dtype, tile and wave quantization, kernel
    kind), its memory-time factor and fixed kernel latency come from its
    shape (efficiency.row_rates).
    `comm`: the rows' communication times if already computed
    (`tables_comm_times`), else computed here; `prices` likewise the
    table's `memory.byte_prices`.
    Returns (c0, c1, m0, m1, comm), each [rows] seconds (per token for *1).
    """
    peak, mem_scale, latency = efficiency.row_rates(table, hw, wl, opts, peak_flops(hw, wl, opts))
    # Placement over levels + tiling reuse (memory.py), or the plain roofline.
    prices = memory.byte_prices(table, hw, wl, wl.output, opts.hierarchy) if prices is None else prices
    mem = prices.time
    if comm is None:
        (comm,) = tables_comm_times((table,), hw, opts, p)
    c0, c1 = compute.row_compute_times(table, hw, wl, opts, peak)
    m0, m1 = compute.offload_memory_times(table, hw, mem(table.a0, table.w0, table.o0) * mem_scale,
                                          mem(table.a1, table.w1, table.o1) * mem_scale)
    return c0 + latency, c1, m0 + latency, m1, comm


def tables_comm_times(tables, hw: Hardware, opts: Options, p=None) -> tuple:
    """[rows] communication seconds of each table's rows, all tables' rows in
    one `table_comm_times` call (so prefill and decode share one traced copy
    of the collective model, and their rows of one group, OpTable.comm_groups,
    one computation of its coefficients): tables of one configuration.
    `p` as in `row_components`."""
    p_min = (SMOOTH_MIN_P if p is None else p) if opts.smooth else None
    cat = lambda key: jnp.concatenate([getattr(t, key) for t in tables])  # noqa: E731
    kinds = sum((tuple(t.comm_kinds) for t in tables), ())
    groups = sum((comm_group_labels(t, i) for i, t in enumerate(tables)), ())
    comm = table_comm_times(kinds, cat("comm_n"), cat("comm_b"), hw, opts.conv.collectives == "genz", p_min,
                            cat("comm_s"), groups)
    # Each collective call's fixed cost beyond its α-β time (its kernel's
    # launch, the ranks' flag barrier: efficiency.collective_latency).
    calls = jnp.asarray(np.array([bool(k) for k in kinds], np.float32)) * (cat("comm_n") > 1.0)
    comm = comm + calls * efficiency.collective_latency(hw, opts)
    ends = np.cumsum([len(t.comm_kinds) for t in tables])[:-1]
    return tuple(jnp.split(comm, ends))


def row_step_times(table, hw, wl, opts, s, p=None):
    """[rows] seconds of each operator at s generated tokens (one pass)."""
    c0, c1, m0, m1, comm = row_components(table, hw, wl, opts)
    c, m = c0 + c1 * s, m0 + m1 * s
    return efficiency.row_cores(table, hw, opts, c, m, p) + comm


def row_decode_sums(table, hw, wl, opts, lo, hi, p=None):
    """[rows] seconds of each operator summed over decode steps s = lo..hi."""
    c0, c1, m0, m1, comm = row_components(table, hw, wl, opts)
    n = jnp.maximum(hi - lo + 1.0, 0.0)
    return efficiency.overlap_decode_sums(table, hw, opts, c0, c1, m0, m1, n,
                                          sum_over_steps(c0, c1, m0, m1, 0.0, lo, hi, p)) + n * comm


def divisibility(model: Model, par: Parallel, opts: Options = Options()) -> dict:
    """The named checks (bool arrays) behind `Metrics.divisible`: degrees are
    whole numbers >= 1 ("whole"); the attention split (tp; tp·ep with
    Conventions.heads_over_ep) divides the heads ("heads"); KV heads and that
    split divide one another, replicating KV heads ("kv_heads"); ep·moe_ep
    divides the experts ("experts"); moe_ep divides tp ("moe_ep"; GenZ's
    accounting has no moe_ep: 1 only); at most one stage per layer
    ("layers"); the load-imbalance factor is at least 1 ("imbalance").
    Uneven layer splits are allowed. Reports explain `feasible = False` from
    these same checks."""
    divides = lambda x, d: jnp.mod(x, d) == 0  # noqa: E731
    degrees = jnp.stack([par.tp, par.pp, par.ep, par.dp, par.cp, par.microbatches, par.moe_ep])
    tp_attn = attention_split(par, opts)
    moe_ep_ok = divides(par.tp, par.moe_ep) if opts.conv.moe_accounting != "genz" else par.moe_ep == 1.0
    return {"whole": jnp.all((degrees >= 1.0) & (degrees == jnp.round(degrees))),
            "heads": divides(model.heads, tp_attn),
            "kv_heads": divides(model.kv_heads, tp_attn) | divides(tp_attn, model.kv_heads),
            "experts": (model.experts == 0) | divides(model.experts, par.ep * par.moe_ep),
            "moe_ep": moe_ep_ok,
            "layers": par.pp <= model.layers,
            "imbalance": par.imbalance >= 1.0}


def context_ok(model: Model, wl: Workload) -> jax.Array:
    """Named check "context": prompt + output fit the model's
    max_position_embeddings (positions past it were never trained; RoPE
    scaling is already in that number). True when it is unknown (0)."""
    return (model.max_context <= 0) | (wl.prompt + wl.output <= model.max_context)


def attention_split(par: Parallel, opts: Options = Options()) -> jax.Array:
    """Chips the attention heads are split over: tp, or tp·ep (Conventions.heads_over_ep)."""
    return par.tp * par.ep if opts.conv.heads_over_ep else par.tp


def _total(weights, core, comm):
    """sum(weights * (core + comm)) over rows, seconds, summed per component:
    the roofline part depends only on compute and memory numbers, the
    collective part only on the network, so a sweep over hardware
    (batching.grid_map) costs each sum over its own axes and adds the two
    once per configuration instead of once per row."""
    return jnp.sum(weights * core) + jnp.sum(weights * comm)


def larger_weights(a, b, p=None):
    """Weights (wa, wb), wa + wb = 1, with wa·a + wb·b = max(a, b) (exact,
    p None) or its smooth twin for a, b >= 0: the average weighted by t^p,
    exact when a == b (pp = 1 makes the pipeline's two bounds equal, where a
    p-norm max would add 2^(1/p)) and when one is far larger, at most
    ~1/(e·p) below the max in between. Gradient-safe at a = b = 0."""
    if p is None:
        wa = jnp.where(a >= b, 1.0, 0.0)
        return wa, 1.0 - wa
    m = jnp.maximum(a, b)
    ok = m > 0
    ms = jnp.where(ok, m, 1.0)
    ua, ub = (jnp.where(ok, a, 0.0) / ms) ** p, (jnp.where(ok, b, 0.0) / ms) ** p
    wa = jnp.where(ok, ua / (ua + ub), 0.5)
    return wa, 1.0 - wa


def pipeline_round(one_pass, stages, p=None):
    """Seconds for every micro-batch in flight to advance one token:
    max(one pass through all stages, nmb x the busiest stage), `stages`
    being the latter (Megatron / vLLM pipelined decode); its smooth twin
    (`larger_weights`) in smooth mode (p given)."""
    wa, wb = larger_weights(one_pass, stages, p)
    return wa * one_pass + wb * stages


@pytree_dataclass
class Phases:
    """The per-row arrays `evaluate` reduces to TTFT and TPOT (and that
    `breakdown` prints), all [rows] seconds on one chip of the busiest stage.

    pre, dec: the prefill and decode operator tables.
    pre_core, pre_comm: one execution of each prefill row: max(compute,
      memory) and the communication left exposed by `Parallel.overlap`.
    pre_weight: executions of each prefill row on the TTFT path:
      count + (nmb - 1)·stage (the last micro-batch's first token; GenZ:
      count), so TTFT = sum(pre_weight·(pre_core + pre_comm)).
    dec_core, dec_comm: decode rows summed over the steps (exact_sum), or one
      step at prompt + output (final_step).
    dec_weight: executions per pipeline round: count or nmb·stage, whichever
      side of `pipeline_round` is larger (blended in smooth mode), so the
      decode time (exact_sum) or TPOT (final_step) = sum(dec_weight·(dec_core + dec_comm)).
    steps: decode steps (output - 1). nmb: micro-batches.
    e_pre, e_dec: dynamic joules of one replica's prefill and decode
      (cost.energy.phase_energy).
    pre_slow, dec_slow: >= 1, how much the power limit stretches each phase
      (the inverse of cost.energy.clock_share; 1 when under TDP or
      Conventions.power_limit is off): TTFT = pre_slow x sum(...), and
      likewise the decode.
    ttft, decode_time, tpot, comm_time: the reductions, seconds.
    rows: (c0, c1, m0, m1, comm) of `row_components`, [prefill rows + decode
      rows] each (the tables joined, optable.joined_tables), for the
      per-operator breakdown.
    """

    pre: OpTable
    dec: OpTable
    pre_core: jax.Array
    pre_comm: jax.Array
    pre_weight: jax.Array
    dec_core: jax.Array
    dec_comm: jax.Array
    dec_weight: jax.Array
    steps: jax.Array
    nmb: jax.Array
    e_pre: jax.Array
    e_dec: jax.Array
    pre_slow: jax.Array
    dec_slow: jax.Array
    ttft: jax.Array
    decode_time: jax.Array
    tpot: jax.Array
    comm_time: jax.Array
    rows: tuple


def operator_tables(model: Model, hw: Hardware, par: Parallel, wl: Workload, options: Options) -> tuple:
    """(prefill, decode) `OpTable`s of one deployment: step 1 of `evaluate`
    (step 2 prices them: `evaluate(..., tables=...)`).

    The tables read the model, the parallel degrees, the workload and, of
    the hardware, only `hw.chip.gemm_dtype` (the dtype the GEMMs run in:
    dtypes.computed_workload): tables built once serve every chip with the
    same dtypes, e.g. a sweep over bandwidths, FLOP/s or SRAM sizes
    (search.Engine builds them once per outer point)."""
    wl = computed_workload(hw, wl, options)
    return build_table(model, par, wl, "prefill", options), build_table(model, par, wl, "decode", options)


def phases(model: Model, hw: Hardware, par: Parallel, wl: Workload, options: Options, p=None,
           tables=None) -> Phases:
    """Tables and per-row times of one deployment (see `Phases`); `tables`:
    its `operator_tables` if already built.

    Prefill: `count` runs one micro-batch through every stage (its latency),
    `stage` through the busiest stage, which sets the pace of the others:
    TTFT of the last micro-batch = pass + (nmb - 1) x stage (GPipe schedule,
    Huang et al. 2019; bubble (pp - 1) / (nmb + pp - 1)). GenZ reports the
    latency of one micro-batch (CONVENTIONS.md, "PP").

    Decode, "exact_sum": a micro-batch's next token needs its previous one,
    so a round of every micro-batch takes max(one pass, nmb x busiest stage)
    (Megatron / vLLM pipelined decode), summed exactly per operator over the
    steps. The max of the two sums equals the sum of the max when nmb = 1 or
    nmb >= pp (one side dominates at every step), else it is a lower bound.
    "final_step" (GenZ 0.0.16): TPOT is one step with the KV cache at prompt
    + output (CONVENTIONS.md, "Whole model").
    The GEMMs compute in the dtype the chip has units for (dtypes.computed_workload).
    """
    wl = computed_workload(hw, wl, options)
    conv = options.conv
    pre, dec = operator_tables(model, hw, par, wl, options) if tables is None else tables
    nmb, _ = microbatching(par, wl, options)
    hidden = 1.0 - jnp.clip(par.overlap, 0.0, 1.0)  # share of communication left exposed
    comm_pre, comm_dec = tables_comm_times((pre, dec), hw, options, p)
    # Both tables' rows in one pass: a row's compute and memory time read only its own row, so one
    # traced copy of the per-row model serves prefill and decode (a smaller program to compile).
    both = joined_tables((pre, dec))
    # the byte prices of both tables' rows, for the memory time and the energy
    prices = memory.joined_byte_prices((pre, dec), hw, wl, wl.output, options.hierarchy, both)
    rows = row_components(both, hw, wl, options, p, jnp.concatenate([comm_pre, comm_dec]), prices)
    c0, c1, m0, m1, _ = rows
    pre_rows = slice(0, len(pre.kinds))
    pre_core = efficiency.row_cores(pre, hw, options, c0[pre_rows], m0[pre_rows], p)
    pre_comm = hidden * comm_pre
    fill = 1.0 if conv.ttft == "last_microbatch" else 0.0
    pre_weight = pre.count + fill * (nmb - 1.0) * pre.stage
    c0, c1, m0, m1 = (x[len(pre.kinds):] for x in (c0, c1, m0, m1))
    steps = jnp.maximum(wl.output - 1.0, 0.0)
    if conv.decode == "final_step":
        dec_core = combine(c0 + c1 * wl.output, m0 + m1 * wl.output, 0.0, p)
        dec_comm, dec_weight = hidden * comm_dec, dec.count
    else:
        dec_core = efficiency.overlap_decode_sums(dec, hw, options, c0, c1, m0, m1, steps,
                                                  sum_over_steps(c0, c1, m0, m1, 0.0, 1.0, steps, p))
        dec_comm = steps * hidden * comm_dec  # the same every step
        wa, wb = larger_weights(_total(dec.count, dec_core, dec_comm),
                                nmb * _total(dec.stage, dec_core, dec_comm), p)
        dec_weight = wa * dec.count + wb * nmb * dec.stage
    ttft = _total(pre_weight, pre_core, pre_comm)
    decode_time = _total(dec_weight, dec_core, dec_comm)
    comm_time = jnp.sum(pre_weight * pre_comm) + jnp.sum(dec_weight * dec_comm) * (
        steps if conv.decode == "final_step" else 1.0)
    if conv.decode == "final_step":  # the tables hold one step
        tpot, decode_time = decode_time, steps * decode_time
    else:  # the tables hold the sum over the steps
        tpot = safe_div(decode_time, steps)

    # Energy of one request batch on one replica: the tables hold one
    # micro-batch on one path through all pp stages (`count`), and there are
    # tp·ep·sp paths and nmb micro-batches.
    paths = stage_paths(par)
    # Sum of KV lengths past the prompt over the decode steps: 1 + ... + steps,
    # or every step at prompt + output (GenZ's final step).
    steps_sum = steps * wl.output if conv.decode == "final_step" else steps * (steps + 1.0) / 2.0
    e_pre, e_dec = energy.phase_energy(pre, dec, hw, wl, options, steps, steps_sum, paths * nmb, prices, both)
    pre_slow = dec_slow = jnp.float32(1.0)
    if conv.power_limit:
        # A phase that would draw more than the chips' TDP runs at a lower
        # clock (energy.clock_share): its time grows by the inverse, its
        # dynamic energy per operation falls with the voltage (energy_share).
        replica = paths * par.pp
        pre_slow = _stretch(ttft, safe_div(ttft, energy.clock_share(e_pre, ttft, hw, replica)), p)
        dec_slow = _stretch(decode_time, safe_div(decode_time, energy.clock_share(e_dec, decode_time, hw, replica)), p)
        e_pre, e_dec = e_pre * energy.energy_share(1.0 / pre_slow), e_dec * energy.energy_share(1.0 / dec_slow)
    # The engine's own time per iteration (the prefill pass, each decode
    # step) adds to the kernels', throttled or not (efficiency.iteration_overhead).
    overhead = efficiency.iteration_overhead(hw, options, par.tp)
    ttft_dev, tpot_dev = pre_slow * ttft + overhead, dec_slow * tpot + overhead
    # The host's per-sequence work each step (scheduling, sampling: the same
    # physics as an engine iteration under load, serving.iteration): beside
    # the device step under an overlap scheduler, after it without one. Each
    # attention-data-parallel rank schedules its own sequences. Decode: per
    # mean step (exact when the host is shorter, or longer, at every step).
    host = efficiency.host_time(hw, options, wl.batch * wl.beams / par.ep)
    tpot_all = efficiency.with_host(tpot_dev, host, hw, p)
    return Phases(pre=pre, dec=dec, pre_core=pre_core, pre_comm=pre_comm, pre_weight=pre_weight,
                  dec_core=dec_core, dec_comm=dec_comm, dec_weight=dec_weight, steps=steps, nmb=nmb,
                  e_pre=e_pre, e_dec=e_dec, pre_slow=pre_slow, dec_slow=dec_slow,
                  ttft=efficiency.with_host(ttft_dev, efficiency.host_time(hw, options, wl.batch / par.ep), hw, p),
                  decode_time=dec_slow * decode_time + steps * overhead + steps * (tpot_all - tpot_dev),
                  tpot=tpot_all, comm_time=comm_time, rows=rows)


def _stretch(seconds, floor, p):
    """max(seconds, floor) / seconds (smooth twin with p; 1 when seconds = 0)."""
    wa, wb = larger_weights(seconds, floor, p)
    ok = seconds > 0
    return jnp.where(ok, wa + wb * floor / jnp.where(ok, seconds, 1.0), 1.0)


def _footprint(model, hw, par, wl, pre, ub, options):
    """(weights, KV, activations) bytes per chip and whether they fit.

    "busiest_stage": the busiest stage of one chip, with the KV cache of
    every micro-batch in flight (ceil(batch/ep) sequences on an
    attention-data-parallel rank, 1/sp of each with context parallelism).
    "summed_stages" (GenZ): weights and KV summed over the stages, KV of one
    micro-batch, and "fits" against pp chips' off-chip memory
    (CONVENTIONS.md, "Summary numbers").
    """
    conv = options.conv
    act = memory.activation_bytes(pre)
    if conv.footprint == "summed_stages":
        w = memory.weights_bytes(pre)
        kv = state_bytes(model, par, replace(wl, batch=ub), options)
        return w, kv, act, w + kv <= jnp.sum(hw.memory.size) * par.pp
    w = memory.weights_bytes(dataclasses.replace(pre, count=pre.stage))
    resident = replace(wl, batch=jnp.ceil(wl.batch / par.ep))
    layers_stage = stage_counts(model, par, options.smooth)["layer"][1]
    kv = state_bytes(model, par, resident, options) * safe_div(layers_stage, model.layers) / par.cp
    return w, kv, act, w + kv + act <= memory.capacity_bytes(hw)


def state_bytes(model: Model, par: Parallel, wl: Workload, options: Options = Options()) -> jax.Array:
    """KV cache and Mamba state bytes of `wl`'s sequences on one tp (tp·ep
    with Conventions.heads_over_ep) shard, all layers (memory.kv_bytes):
    KV heads replicated when the split exceeds them, Mamba channels split
    like heads; GenZ's Mamba accounting counts its conv state once; local-
    attention layers hold their window (Conventions.local_attention)."""
    tp_kv = par.tp * (par.ep if options.conv.heads_over_ep else 1.0)
    heads_kv = jnp.maximum(jnp.ceil(model.kv_heads / tp_kv), 1.0)  # replicated when tp > kv heads
    d_inner = jnp.ceil(model.d_inner / tp_kv)
    return memory.kv_bytes(model, wl, heads_kv, d_inner, options.conv.mamba_accounting == "genz",
                           options.conv.local_attention and model.windowed)


def evaluate(model: Model, hardware: Hardware, parallel: Parallel, workload: Workload,
             options: Options = Options(), sharpness=DEFAULT_SHARPNESS, tables=None) -> Metrics:
    """Cost of serving `workload` with `model` on `hardware` split by `parallel`.

    Pure and jitted; vmap or grad it over any float leaf. `options` is static.
    `sharpness` is the traced p of the smooth max (used when options.smooth).
    `tables`: the deployment's `operator_tables`, built once and priced here
    (the two steps: tables, then pricing, e.g. `jax.vmap` over hardware
    numbers with the tables fixed); None builds them.
    """
    # Every argument passed the same way (positionally, sharpness as a float32
    # array): jit keys its cache on how arguments were passed, so calls with
    # and without `options` or a Python-float sharpness would compile twice.
    return _evaluate(model, hardware, parallel, workload, options, jnp.asarray(sharpness, jnp.float32), tables)


@functools.partial(jax.jit, static_argnames=("options",))
def _evaluate(model: Model, hardware: Hardware, parallel: Parallel, workload: Workload,
              options: Options, sharpness, tables) -> Metrics:
    conv = options.conv
    if model.attention == "mla" and not conv.mla:
        raise SpecError(f"the {options.profile} profile has no MLA (GenZ does not model it); use profile 'default'")
    p = sharpness if options.smooth else None
    wl, par = computed_workload(hardware, workload, options), parallel
    ph = phases(model, hardware, par, wl, options, p, tables)
    pre, nmb, ttft, decode_time, tpot = ph.pre, ph.nmb, ph.ttft, ph.decode_time, ph.tpot
    _, ub = microbatching(par, wl, options)
    e2e = ttft + decode_time
    throughput = par.dp * safe_div(wl.batch * wl.output, e2e)
    if conv.decode == "final_step":
        # GenZ: Ltot = (nmb - 1)·TPOT/pp + TPOT when pp > 1, and throughput is
        # decode tokens/s with beams not counted (CONVENTIONS.md, "Whole model").
        ltot = jnp.where(par.pp > 1.0, (nmb - 1.0) * tpot / par.pp + tpot, tpot)
        throughput = safe_div(wl.batch, ltot)

    w, kv, act, fits = _footprint(model, hardware, par, wl, pre, ub, options)
    divisible = functools.reduce(jnp.logical_and, divisibility(model, par, options).values())
    chips_ok = chips(par) <= chips_available(hardware)
    context = context_ok(model, wl)
    fill = 1.0 if conv.ttft == "last_microbatch" else 0.0
    bubble = fill * safe_div(par.pp - 1.0, nmb + par.pp - 1.0)
    # Energy of the request batch on one replica (static power over e2e on
    # every chip), average power and cost per token (cost.energy, cost.money).
    chips_used = parallel.tp * parallel.ep * parallel.cp * parallel.pp
    e_req = ph.e_pre + ph.e_dec + chips_used * hardware.power.static_power * e2e
    power = energy.average_power(e_req, e2e, parallel.dp)
    return Metrics(ttft=ttft, tpot=tpot, e2e=e2e, throughput=throughput, prefill_time=ttft,
                   decode_time=decode_time, comm_time=ph.comm_time, weights_bytes=w, kv_bytes=kv,
                   activation_bytes=act, memory_bytes=w + kv + act, capacity_bytes=memory.capacity_bytes(hardware),
                   chips=chips(parallel), fits=fits, feasible=fits & divisible & chips_ok & context,
                   divisible=divisible, chips_ok=chips_ok, bubble=bubble, context_ok=context,
                   energy_per_token_j=energy.per_token(e_req, wl), power_w=power,
                   cost_per_mtok_usd=money.cost_per_mtok(hardware, chips(parallel), power, throughput),
                   throttle=safe_div(e2e, safe_div(ttft, ph.pre_slow) + safe_div(decode_time, ph.dec_slow)),
                   prefill_clock=1.0 / ph.pre_slow, decode_clock=1.0 / ph.dec_slow)
