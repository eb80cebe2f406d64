"""Sweep speed: full end-to-end configurations per second, and the baseline.

A 1.2e9-point study (Llama-3.1-70B, chatbot workload, prefill + the whole
decode per configuration) over tp x pp x batch (outer: these change the
operator table) and dense FLOP/s x HBM bandwidth x link bandwidth x SRAM size
(inner, hardware-only) runs for a few steps (it is not run to the end; the
rate is steady after the first step). Printed:

* compile time of the engine (`Engine.compile`: tracing, the XLA compiles
  of the step and of the operator tables' program, and that program's run
  over every outer point), seconds, cold and again with the persistent
  compilation cache warm (a rerun/resume);
* the equations grid_map sent to jax.vmap (search.gridmap.FALLBACKS: a
  primitive or a parameter it has no rule for);
* XLA's temp-buffer size for one step (compiled.memory_analysis()), and
  the step's kernels (fusions in the optimized HLO: on XLA:CPU each is
  compiled on its own, so their count drives the compile time);
* peak resident memory of this process (getrusage ru_maxrss: includes
  Python, JAX, the compile and every step run), which stays flat with the
  number of steps (the host keeps only top-k, front and counters);
* configurations/s of the engine on all devices;
* configurations/s of a plain Python loop calling jitted `jaxplat.evaluate`
  once per configuration (the code a user would otherwise write), on a small
  sample, and the ratio;
* with --compare-vmap, one block's evaluation (no summaries) with jax.vmap,
  with batching.vmap_last (the batch axis last) and the engine's own block
  (batching.grid_map over a grid of hardware axes, the outer part read from
  the hoisted tables), configurations/s each.

On CPU the engine runs one host device per core (search.split_cpu_devices),
as `jaxplat sweep` does; --devices 1 gives the single-device figure.

With --study FILE, any study is swept instead (e.g. the outer-heavy
specs/studies/catalog-parallelism.yaml: every configuration its own model,
chip, use case, dtype and parallelism, nothing factorizes). On a CPU the
run's CPU time is printed too, and the rate it gives per device thread (the
wall-clock rate of a shared machine counts other processes' time).
experiments/bench_gpu.sh runs both benches on an accelerator.

Usage: .venv/bin/python experiments/bench_sweep.py [--study FILE] [--seconds 20] [--block N] [--devices N]
                                                   [--fast-compile]
The last line is `configs/s: N`.
"""

import argparse
import math
import os
import resource
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat import search
from jaxplat.search import gridmap, load_study, study_from_dict, vmap_last

STUDY = dict(
    name="bench-1e9", models=["llama-3.1-70b"], workloads=["chatbot"], hardware="h200-sxm",
    axes=dict(tp=[8, 4, 2, 1], pp=[8, 4, 2, 1], batch={"pow2": [1, 256]},
              flops={"log": [1e14, 1e16], "count": 128}, hbm_bandwidth={"log": [1e12, 3.2e13], "count": 128},
              link_bandwidth={"log": [2.5e10, 3.2e12], "count": 32}, sram_size={"log": [1e7, 1e9], "count": 16}),
    constraints=dict(max_chips=64, ttft="workload", tpot="workload"),
    objective={"maximize": "throughput_per_chip"}, pareto=["tpot", "throughput_per_chip"], top_k=20)


def python_loop_rate(engine, n=200) -> float:
    """Configurations/s of the per-configuration path: jitted `jaxplat.evaluate`
    called once per configuration (Engine.values' code for one point)."""
    study = engine.study
    one = jax.jit(engine._flat_point)
    values = engine.axis_values(np.random.default_rng(0).integers(0, study.size, n))
    jax.block_until_ready(one(values[0]))  # compile
    t = time.perf_counter()
    for j in range(n):
        float(one(values[j])[0][0])
    return n / (time.perf_counter() - t)


def _has_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _best_rate(f, arg, n, repeats=5) -> float:
    jax.block_until_ready(f(arg))
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(arg))
        best = min(best, time.perf_counter() - t)
    return n / best


def inner_map_rates(engine, n) -> tuple[float, float, float]:
    """Configurations/s of one block's evaluation (no summaries), one device:
    n random hardware points of one outer point with jax.vmap and with
    batching.vmap_last, and the engine's own block (batching.grid_map over
    the block's grid of hardware axes; the outer part read from the hoisted
    tables, so it is not timed there)."""
    st = engine.study
    ov = [jnp.float32(a.values[len(a) // 2]) for a in st.outer]
    rng = np.random.default_rng(0)
    iv = [jnp.asarray(rng.choice(a.values, n), jnp.float32) for a in st.inner]
    rates = []
    for inner in (jax.vmap(lambda iv: engine._point(ov, iv)),
                  vmap_last(lambda iv: engine._point(ov, iv), in_axes=(-1,))):
        rates.append(_best_rate(jax.jit(lambda iv, inner=inner: inner(iv)["score"]), iv, n))
    block = jnp.int32(len(st.outer[0]) // 2 * engine.grid.per_row)
    tables = tuple(t.addressable_shards[0].data for t in engine._tables)  # one device's copy
    rates.append(_best_rate(jax.jit(lambda k: engine._block(k, tables)[0]["score"]), block, n))
    return tuple(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", help="a study YAML file to sweep instead of the built-in factorized bench "
                                    "(e.g. specs/studies/catalog-parallelism.yaml, the outer-heavy case)")
    ap.add_argument("--seconds", type=float, default=20.0, help="sweep this long (s), then stop")
    ap.add_argument("--block", type=int, help="configurations per block (default: the study's, else the device's)")
    ap.add_argument("--blocks-per-step", type=int, help="default: the study's, else the device's")
    ap.add_argument("--loop-sample", type=int, default=200, help="configurations in the Python-loop baseline")
    ap.add_argument("--fast-compile", action="store_true", help="engine.fast_compile (CPU: older XLA loop emitters)")
    ap.add_argument("--compare-vmap", action="store_true",
                    help="also time one block's evaluation with jax.vmap vs batching.vmap_last")
    ap.add_argument("--devices", type=int, help="CPU host devices (default: one per core, as `jaxplat sweep`)")
    args = ap.parse_args()
    search.split_cpu_devices(args.devices)  # before JAX starts its backends

    search.enable_compilation_cache(tempfile.mkdtemp(prefix="jaxplat-bench-cache-"))  # starts cold
    if args.study:
        study = load_study(args.study)
    else:
        study = study_from_dict({**STUDY, "engine": {"fast_compile": args.fast_compile}})
    fast = True if args.fast_compile else None

    def make_engine():
        return search.Engine(study, block=args.block, blocks_per_step=args.blocks_per_step, fast_compile=fast)
    engine = make_engine()
    g = engine.grid
    side = "hardware" if study.inner else "grid: " + ", ".join(a.name for a in engine.st.inner)
    print(f"study {study.name}: {study.size:,} configurations ({g.n_outer:,} outer x {g.n_inner:,} {side}); "
          f"blocks of {g.co} x {g.ci}, {engine.blocks_per_step} per device per step, {engine.n_dev} device(s) "
          f"({jax.devices()[0].platform}: {jax.devices()[0].device_kind}); jax {jax.__version__}")
    cpu0 = time.process_time()
    compile_s = engine.compile()
    compile_cpu = time.process_time() - cpu0
    mem = engine._compiled.memory_analysis()
    temp = getattr(mem, "temp_size_in_bytes", float("nan")) if mem is not None else float("nan")
    print(f"compile: {compile_s:.2f} s (trace, XLA compile of the step, of the top-k values' program and of "
          f"the operator tables' program and its run; cold cache; {compile_cpu:.1f} s of CPU time in this process)")
    print(f"grid_map equations batched by jax.vmap instead of a rule (gridmap.FALLBACKS): "
          f"{dict(gridmap.FALLBACKS) or 'none'}")
    # The same study again (a rerun or a resume), as `jaxplat sweep` does: the
    # persistent compilation cache (a fresh directory here) skips XLA.
    t = time.perf_counter()
    make_engine().compile()
    print(f"compile again: {time.perf_counter() - t:.2f} s (trace + persistent-cache hit)")
    per_step = engine.blocks_per_step * g.co * g.ci  # configurations one device runs per step
    print(f"XLA temp buffers per step: {temp / 1e6:.1f} MB ({temp / per_step:.0f} B per configuration of a step)")
    hlo = engine._compiled.as_text()
    print(f"step program: {hlo.count(' fusion(')} kernels ({hlo.count('reduce-window(')} reduce-windows)")

    # Warm-up (first execution), then one timed step to size the timed run.
    search.run(engine, progress=False, max_steps=1)
    t = time.perf_counter()
    search.run(engine, progress=False, max_steps=1)
    step_s = time.perf_counter() - t
    n_steps = max(2, int(args.seconds / step_s))
    # One continuous run: the next step is dispatched before the host merges the last.
    # A study that ends sooner is swept again, until --seconds have passed.
    t, cpu0 = time.perf_counter(), time.process_time()
    configs, passes = 0, 0
    while passes == 0 or time.perf_counter() - t < args.seconds:
        res = search.run(engine, progress=passes == 0 and _has_tqdm(), max_steps=n_steps)
        configs, passes = configs + int(res.counts[0]), passes + 1
    dt, cpu = time.perf_counter() - t, time.process_time() - cpu0
    rate = configs / dt
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(f"swept {configs:,} configurations of {study.size:,} in {dt:.2f} s ({passes} pass(es) of up to "
          f"{n_steps} steps); "
          f"last pass: feasible {int(res.counts[1]):,}, meet SLOs {int(res.counts[2]):,}")
    print(f"peak resident memory (ru_maxrss, whole process incl. compile): {rss / 1e9:.2f} GB")
    if jax.devices()[0].platform == "cpu":
        # On a shared machine the wall-clock rate counts other processes' time:
        # this one used `cpu` seconds of CPU over the run, on n_dev threads.
        print(f"CPU time of the run: {cpu:.2f} s on {engine.n_dev} device thread(s): "
              f"{configs / cpu * engine.n_dev:.4g} configs/s if each device had a core to itself "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    loop = python_loop_rate(engine, args.loop_sample)
    print(f"python loop over jaxplat.evaluate: {loop:.4g} configs/s ({args.loop_sample} configurations)")
    print(f"speed-up of the engine over the loop: {rate / loop:.4g}x")
    if args.compare_vmap and study.inner:
        plain, last, grid = inner_map_rates(engine, g.ci)
        print(f"one block of {g.ci} hardware points, evaluation only, one device: jax.vmap {plain:.4g} configs/s, "
              f"vmap_last {last:.4g} configs/s ({last / plain:.3g}x), engine block (grid_map, outer part "
              f"hoisted, not timed) {grid:.4g} configs/s ({grid / plain:.3g}x)")
    print(f"configs/s: {rate:.4g}")


if __name__ == "__main__":
    main()
