"""Test configuration: precision per session (JAX_ENABLE_X64=1 runs float64),
XLA's cheapest compile settings, and shared fixtures of built-in specs.

Compiling is most of this suite's time: its programs run once or a few times
each. So XLA compiles them without LLVM optimization and with its older loop
emitters (the settings the sweep engine uses for programs it runs once),
about 3x less CPU time for the suite, and emits each program's code as one
LLVM module (`jaxplat estimate`'s setting, cli/compiled.py): XLA:CPU splits
it to compile the parts on parallel threads, which the workers, one per core,
leave no core for (the suite went from 469 s to 430 s on 2 cores).
JAXPLAT_TEST_FULL_OPT=1 compiles as a user's run does (numbers may differ in
the last bits; the tolerances allow it). The flags must be in the environment
before JAX starts its backend: here, before anything imports jax.
JAXPLAT_TEST_CACHE_DIR=DIR keeps the compiled programs on disk for the next
run (JAX's persistent compilation cache).
"""

import os
import sys

FAST_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false",
                  "--xla_cpu_parallel_codegen_split_count=1")
if os.environ.get("JAXPLAT_TEST_FULL_OPT", "0") != "1":
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *FAST_XLA_FLAGS]).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

import jaxplat as jp  # noqa: E402


def pytest_configure(config):
    """JAX's persistent compilation cache only where JAXPLAT_TEST_CACHE_DIR names a directory (kept, so
    that a rerun, or a CI job that restores it, reads the programs back); off otherwise, set before the
    first compile. A cache shared by one run's workers did not pay for itself on this 2-core CPU (end to
    end, inside the run-to-run noise: docs/testing.md): over a run of the suite (2026-12-07) its writes
    took 55-60 CPU s (serializing and compressing 2,200 XLA:CPU executables), its reads 16-18 s
    (deserializing a program took from a quarter to most of what compiling it did) and its keys 9-10 s,
    against 163-187 hits that spared about 65 s of compiling."""
    cache = os.environ.get("JAXPLAT_TEST_CACHE_DIR")
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    else:  # also keeps `jaxplat calibrate`'s own cache (search.enable_compilation_cache) off in-process
        jax.config.update("jax_enable_compilation_cache", False)


# The modules that take longest, longest first (CPU seconds of each module run alone, 2026-12-06: 72 s for
# test_serving_modes down to 15 s; the rest take less): they run first, so that the workers, handed one
# module at a time, finish together (longest first; xdist's own order, most tests first, left the slowest
# for last and one worker idle for ~45 s). Only the order changes: a name that no longer exists is ignored.
# test_serving_cost_basis and test_sweep_memory are left for last (with the modules not named): their
# `estimate` programs are test_serving_modes's, which they then read back from the run's program cache
# (`_program_cache`), where, run beside it, both workers had compiled them (16 and 9 CPU s, 2026-12-07;
# experiments/suite_compile_profile.py).
LONGEST_FIRST = ("test_serving_modes", "test_search_multiprocess", "test_catalog", "test_sensitivities",
                 "test_estimate_call", "test_calibration", "test_engine", "test_codesign_training", "test_serving",
                 "test_training", "test_search", "test_ssm", "test_compute", "test_batching", "test_cost_model",
                 "test_friction", "test_codesign", "test_physics",
                 "test_calibration_guard", "test_training_guard", "test_distribution", "test_training_moe",
                 "test_docs", "test_closed_loop_wave", "test_pricing", "test_cli_ux", "test_fixes", "test_moe_ep",
                 "test_efficiency")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """An xdist worker ends here without the interpreter's teardown: it has sent its last report, and
    freeing the hundreds of XLA programs it compiled kept the suite waiting after its last test (the
    whole suite ended 10.5 s after its last test, 2.7 s with this). The controller's exit status still
    says whether tests failed. Not under pytest-cov, whose workers write their data at exit."""
    if os.environ.get("PYTEST_XDIST_WORKER") and not config.pluginmanager.has_plugin("_cov"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def _program_cache(tmp_path_factory):
    """`jaxplat estimate` keeps its compiled programs in $JAXPLAT_CACHE_DIR
    (cli.compiled): JAXPLAT_TEST_CACHE_DIR when set (kept for the next run),
    else this run's own directory, one for all its xdist workers (the parent
    of theirs): a program one worker compiled, another reads back (a run of
    2026-12-07 compiled two serving programs on both workers, 27 CPU s of the
    second compiles); never the user's."""
    root = tmp_path_factory.getbasetemp()
    shared = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAXPLAT_CACHE_DIR", os.environ.get("JAXPLAT_TEST_CACHE_DIR") or str(shared / "jaxplat-cache"))
        yield


@pytest.fixture(scope="session")
def llama7b():
    return jp.load_model("llama-2-7b")


@pytest.fixture(scope="session")
def llama70b():
    return jp.load_model("llama-3.1-70b")


@pytest.fixture(scope="session")
def llama8b():
    return jp.load_model("llama-3.1-8b")


@pytest.fixture(scope="session")
def h100():
    return jp.load_hardware("h100-sxm")


@pytest.fixture(scope="session")
def chatbot():
    return jp.load_workload("chatbot")
