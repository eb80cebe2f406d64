"""Where the test suite's CPU time goes: JAX's own monitoring events
(trace, lowering, XLA backend compile, persistent-cache hits), summed per
program name over one run of the suite.

A pytest plugin and its report. Run the suite with the plugin, then print:

    PYTHONPATH=experiments .venv/bin/python -m pytest -q tests -p suite_compile_profile
    .venv/bin/python experiments/suite_compile_profile.py      # reads /tmp/jaxplat-compile-profile

Each pytest process (the controller and every xdist worker) writes its
events to $JAXPLAT_COMPILE_PROFILE (default /tmp/jaxplat-compile-profile)
as `PROCESS.json` when its session ends (the controller clears the
folder's earlier profiles when it starts). Subprocesses the tests start
(test_search_multiprocess's sweeps) are not counted. Seconds are CPU
seconds of the process that compiled (a worker compiles on one thread).
"""

import collections
import json
import os
import sys
from pathlib import Path

DEFAULT_DIR = "/tmp/jaxplat-compile-profile"
COMPILE = "/jax/core/compile/backend_compile_duration"
PHASES = {COMPILE: "XLA backend compile", "/jax/core/compile/jaxpr_trace_duration": "tracing",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering to StableHLO"}
HITS = "/jax/compilation_cache/cache_hits"

_events = []  # (event, seconds, program name or "")
_counts = collections.Counter()


def _out_dir() -> Path:
    return Path(os.environ.get("JAXPLAT_COMPILE_PROFILE", DEFAULT_DIR))


def pytest_configure(config):
    import jax.monitoring

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller starts before its workers: a fresh profile
        for old in _out_dir().glob("*.json"):
            old.unlink()

    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **kw: _events.append((event, seconds, str(kw.get("fun_name", "")))))
    jax.monitoring.register_event_listener(lambda event, **kw: _counts.update([event]))


def pytest_sessionfinish(session):
    # before tests/conftest.py's pytest_unconfigure, which ends an xdist worker without teardown
    out = _out_dir()
    out.mkdir(parents=True, exist_ok=True)
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    (out / f"{name}.json").write_text(json.dumps({"events": _events, "counts": _counts}))


def report(directory: Path) -> str:
    """The phases' totals, then the programs that took the most backend compile time."""
    events, counts = [], collections.Counter()
    files = sorted(directory.glob("*.json"))
    if not files:
        sys.exit(f"suite_compile_profile.py: no profile in {directory} (run the suite with "
                 "-p suite_compile_profile first)")
    for f in files:
        d = json.loads(f.read_text())
        events += d["events"]
        counts.update(d["counts"])
    lines = [f"{len(files)} pytest processes; persistent-cache hits: {counts[HITS]}"]
    for event, label in PHASES.items():
        s = [sec for e, sec, _ in events if e == event]
        lines.append(f"  {label:24s} {sum(s):8.1f} s over {len(s):5d} events")
    by = collections.defaultdict(list)
    for e, sec, fun in events:
        if e == COMPILE:
            by[fun].append(sec)
    lines.append("\nBackend compile time by program (the 15 largest):")
    for fun, s in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:15]:
        lines.append(f"  {fun or '?':32s} {sum(s):8.1f} s, {len(s):4d} compiles")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else _out_dir()))
