"""Per-operator breakdown: the operator table's own arrays, with times.

Not a second computation: the same `build_table` and `row_components` that
`evaluate` sums are returned per row.
"""

import functools

import jax
import jax.numpy as jnp

from jaxplat.hardware import Hardware
from jaxplat.inference import row_components, row_decode_sums
from jaxplat.model import Model
from jaxplat.operators import build_table
from jaxplat.options import Options
from jaxplat.parallel import Parallel
from jaxplat.roofline import combine, safe_div
from jaxplat.workload import Workload


@functools.partial(jax.jit, static_argnames=("phase", "options"))
def _arrays(model, hardware, parallel, workload, phase, options):
    t = build_table(model, parallel, workload, phase, options)
    c0, c1, m0, m1, comm = row_components(t, hardware, workload, options)
    if phase == "prefill":
        s = 0.0
        steps = 1.0
    elif options.genz:
        s = workload.output  # GenZ's decode step: KV at prompt + output
        steps = 1.0
    else:
        steps = jnp.maximum(workload.output - 1.0, 1.0)
        s = (1.0 + steps) / 2.0  # mean context over steps 1..O-1 (times are affine in s)
    compute, mem = c0 + c1 * s, m0 + m1 * s
    if phase == "decode" and not options.genz:
        time = row_decode_sums(t, hardware, workload, options, 1.0, steps) / steps
    else:
        time = combine(compute, mem, comm)
    f = t.f0 + t.f1 * s
    aff = lambda x0, x1: x0 + x1 * s  # noqa: E731
    return t, dict(count=t.count, flops=f, bytes_a=aff(t.a0, t.a1), bytes_w=aff(t.w0, t.w1),
                   bytes_o=aff(t.o0, t.o1), compute_time=compute, memory_time=mem, comm_time=comm,
                   time=time, total_time=t.count * time, intensity=safe_div(f, aff(t.a0 + t.w0 + t.o0, t.a1 + t.w1 + t.o1)),
                   m=t.m, k=t.k, n=t.n)


def breakdown(model: Model, hardware: Hardware, parallel: Parallel, workload: Workload,
              phase: str = "prefill", options: Options = Options()) -> dict:
    """Per-operator table of the prefill pass or of a decode step.

    Returns a dict of columns (lists, one entry per operator, SI units):
    name, group, count (times per pass), flops, bytes_a / bytes_w / bytes_o
    (input, weight-or-KV, output bytes), compute_time, memory_time,
    comm_time, time (one execution) and total_time (count x time), seconds,
    intensity (FLOP/byte), bound ('compute' / 'memory' / 'network'), m/k/n.
    A decode step is the mean step over the output (the genz profile: GenZ's
    step at context prompt + output).
    """
    t, cols = _arrays(model, hardware, parallel, workload, phase, options)
    out = {"name": list(t.names), "group": list(t.groups)}
    out.update({k: [float(x) for x in jax.device_get(v)] for k, v in cols.items()})
    out["bound"] = [
        "network" if kind else ("compute" if c >= mm else "memory") if (c or mm) else "-"
        for kind, c, mm in zip(t.comm_kinds, out["compute_time"], out["memory_time"])]
    return out
