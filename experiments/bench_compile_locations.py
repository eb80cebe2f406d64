"""Compile time with and without Python tracebacks in the programs' source locations.

The locations are debug metadata that XLA carries through its passes, so leaving them out
(`jax_traceback_in_locations_limit` 0) might shorten the test suite's compiles. This prints, for the
max-load program of Llama-3.1-8B on one H100 (serving.max_load_jit: the serving model's
largest kind of program) compiled under the suite's XLA flags, the CPU seconds to lower
and to compile it with JAX's default limit and with 0, each the least of ROUNDS fresh
compiles (a new closure and a new constant each time, so no cache answers), the two
settings alternating so that a busy host slows both alike.

Run: .venv/bin/python experiments/bench_compile_locations.py [--rounds N]    (about 1 minute)
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import conftest  # noqa: E402, F401  (sets the suite's XLA flags in XLA_FLAGS before JAX starts)
import jax  # noqa: E402

import jaxplat as jp  # noqa: E402
from jaxplat import serving as S  # noqa: E402
from jaxplat.model import replace  # noqa: E402


def one_compile(model, hw, wl, k: int) -> tuple[float, float]:
    """(lower, compile) CPU seconds of a fresh max-load program."""
    srv = S.serving(mem_fraction=0.9 + 1e-4 * k)  # a new constant: no in-memory cache hit
    t0 = time.process_time()
    lowered = jax.jit(lambda h: S.max_load_jit(model, h, jp.Parallel(), wl, srv, jp.Options())).lower(hw)
    t1 = time.process_time()
    lowered.compile()
    return t1 - t0, time.process_time() - t1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    model, hw = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm")
    wl = replace(jp.load_workload("qa"), beams=1.0)
    default = jax.config.jax_traceback_in_locations_limit
    one_compile(model, hw, wl, -1)  # the first trace fills JAX's own caches: not timed
    times = {default: [], 0: []}
    for k in range(args.rounds):
        for limit in times:
            jax.config.update("jax_traceback_in_locations_limit", limit)
            times[limit].append(one_compile(model, hw, wl, k * 2 + (limit == 0)))
    print(f"max-load program, Llama-3.1-8B on one H100, least of {args.rounds} (CPU seconds)")
    for limit, ts in times.items():
        lower, comp = min(t for t, _ in ts), min(c for _, c in ts)
        print(f"  traceback limit {limit:>3}: lower {lower:.2f} s, compile {comp:.2f} s")
    a, b = (min(c for _, c in times[x]) for x in (default, 0))
    print(f"  compile with 0 / with {default}: {b / a:.2f}")


if __name__ == "__main__":
    main()
