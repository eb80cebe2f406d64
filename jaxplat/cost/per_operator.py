"""Per-operator breakdown: the operator table's own arrays, with times.

Not a second computation: the per-row arrays `evaluate` reduces
(`inference.phases`) are returned per row. Each report comes in two halves:
traceable arrays (`operator_arrays`, `comm_arrays`: `jaxplat estimate`
computes them in the one compiled call that evaluates, cli.compiled) and the
host rows made from them (`breakdown_rows`, `comm_rows`).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import collectives, efficiency
from jaxplat.cost.dtypes import computed_workload
from jaxplat.cost.inference import phases
from jaxplat.cost.operators import build_table
from jaxplat.cost.roofline import safe_div
from jaxplat.model import MAX_NET_LEVELS, Hardware, Model, Options, Parallel, Workload

PHASES = ("prefill", "decode")


def operator_arrays(model, hardware, parallel, workload, options) -> dict:
    """{phase: (table, columns)} of `breakdown` for both phases from one
    `phases` (traceable)."""
    workload = computed_workload(hardware, workload, options)  # as `phases` prices it
    ph = phases(model, hardware, parallel, workload, options)
    return {phase: _columns(ph, phase, hardware, parallel, workload, options) for phase in PHASES}


@functools.partial(jax.jit, static_argnames=("phase", "options"))
def _arrays(model, hardware, parallel, workload, phase, options):
    workload = computed_workload(hardware, workload, options)
    return _columns(phases(model, hardware, parallel, workload, options), phase, hardware, parallel, workload,
                    options)


def _columns(ph, phase, hardware, parallel, workload, options):
    t = ph.pre if phase == "prefill" else ph.dec
    n = len(ph.pre.kinds)  # the prefill's rows first
    c0, c1, m0, m1, comm = (x[:n] if phase == "prefill" else x[n:] for x in ph.rows)
    hidden = 1.0 - jnp.clip(parallel.overlap, 0.0, 1.0)
    if phase == "prefill":
        s = 0.0
        time, weight = ph.pre_slow * (ph.pre_core + ph.pre_comm), ph.pre_weight
    elif options.conv.decode == "final_step":
        s = workload.output  # GenZ's decode step: KV at prompt + output
        time, weight = ph.dec_slow * (ph.dec_core + ph.dec_comm), ph.dec_weight
    else:
        steps = jnp.maximum(ph.steps, 1.0)
        s = (1.0 + steps) / 2.0  # mean context over steps 1..O-1 (times are affine in s)
        time, weight = ph.dec_slow * safe_div(ph.dec_core + ph.dec_comm, ph.steps), ph.dec_weight
    # The fixed costs (launches, a dataflow fabric's crossing) sit inside both
    # roofline sides (row_components: max(c + L, m + L) = max(c, m) + L); the
    # table shows them once, in their own column, so that the columns add up.
    fixed = efficiency.fixed_times(t, hardware, options)
    compute, mem = c0 + c1 * s - fixed, m0 + m1 * s - fixed
    f = t.f0 + t.f1 * s
    aff = lambda x0, x1: x0 + x1 * s  # noqa: E731
    cols = dict(count=t.count, weight=weight, flops=f, bytes_a=aff(t.a0, t.a1), bytes_w=aff(t.w0, t.w1),
                bytes_o=aff(t.o0, t.o1), compute_time=compute, memory_time=mem, fixed_time=fixed, comm_time=comm,
                exposed_comm_time=hidden * comm, time=time, total_time=weight * time,
                intensity=safe_div(f, aff(t.a0 + t.w0 + t.o0, t.a1 + t.w1 + t.o1)), m=t.m, k=t.k, n=t.n)
    if options.conv.efficiency != "flat":
        # The engine's own time per pass or step (scheduling, sampling:
        # efficiency.iteration_overhead), which evaluate adds to the kernels':
        # one more row of breakdown_rows.
        cols[_OVERHEAD] = jnp.reshape(efficiency.iteration_overhead(hardware, options, parallel.tp), (1,))
    return t, cols


_OVERHEAD = "iteration_overhead"


def breakdown(model: Model, hardware: Hardware, parallel: Parallel, workload: Workload,
              phase: str = "prefill", options: Options = Options()) -> dict:
    """Per-operator table of the prefill pass or of a decode step: the
    arrays `evaluate` reduces (`inference.phases`), so `total_time` sums to
    its TTFT (prefill) or TPOT (decode).

    Returns a dict of columns (lists, one entry per operator, SI units):
    name, group, count (times per pass), weight (times on the TTFT path, or
    per pipeline round of decode: count, plus (nmb - 1) x the busiest
    stage's runs for the pipeline's later micro-batches), flops, bytes_a /
    bytes_w / bytes_o (input, weight-or-KV, output bytes), compute_time,
    memory_time (their roofline times), fixed_time (kernel launches and a
    dataflow chip's fabric crossing, efficiency.fixed_times: one execution
    costs max(compute, memory) + fixed, or their p-norm + fixed on the rows
    `efficiency.overlap_exponents` names), comm_time (the whole collective), exposed_comm_time (what
    `Parallel.overlap` leaves), time (one execution: that + exposed
    communication, times the phase's power-limit stretch
    `Metrics.throttle` when the chips are held at TDP; decode: the mean over
    the steps) and total_time
    (weight x time), seconds, intensity (FLOP/byte), bound ('compute' /
    'memory' / 'network'), m/k/n. A decode step's columns are those at the
    mean context over the output (the genz profile: GenZ's step at prompt +
    output); its time is the exact mean over the steps. A last row
    'iteration_overhead' (group 'engine') holds the engine's time per pass
    or step outside the kernels (not under the genz profile's flat
    efficiency).
    """
    return breakdown_rows(*_arrays(model, hardware, parallel, workload, phase, options))


def breakdown_rows(t, cols) -> dict:
    """`breakdown`'s dict of columns from one phase's (table, columns) of
    `operator_arrays` (host)."""
    cols = dict(cols)
    overhead = cols.pop(_OVERHEAD, None)
    out = {"name": list(t.names), "group": list(t.groups)}
    out.update({k: [float(x) for x in jax.device_get(v)] for k, v in cols.items()})
    out["bound"] = [
        "network" if kind else ("compute" if c >= mm else "memory") if (c or mm) else "-"
        for kind, c, mm in zip(t.comm_kinds, out["compute_time"], out["memory_time"])]
    if overhead is not None:  # the engine's time outside the kernels: a row of its own
        over = float(jax.device_get(overhead)[0])
        row = {k: 0.0 for k in cols} | {"count": 1.0, "weight": 1.0, "time": over, "total_time": over}
        out["name"].append(_OVERHEAD)
        out["group"].append("engine")
        out["bound"].append("-")
        for k, v in row.items():
            out[k].append(v)
    return out


def comm_breakdown(model: Model, hardware: Hardware, parallel: Parallel, workload: Workload,
                   options: Options = Options()) -> list[dict]:
    """Communication of one deployment, per collective row and network level.

    The collective rows of the same operator tables `evaluate` uses (prefill
    pass and one decode step), with the time of one call split over the
    network levels (collectives.describe; the genz profile charges GenZ's one
    link, level 0). Rows whose group is a single chip are left out.

    Returns a list of dicts, one per collective row and phase:
      phase ('prefill' / 'decode'), name (row name, e.g. 'attn_allreduce'),
      kind ('allreduce', 'allgather', 'reducescatter', 'alltoall',
      'sendrecv'), group (chips; for sendrecv the rank span, 2 x stage chips),
      stride (ranks between the group's members: 1 for tp, tp for sp, tp·sp
      for ep),
      payload_bytes (per chip, one call), calls (per pass: layers of the
      row's group over the whole pipeline), form ('hierarchical', 'flat',
      'point-to-point'; 'genz' in that profile), level_seconds (list, one
      call, innermost level first), algorithms (fastest per level, '' when a
      level is idle), seconds (one call), total_seconds (calls x seconds).
    A decode step's rows are those of the step at the mean context (the
    genz profile: at prompt + output); collectives do not depend on it.
    """
    tables = {phase: _tables(model, parallel, workload, phase, options) for phase in PHASES}
    return comm_rows(tables, _comm_arrays(tables, hardware, options), options)


def comm_arrays(tables: dict, hardware: Hardware, options: Options) -> dict:
    """What `comm_breakdown` reports of the collective rows of `tables`
    ({phase: OpTable}), as arrays (traceable): {phase: {kind: the arrays of
    collectives.describe_arrays for the table's rows of that kind, in table
    order, or {"seconds": GenZ's times}}}."""
    out = {}
    for phase, t in tables.items():
        out[phase] = {}
        for kind in dict.fromkeys(k for k in t.comm_kinds if k):
            idx = np.array([i for i, k in enumerate(t.comm_kinds) if k == kind])
            n, b, s = t.comm_n[idx], t.comm_b[idx], t.comm_s[idx]
            if options.conv.collectives == "genz":
                out[phase][kind] = {"seconds": jax.vmap(lambda n, b, kind=kind: collectives.genz_collective_time(
                    kind, hardware, n, b))(n, b)}
            else:
                out[phase][kind] = collectives.describe_arrays(kind, hardware, n, b, s)
    return out


# One compiled call rather than op by op (eagerly, a deployment's report compiled ~250 small kernels).
_comm_arrays = jax.jit(comm_arrays, static_argnames="options")


def comm_rows(tables: dict, arrays: dict, options: Options) -> list[dict]:
    """`comm_breakdown`'s rows from `tables` and their `comm_arrays` (host)."""
    out = []
    for phase in sorted(tables, key=PHASES.index):  # a pytree round trip sorts dict keys
        t, per_kind = jax.device_get((tables[phase], arrays[phase]))
        seen = dict.fromkeys(per_kind, 0)  # rows of each kind read so far: their index in `per_kind[kind]`
        for i, kind in enumerate(t.comm_kinds):
            if not kind:
                continue
            j, seen[kind] = seen[kind], seen[kind] + 1
            if float(t.comm_n[i]) <= 1.0 or float(t.count[i]) == 0.0:
                continue
            row = {k: v[j] for k, v in per_kind[kind].items()}
            n, nbytes, calls = float(t.comm_n[i]), float(t.comm_b[i]), float(t.count[i])
            if options.conv.collectives == "genz":
                sec = float(row["seconds"])
                levels = [sec] + [0.0] * (MAX_NET_LEVELS - 1)
                info = {"form": "genz", "levels": levels, "algorithms": ["genz"] + [""] * (len(levels) - 1),
                        "seconds": sec}
            else:
                info = collectives.describe_rows(kind, row)
            out.append(dict(phase=phase, name=t.names[i], kind=kind, group=n, stride=float(t.comm_s[i]),
                            payload_bytes=nbytes, calls=calls,
                            form=info["form"], level_seconds=info["levels"], algorithms=info["algorithms"],
                            seconds=info["seconds"], total_seconds=calls * info["seconds"]))
    return out


@functools.partial(jax.jit, static_argnames=("phase", "options"))
def _tables(model, parallel, workload, phase, options):
    return build_table(model, parallel, workload, phase, options)

