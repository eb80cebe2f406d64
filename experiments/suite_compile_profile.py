"""Where the test suite's CPU time goes: JAX's own monitoring events
(trace, lowering, XLA backend compile, persistent-cache hits), summed per
program name over one run of the suite, and the CPU seconds of every test
(its process's own, and its subprocesses' once waited for), summed per
module.

A pytest plugin and its report. Run the suite with the plugin, then print:

    PYTHONPATH=experiments .venv/bin/python -m pytest -q tests -p suite_compile_profile
    .venv/bin/python experiments/suite_compile_profile.py      # reads /tmp/jaxplat-compile-profile

With JAXPLAT_TEST_CACHE_DIR set to an empty folder (the suite's persistent
compilation cache, shared by its workers) it also sums the CPU seconds of
the cache's writes, reads and keys, and what its hits spared:

    JAXPLAT_TEST_CACHE_DIR=$(mktemp -d) PYTHONPATH=experiments \
        .venv/bin/python -m pytest -q tests -p suite_compile_profile

It also hashes every program XLA compiles (its StableHLO, without source
locations) and reports the compiles of a program the same process had
compiled before (a cache that missed: a new `jax.jit` of the same function,
an AOT `.compile()` called again) and of programs more than one worker
compiled, with the CPU seconds of those compiles (the process's, so two
threads compiling side by side, as the sweep engine's do, count each
other's) and the modules they came from.

Each pytest process (the controller and every xdist worker) writes its
events to $JAXPLAT_COMPILE_PROFILE (default /tmp/jaxplat-compile-profile)
as `PROCESS.json` when its session ends (the controller clears the
folder's earlier profiles when it starts). The events leave out the
subprocesses the tests start (test_search_multiprocess's sweeps, the
command-line runs); the per-test CPU seconds count them. An event's seconds
are wall seconds of the worker that compiled, so they grow while other
processes share its core; the per-test figures are CPU seconds
(`os.times`), which do not. On 2 cores the suite's wall time is about
half the tests' CPU seconds: only less CPU time makes it shorter.
"""

import collections
import json
import os
import sys
from pathlib import Path

import pytest

DEFAULT_DIR = "/tmp/jaxplat-compile-profile"
COMPILE = "/jax/core/compile/backend_compile_duration"
PHASES = {COMPILE: "XLA backend compile", "/jax/core/compile/jaxpr_trace_duration": "tracing",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering to StableHLO"}
HITS = "/jax/compilation_cache/cache_hits"
# A hit's stored compile time (whole seconds, rounded down) less its read's wall time, and that read time.
SAVED, RETRIEVED = "/jax/compilation_cache/compile_time_saved_sec", "/jax/compilation_cache/cache_retrieval_time_sec"

_events = []  # (event, seconds, program name or "")
_counts = collections.Counter()
_tests = {}  # test id -> [own CPU s, children's CPU s]
_started = {}  # test id -> `_cpu()` at its setup
_cache = collections.Counter()  # the persistent cache's CPU seconds and counts (`_time_cache`)
_compiles = []  # (program hash, program name, test id, CPU s of its compile) (`_hash_compiles`)
_current = ["(outside a test)"]


def _cpu():
    """(this process's CPU s, its waited-for children's CPU s)."""
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


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
    _time_cache()
    _hash_compiles()


def _hash_compiles():
    """Wrap JAX's compile entry point (jax._src.compiler.compile_or_get_cached, private, as in JAX 0.10) to
    record, per compile, a hash of the program's StableHLO bytecode without debug information, its name,
    the test that asked and its CPU seconds: the same hash twice in one process is the same program
    compiled again."""
    import hashlib

    from jax._src import compiler

    compile_ = compiler.compile_or_get_cached

    def hashed(backend, computation, *args, **kwargs):
        t = _cpu()[0]
        out = compile_(backend, computation, *args, **kwargs)
        cpu = _cpu()[0] - t
        op = computation.operation
        digest = hashlib.sha1(op.get_asm(binary=True, enable_debug_info=False)).hexdigest()
        _compiles.append((digest, str(op.attributes["sym_name"]).strip('"'), _current[0], cpu))
        return out

    compiler.compile_or_get_cached = hashed


def _time_cache():
    """Wrap the persistent cache's three steps (JAX's private functions, jax._src.compiler and
    jax._src.cache_key, as in JAX 0.10) to sum their CPU seconds: write (serialize, compress, store
    an executable), read (load, decompress, deserialize one, or find none) and key (hash the program);
    "writes" counts the programs compiled in at least JAX's minimum time to be written. Hits and what
    they spared are JAX's own events (HITS, SAVED, RETRIEVED)."""
    from jax._src import cache_key, compiler

    def timed(fn, name):
        def call(*args, **kwargs):
            t = _cpu()[0]
            out = fn(*args, **kwargs)
            _cache[name] += _cpu()[0] - t
            return out
        return call

    write = timed(compiler._cache_write, "write")

    def write_counted(cache_key_, compile_time, *args, **kwargs):
        _cache["writes"] += compile_time >= compiler.config.persistent_cache_min_compile_time_secs.value
        return write(cache_key_, compile_time, *args, **kwargs)

    compiler._cache_write, compiler._cache_read = write_counted, timed(compiler._cache_read, "read")
    cache_key.get = timed(cache_key.get, "key")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _current[0] = item.nodeid
    _started[item.nodeid] = _cpu()  # in the process that runs the test (a worker, not xdist's controller)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    # after pytest's own teardown, so a module's fixtures count in its last test's teardown;
    # they are built in the first test that asks for them
    own0, kids0 = _started.pop(item.nodeid)
    own, kids = _cpu()
    _tests[item.nodeid] = [own - own0, kids - kids0]


def pytest_sessionfinish(session):
    # before tests/conftest.py's pytest_unconfigure, which ends an xdist worker without teardown
    out = _out_dir()
    out.mkdir(parents=True, exist_ok=True)
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    (out / f"{name}.json").write_text(json.dumps({"events": _events, "counts": _counts, "tests": _tests,
                                                  "cache": _cache, "compiles": _compiles}))


def report(directory: Path) -> str:
    """The phases' totals, the programs that took the most backend compile time, then the tests' CPU seconds."""
    events, counts, tests, cache, compiles = [], collections.Counter(), {}, collections.Counter(), {}
    files = sorted(directory.glob("*.json"))
    if not files:
        sys.exit(f"suite_compile_profile.py: no profile in {directory} (run the suite with "
                 "-p suite_compile_profile first)")
    for f in files:
        d = json.loads(f.read_text())
        events += d["events"]
        counts.update(d["counts"])
        tests.update(d.get("tests", {}))
        cache.update(d.get("cache", {}))
        compiles[f.stem] = d.get("compiles", [])
    lines = [f"{len(files)} pytest processes; persistent-cache hits: {counts[HITS]}"]
    if cache["writes"] or counts[HITS]:
        spared = sum(sec for e, sec, _ in events if e in (SAVED, RETRIEVED))
        lines.append(f"  persistent cache: {cache['writes']} writes {cache['write']:.1f} CPU s, reads "
                     f"{cache['read']:.1f} CPU s, keys {cache['key']:.1f} CPU s; the hits spared {spared:.0f} s "
                     "of compiling (whole seconds as JAX stores them, rounded down)")
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
    lines += _duplicate_lines(compiles)
    lines += _cpu_lines(tests, compiles)
    return "\n".join(lines)


def _duplicate_lines(compiles: dict) -> list:
    """Programs compiled again in a process that had compiled them, and programs compiled by several
    workers (the cheapest of their compiles each), with their CPU seconds."""
    if not any(compiles.values()):
        return []
    total = sum(c[3] for log in compiles.values() for c in log)
    again = collections.defaultdict(lambda: [0, 0.0])  # (program, module) -> [compiles, CPU s]
    workers = collections.defaultdict(dict)  # hash -> {process: (program, module, CPU s)}
    for process, log in compiles.items():
        seen = set()
        for digest, name, test, cpu in log:
            module = test.split("::")[0]
            if digest in seen:
                again[name, module][0] += 1
                again[name, module][1] += cpu
            seen.add(digest)
            workers[digest].setdefault(process, (name, module, cpu))
    n_again, s_again = sum(v[0] for v in again.values()), sum(v[1] for v in again.values())
    lines = [f"\nCompiles: {sum(map(len, compiles.values()))}, {total:.0f} CPU s; of a program the same process "
             f"had compiled before: {n_again}, {s_again:.1f} CPU s (the largest, by program and module):"]
    lines += [f"  {s:6.1f} s {n:4d}x  {name}  {module}" for (name, module), (n, s) in
              sorted(again.items(), key=lambda kv: -kv[1][1])[:8]]
    shared = []  # (the cheapest compile's CPU s, ["process:module", ...], program name)
    for by_process in workers.values():
        if len(by_process) > 1:
            cpu = min(c for _, _, c in by_process.values())
            where = sorted(f"{p}:{m}" for p, (_, m, _) in by_process.items())
            shared.append((cpu, where, next(iter(by_process.values()))[0]))
    lines.append(f"Programs more than one process compiled: {len(shared)}, "
                 f"{sum(s[0] for s in shared):.1f} CPU s spent again (the largest):")
    lines += [f"  {s:6.1f} s  {name}  {', '.join(where)}" for s, where, name in sorted(shared, reverse=True)[:8]]
    return lines


def _cpu_lines(tests: dict, compiles: dict) -> list:
    """CPU seconds of the tests (own and subprocesses'), then the 15 modules and tests that took most, and
    the 10 tests with most CPU time outside XLA's compiles (tracing, host-side work, subprocesses)."""
    if not tests:
        return []
    own, kids = (sum(v[i] for v in tests.values()) for i in (0, 1))
    lines = [f"\nCPU seconds of the {len(tests)} tests: {own + kids:.0f} s ({own:.0f} s in the pytest processes, "
             f"{kids:.0f} s in their subprocesses)", "The 15 modules that took most:"]
    by = collections.Counter()
    for nodeid, (a, b) in tests.items():
        by[nodeid.split("::")[0]] += a + b
    lines += [f"  {m:48s} {s:7.1f} s" for m, s in by.most_common(15)]
    lines.append("The 15 tests that took most (with the module fixtures they built first):")
    top = sorted(tests.items(), key=lambda kv: -sum(kv[1]))[:15]
    lines += [f"  {sum(v):7.1f} s  {n}" for n, v in top]
    compiled = collections.Counter()
    for log in compiles.values():
        for _, _, test, cpu in log:
            compiled[test] += cpu
    rest = sorted(((sum(v) - compiled[n], sum(v), n) for n, v in tests.items()), reverse=True)[:10]
    lines.append("The 10 tests with most CPU time outside XLA's compiles (tracing, host work, subprocesses):")
    lines += [f"  {r:7.1f} s of {t:6.1f} s  {n}" for r, t, n in rest]
    return lines


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else _out_dir()))
