"""Device and compiler setup of a sweep: XLA options per platform, host CPU
devices, the persistent compilation cache. Applied by the command line
(or a caller), never on import.
"""

import collections
import hashlib
import os
import threading

import jax

from jaxplat.specs import SpecError


def compile_lowered(lowered, platform: str, fast_compile=False, cheap=False):
    """XLA-compile a lowered sweep program with the options that make it fast.

    On CPU: no YNNPACK fusions (in profiles of jax 0.10.2 they ran the
    engine's elementwise tails slower than XLA's own loops); with
    `fast_compile`, XLA's older loop emitters; `cheap` (a program run once:
    the operator tables' program) adds no LLVM optimization. Falls back to the
    defaults on an XLA without these options.
    """
    opts = {}
    if platform == "cpu":
        opts["xla_cpu_experimental_ynn_fusion_type"] = ""
        if fast_compile or cheap:
            opts["xla_cpu_use_fusion_emitters"] = False
        if cheap:
            opts["xla_backend_optimization_level"] = 0
    try:
        return lowered.compile(compiler_options=opts)
    except jax.errors.JaxRuntimeError:
        return lowered.compile()


# Executables by their program's text and devices (`compile_once`), most recently used last.
_ONCE = collections.OrderedDict()
_ONCE_SIZE = 16
_ONCE_LOCK = threading.Lock()


def compile_once(lowered, platform: str, devices=None, **options):
    """`compile_lowered`, once per process for the same program: two
    engines of one study build the same step, `values` and operator-table
    programs (a run of the test suite on 2026-12-07 compiled them 11 times
    in a worker that held them already: 47 CPU s; docs/testing.md).

    The key is the program's text (its constants printed in full: equal
    text, the same computation), the platform, the options and the devices
    it runs on: `devices`, the ids of a sharded program's mesh (its text
    names the mesh's axes, not its devices), or None for a program lowered
    by a plain `jax.jit` (the default device). The last `_ONCE_SIZE`
    programs are kept."""
    text = lowered.as_text()
    where = repr(jax.config.jax_default_device) if devices is None else tuple(devices)
    key = (hashlib.sha1(text.encode()).hexdigest(), platform, tuple(sorted(options.items())), where)
    with _ONCE_LOCK:
        hit = _ONCE.get(key)
        if hit is not None:
            _ONCE.move_to_end(key)
            return hit
    compiled = compile_lowered(lowered, platform, **options)
    with _ONCE_LOCK:
        _ONCE[key] = compiled
        while len(_ONCE) > _ONCE_SIZE:
            _ONCE.popitem(last=False)
    return compiled


def shard_map(f, mesh, in_specs, out_specs):
    """`jax.shard_map` (JAX 0.6+: with its check of which values vary over
    the devices, which the engine marks with gridmap.vary_over; turning it
    off traced no faster, docs/testing.md), or before it jax.experimental's
    without its replication check (the engine's outputs are per device:
    P('d'))."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    from jax.experimental.shard_map import shard_map as old
    return old(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


def split_cpu_devices(n=None) -> int | None:
    """On the CPU backend, run the sweep as `n` host devices (default: one
    per core), each a `shard_map` shard in its own thread.

    XLA:CPU keeps about 1.6 of 2 cores busy on one device's fused loops;
    two devices keep both busy (+33% configs/s on this 2-core machine,
    `experiments/bench_sweep.py`). Must run before JAX starts its backends;
    an explicit --xla_force_host_platform_device_count in XLA_FLAGS wins.
    Returns the count set, or None if left alone (also when JAX has already
    started its backends in this process).
    """
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return None
    n = (os.cpu_count() or 1) if n is None else n
    if n < 1:
        raise SpecError(f"host devices must be at least 1, got {n}")
    try:
        jax.config.update("jax_num_cpu_devices", int(n))
    except RuntimeError:  # JAX already started (a caller in the same process): keep its devices
        return None
    return int(n)


def enable_compilation_cache(path=None, min_compile_s: float = 1.0) -> str | None:
    """Keep compiled programs on disk (a sweep's steps, a co-design's
    programs), so that rerunning or resuming a study skips the XLA compile
    (JAX's persistent compilation cache).

    `path`: the cache directory (default: $JAXPLAT_CACHE_DIR, else
    ~/.cache/jaxplat/xla). `min_compile_s`: programs that compiled faster
    are not kept. Returns the directory used, or None when it cannot be
    created (the sweep then compiles every time).
    """
    path = path or os.environ.get("JAXPLAT_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "jaxplat", "xla")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None
    check_private_dir(path)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_s))
    return path


def check_private_dir(path) -> None:
    """SpecError unless the existing directory `path` is owned by this user
    and not group- or world-writable (os.stat): compiled programs read back
    from a cache are deserialized into this process (pickle, XLA
    executables), so whoever can write there could run code as this user."""
    st = os.stat(path)
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid  # no owners to compare on Windows
    why = ("owned by another user" if st.st_uid != uid else
           "group- and world-writable" if st.st_mode & 0o022 == 0o022 else
           "group-writable" if st.st_mode & 0o020 else "world-writable" if st.st_mode & 0o002 else "")
    if why:
        raise SpecError(f"compile cache {path} is {why}, so others could plant programs this command would "
                        "load; use --no-cache, or a private directory (chmod go-w, or --cache-dir / "
                        "JAXPLAT_CACHE_DIR naming one of your own)")
