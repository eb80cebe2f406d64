"""How large the cost model's compiled programs are, and how long XLA takes
to compile them: lines of StableHLO and CPU seconds of compile (the least of
--repeats compiles of each program, summed), for `evaluate` (four models of
four kinds, tp 8, H100, chatbot), the training step (Llama-3.1-8B on 2 x 4
H100s, Mixtral-8x7B with ep 4) and the per-operator breakdown
(`cost.per_operator.operator_arrays`, three models, exact and smooth).
Compiles with the test suite's XLA settings (tests/conftest.py) unless
--xla-default. Run it on two commits to compare them (docs/index.md, "The
tests").

    .venv/bin/python experiments/bench_program_size.py [--repeats 4] [--xla-default]
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST_XLA_FLAGS = ("--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
                  "--xla_cpu_parallel_codegen_split_count=1")  # tests/conftest.py's


def _programs():
    """(family, name, jitted fn of the chip, chip) of every program measured."""
    import jax

    import jaxplat as jp
    from jaxplat.cost import training as T
    from jaxplat.cost.per_operator import operator_arrays

    hw, wl = jp.load_hardware("h100-sxm"), jp.load_workload("chatbot")
    for name in ("llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "jamba-1.5-mini"):
        m = jp.load_model(name)
        yield "evaluate", name, lambda m=m: jax.jit(lambda h: jp.evaluate(m, h, jp.Parallel(tp=8), wl)), hw
    twl = T.TrainWorkload(global_batch=512.0, micro_batch=1.0, seq=4096.0)
    for name, par in (("llama-3.1-8b", jp.Parallel(tp=2, dp=4)), ("mixtral-8x7b", jp.Parallel(tp=2, ep=4, dp=8))):
        m = jp.load_model(name)
        yield "train_step", name, lambda m=m, par=par: jax.jit(lambda h: T.train_step(m, h, par, twl)), hw
    for name in ("llama-3.1-8b", "deepseek-v3", "jamba-1.5-mini"):
        m = jp.load_model(name)
        for smooth in (False, True):
            opts = jp.Options(smooth=smooth)
            yield "operator_arrays", f"{name}{' smooth' if smooth else ''}", lambda m=m, o=opts: jax.jit(
                lambda h: operator_arrays(m, h, jp.Parallel(tp=4, pp=2), wl, o)), hw


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4, help="compiles of each program; the least counts (default 4)")
    ap.add_argument("--xla-default", action="store_true", help="XLA's default settings, as a user's run compiles")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if not args.xla_default:  # before JAX starts its backend
        os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), FAST_XLA_FLAGS]).strip()
    sys.path.insert(0, ROOT)
    totals = {}
    for family, name, make, hw in _programs():
        best = float("inf")
        for _ in range(args.repeats):
            low = make().lower(hw)  # a fresh jit each time: nothing cached in memory
            t = time.process_time()
            low.compile()
            best = min(best, time.process_time() - t)
        lines = low.as_text().count("\n")
        print(f"{family:16s} {name:24s} {lines:7,d} lines of StableHLO  {best:6.2f} CPU s to compile")
        n, s = totals.get(family, (0, 0.0))
        totals[family] = (n + lines, s + best)
    for family, (n, s) in totals.items():
        print(f"{family:16s} {'all':24s} {n:7,d} lines of StableHLO  {s:6.2f} CPU s to compile")


if __name__ == "__main__":
    main()
