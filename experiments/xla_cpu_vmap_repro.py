"""Minimal reproducer (jax only) of the XLA:CPU wrong result behind the
sweep's 2^15-point cap (search.devices.CPU_MAX_BLOCK), for an upstream report.

    f(a, b, w1, w2) = sum(w1 * a, axis=-1) + sum(w2 * b, axis=-1)
    a, b: float32[2048, 32, 35]; w1, w2: float32[32, 35] (broadcast over axis 0)

jitted on the CPU returns wrong values for every output row past 2^15 =
32768 (flat index of the [2048, 32] result); rows below are right, and so is
every row of a [1024, 32, 35] input (exactly 2^15 rows) or of one row more
([1025, 32, 35]: only the 32 rows past 2^15 are wrong). XLA:CPU compiles f
into one YNNPACK fusion (backend_config kind "__ynn_fusion"); compiled with
that fusion off (compiler option xla_cpu_experimental_ynn_fusion_type="", as
search.runtime.compile_lowered does for the sweep), every row is right. The
weights must vary along the reduced rows' leading axis (w of shape [32, 35]):
with w of shape [1, 35], or one reduction instead of two, it is right.

Found in jaxplat's codesign grid (experiments/codesign_vmap_repro.py: a
2048-chip x 32-candidate vmap of `evaluate`, whose decode sums are exactly
this pattern: per-row times weighted by per-candidate row counts, summed over
the operator rows); bisected by dumping its HLO (XLA_FLAGS=--xla_dump_to=...),
switching XLA:CPU options one at a time (only the YNN fusion option changed
the result) and rebuilding the failing __ynn_fusion in jnp.

Expected output (jax/jaxlib 0.10.2, Linux x86-64): "default: 32767 of 65536
rows wrong, first at row 32768", "ynn fusion off: 0 of 65536 rows wrong".
Exit status 1 when the defect is present.

    .venv/bin/python experiments/xla_cpu_vmap_repro.py
"""

import platform
import sys

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np


def f(a, b, w1, w2):
    return jnp.sum(w1 * a, axis=-1) + jnp.sum(w2 * b, axis=-1)


def wrong_rows(n, compiler_options=None):
    """(rows wrong, rows, first wrong flat row, kinds of fusion) for inputs [n, 32, 35]."""
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(0, 1, (n, 32, 35)).astype(np.float32) for _ in range(2))
    w1, w2 = (rng.uniform(0, 1, (32, 35)).astype(np.float32) for _ in range(2))
    compiled = jax.jit(f).lower(a, b, w1, w2).compile(compiler_options=compiler_options or {})
    got = np.asarray(compiled(a, b, w1, w2)).reshape(-1)
    want = (np.sum(w1.astype(np.float64) * a, -1) + np.sum(w2.astype(np.float64) * b, -1)).reshape(-1)
    bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-5))
    first = int(bad[0]) if bad.size else None
    if first is not None:
        print(f"    row {first}: expected {want[first]:.6f}, got {got[first]:.6f}")
    return bad.size, got.size, first, "__ynn_fusion" in compiled.as_text()


def main() -> int:
    print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, numpy {np.__version__}, python "
          f"{platform.python_version()}, {platform.machine()} {platform.system()}, devices {jax.devices()}")
    ynn_off = {"xla_cpu_experimental_ynn_fusion_type": ""}
    status = 0
    for n, label, opts in ((2048, "default", None), (1024, "default, [1024, 32, 35]", None),
                           (1025, "default, [1025, 32, 35]", None), (2048, "ynn fusion off", ynn_off)):
        try:
            bad, rows, first, ynn = wrong_rows(n, opts)
        except jax.errors.JaxRuntimeError as e:  # an XLA without the option
            print(f"{label}: {e}")
            continue
        print(f"{label}: {bad} of {rows} rows wrong" + (f", first at row {first}" if bad else "")
              + f" (YNN fusion in the program: {ynn})")
        status |= bool(bad)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
