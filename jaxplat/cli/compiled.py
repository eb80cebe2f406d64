"""Compiled programs of the command line kept on disk between calls.

`jaxplat estimate` runs one configuration: its XLA program runs once, so
tracing the cost model and compiling it are nearly all of a call's time. The
first call of a given shape compiles the program (XLA's cheapest settings:
a program run once) and saves the executable in the cache directory
(`cache_dir`); a later call of the same shape reads it back and runs it,
neither tracing nor compiling (experiments/estimate_cold_start.py measures
both).

What a saved program depends on is its key (`key`): the jaxplat code (the
version and a hash of every source file), jax and jaxlib's versions, the
device, XLA_FLAGS, the static arguments (options: the profile, what the call
computes) and the arguments' tree structure (architecture kind, table rows),
shapes and dtypes. Spec *values* are traced leaves, not part of the key: a
changed number reuses the program, a changed shape or static option compiles
a new one. An unreadable file is ignored with a one-line warning and
replaced.
"""

import functools
import hashlib
import os
import pickle
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
from jax.experimental import serialize_executable

import jaxplat

SUBDIR = "programs"  # under the cache directory, beside XLA's own cache entries


def cache_dir(path=None) -> Path:
    """Where compiled programs are kept: `path`, else $JAXPLAT_CACHE_DIR,
    else ~/.cache/jaxplat/xla (the sweep's compilation cache), in `SUBDIR`."""
    root = path or os.environ.get("JAXPLAT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "jaxplat",
                                                                        "xla")
    return Path(root) / SUBDIR


def run(name: str, fn, args: tuple, static: tuple, directory=None):
    """fn(*args, *static) on the host (numpy leaves), compiled once per key.

    fn: a pure function of pytrees `args` (traced) and hashable `static`
    values (part of the key: their repr must name everything that changes
    the program). directory: the cache directory (`cache_dir()`), or None to
    compile in memory only (the same compiled program, not saved).
    """
    leaves, in_tree = jax.tree.flatten(args)
    k = key(name, static, in_tree, leaves)
    program = _MEMORY.get(k)  # a process that estimates the same shape again (tests, notebooks)
    path = None if directory is None else _path(directory, name, k)
    if program is None and path is not None:
        _private(Path(directory))
        program = load(path)
    if program is None:
        program, needs = build(fn, args, static)
        if path is not None:
            save(path, program, needs)
    _MEMORY[k] = program
    return jax.device_get(program(*args))


_MEMORY = {}  # key -> compiled program of this process


def program_path(directory, name: str, args: tuple, static: tuple) -> Path:
    """The file of the program of `name` for these arguments (see `key`)."""
    leaves, in_tree = jax.tree.flatten(args)
    return _path(directory, name, key(name, static, in_tree, leaves))


def _private(directory: Path) -> None:
    """Create the cache directory and its parent (mode 0700) when missing;
    SpecError when others can write either (search.check_private_dir)."""
    from jaxplat.search.runtime import check_private_dir

    for d in (directory.parent, directory):
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return  # cannot create it: nothing is read from it, and save() warns
        check_private_dir(d)


def _path(directory, name: str, k: str) -> Path:
    return Path(directory) / f"{name}-{k}.bin"


# XLA:CPU options of a program that runs once: no LLVM optimization, the
# older loop emitters, no YNNPACK fusions (search.compile_lowered's "cheap"
# set: a third of the default's compile time), and its code in one object
# file (parallel codegen split 1: reading the program back takes 0.5 s
# instead of 0.75 s, experiments/estimate_cold_start.py's "load").
CPU_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False,
               "xla_cpu_experimental_ynn_fusion_type": "", "xla_cpu_parallel_codegen_split_count": 1}


def build(fn, args: tuple, static: tuple):
    """Trace and compile fn(*args, *static) (`CPU_OPTIONS` on the CPU;
    the defaults elsewhere, or on an XLA without these options). Returns
    (program, the runtime libraries it calls: `prepare`)."""
    lowered = jax.jit(functools.partial(_apply, fn, static)).lower(*args)
    needs = ("lapack",) if "lapack_" in lowered.as_text() else ()
    if jax.devices()[0].platform == "cpu":
        try:
            return lowered.compile(compiler_options=CPU_OPTIONS), needs
        except jax.errors.JaxRuntimeError:
            pass
    return lowered.compile(), needs


def prepare(needs) -> None:
    """Set up the runtime libraries a program read back calls. JAX sets up
    LAPACK's kernels (jnp.linalg.solve: the serving model's prompt chain)
    when it lowers a program that uses them; a program read from disk is not
    lowered, and XLA:CPU would call through a null pointer (a segmentation
    fault, jax 0.10.2). LAPACK's setup costs about 0.25 s, so only programs
    that call it pay for it."""
    if "lapack" in needs:  # lowering a 1x1 solve runs jax's LAPACK setup (public API only)
        jax.jit(jnp.linalg.solve).lower(jnp.eye(1), jnp.ones(1))


def load(path: Path):
    """The compiled program saved in `path`, or None: no such file, or one
    that cannot be read back (a one-line warning; the caller compiles)."""
    if not path.is_file():
        return None
    try:
        payload, in_tree, out_tree, needs = pickle.loads(path.read_bytes())
        prepare(needs)
        return serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    except Exception as e:  # noqa: BLE001 (damaged, truncated, from another jaxlib: compile again)
        why = (str(e).splitlines() or [""])[0][:100]
        print(f"jaxplat: warning: ignoring unreadable compiled program {path} ({type(e).__name__}"
              f"{': ' + why if why else ''}); compiling it again", file=sys.stderr)
        return None


def _apply(fn, static, *args):
    return fn(*args, *static)


def save(path: Path, program, needs=()) -> None:
    """Write the executable atomically (a concurrent call reads the old file
    or the new one, never half of one); a read-only cache is skipped."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        blob = pickle.dumps((*serialize_executable.serialize(program), tuple(needs)))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(blob)
        os.replace(tmp, path)
    except (OSError, ValueError, NotImplementedError) as e:  # read-only cache; a backend that cannot serialize
        tmp.unlink(missing_ok=True)
        why = getattr(e, "strerror", None) or (str(e).splitlines() or [""])[0][:100]
        print(f"jaxplat: warning: cannot save the compiled program in {path.parent} ({why}); "
              "the next call compiles again", file=sys.stderr)


def key(name: str, static: tuple, in_tree, leaves) -> str:
    """Hex digest of what a compiled program depends on (module docstring)."""
    dev = jax.devices()[0]
    h = hashlib.sha256()
    for part in (name, jaxplat.__version__, jax.__version__, jaxlib.__version__, dev.platform, dev.device_kind,
                 getattr(dev.client, "platform_version", ""),
                 os.environ.get("XLA_FLAGS", ""), repr(static), repr(in_tree),
                 repr([str(jax.typeof(x)) for x in leaves])):
        h.update(str(part).encode())
        h.update(b"\0")
    h.update(code_digest())
    return h.hexdigest()[:32]


@functools.cache
def code_digest(root=None) -> bytes:
    """sha256 over every Python file under `root` (default: the jaxplat
    package): any change to the code makes new keys."""
    root = Path(root or Path(jaxplat.__file__).resolve().parent)
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.digest()
