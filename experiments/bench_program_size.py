"""How large the cost model's compiled programs are, and how long JAX and XLA
take to build them: lines of StableHLO, CPU seconds to trace and lower, and
CPU seconds of compile (the least of --repeats of each, summed), for
`evaluate` (four models of four kinds, tp 8, H100, chatbot), the training
step (Llama-3.1-8B on 2 x 4 H100s, Mixtral-8x7B with ep 4), the per-operator
breakdown (`cost.per_operator.operator_arrays`, three models, exact and
smooth) and the sweep engine's program that reports every metric
(search.values_program) for a catalog study (tests/test_catalog.py's: four
models of three kinds on four chips), compiled for one point (the CPU's
form) and batched over a chunk (jax.vmap, the other backends').
Compiles with the test suite's XLA settings (tests/conftest.py) unless
--xla-default. Run it on two commits to compare them (docs/testing.md).

    .venv/bin/python experiments/bench_program_size.py [--repeats 4] [--xla-default] [--only FAMILY[:NAME]]

Trace and lower: the first of the repeats, as a fresh process pays it. A
program traced after another that calls the same nested jits (`evaluate`'s
`_evaluate`, say) finds their traces cached, so compare two programs' trace
times in a process each (--only), e.g. the values program's two forms:

    .venv/bin/python experiments/bench_program_size.py --only "values:catalog, one point"
    .venv/bin/python experiments/bench_program_size.py --only "values:catalog, 512 points"
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST_XLA_FLAGS = ("--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
                  "--xla_cpu_parallel_codegen_split_count=1")  # tests/conftest.py's


CATALOG = dict(  # tests/test_catalog.py's study
    name="catalog", models=["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "jamba-1.5-mini"], workloads=["chatbot"],
    hardware=["h100-sxm", "h200-sxm", "b200", "mi300x"], axes=dict(tp=[1, 8], ep=[1, 8], batch=[1, 16]),
    constraints=dict(max_chips=32, ttft="none", tpot="none"),
    objective={"maximize": "throughput_per_chip"}, pareto=["tpot", "throughput_per_chip"], top_k=12,
    engine=dict(block=16, blocks_per_step=2, fast_compile=True))


def _programs():
    """(family, name, function that traces and lowers a fresh program) of every program measured."""
    import jax
    import jax.numpy as jnp

    import jaxplat as jp
    from jaxplat import search
    from jaxplat.cost import training as T
    from jaxplat.cost.per_operator import operator_arrays
    from jaxplat.search.values_program import chunk_size

    hw, wl = jp.load_hardware("h100-sxm"), jp.load_workload("chatbot")
    for name in ("llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "jamba-1.5-mini"):
        m = jp.load_model(name)
        yield "evaluate", name, lambda m=m: jax.jit(lambda h: jp.evaluate(m, h, jp.Parallel(tp=8), wl)).lower(hw)
    twl = T.TrainWorkload(global_batch=512.0, micro_batch=1.0, seq=4096.0)
    for name, par in (("llama-3.1-8b", jp.Parallel(tp=2, dp=4)), ("mixtral-8x7b", jp.Parallel(tp=2, ep=4, dp=8))):
        m = jp.load_model(name)
        yield "train_step", name, lambda m=m, par=par: jax.jit(lambda h: T.train_step(m, h, par, twl)).lower(hw)
    for name in ("llama-3.1-8b", "deepseek-v3", "jamba-1.5-mini"):
        m = jp.load_model(name)
        for smooth in (False, True):
            opts = jp.Options(smooth=smooth)
            yield "operator_arrays", f"{name}{' smooth' if smooth else ''}", lambda m=m, o=opts: jax.jit(
                lambda h: operator_arrays(m, h, jp.Parallel(tp=4, pp=2), wl, o)).lower(hw)
    engine = search.Engine(search.study_from_dict(CATALOG))
    n_axes, chunk = len(engine.st.axes), chunk_size(engine.top_k, engine.n_pareto)
    # A fresh function each time, so that JAX's caches of traces do not hold it.
    point = lambda: lambda v: engine._flat_point(v)  # noqa: E731
    yield "values", "catalog, one point", lambda: jax.jit(point()).lower(jax.ShapeDtypeStruct((n_axes,), jnp.float32))
    yield "values", f"catalog, {chunk} points", lambda: jax.jit(jax.vmap(point())).lower(
        jax.ShapeDtypeStruct((chunk, n_axes), jnp.float32))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4, help="compiles of each program; the least counts (default 4)")
    ap.add_argument("--xla-default", action="store_true", help="XLA's default settings, as a user's run compiles")
    ap.add_argument("--only", default="", help="one family (e.g. values) or program (e.g. 'values:catalog, one point')")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if not args.xla_default:  # before JAX starts its backend
        os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), FAST_XLA_FLAGS]).strip()
    sys.path.insert(0, ROOT)
    totals = {}
    for family, name, lower in _programs():
        if args.only and args.only not in (family, f"{family}:{name}"):
            continue
        build, best = None, float("inf")
        for _ in range(args.repeats):
            t = time.process_time()
            low = lower()  # a fresh jit each time (JAX keeps the traces of the nested jits it calls)
            build = time.process_time() - t if build is None else build  # the first: what a fresh process pays
            t = time.process_time()
            low.compile()
            best = min(best, time.process_time() - t)
        lines = low.as_text().count("\n")
        print(f"{family:16s} {name:24s} {lines:7,d} lines of StableHLO  {build:6.2f} CPU s to trace and lower  "
              f"{best:6.2f} CPU s to compile")
        n, b, s = totals.get(family, (0, 0.0, 0.0))
        totals[family] = (n + lines, b + build, s + best)
    for family, (n, b, s) in totals.items():
        print(f"{family:16s} {'all':24s} {n:7,d} lines of StableHLO  {b:6.2f} CPU s to trace and lower  "
              f"{s:6.2f} CPU s to compile")


if __name__ == "__main__":
    main()
