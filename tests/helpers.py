"""Small test helpers (jaxplat ships no chex)."""

import contextlib
import copy
import importlib
import sys

import jax
import numpy as np

from jaxplat.model import Hardware, workload_from_dict
from jaxplat.model import genz_system as _genz_system
from jaxplat.search.train_study import FLAG_COLUMNS

GiB = 2.0**30


def import_script(folder, name: str):
    """Module `name` of a scripts folder that is not a package (experiments/,
    experiments/paper/), with the folder on sys.path only while it imports
    (the scripts import their siblings at the top)."""
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def with_value(d, path, value):
    """A deep copy of nested dicts / lists `d` with the entry at `path` (keys
    and indices) set to `value`."""
    d = copy.deepcopy(d)
    x = d
    for k in path[:-1]:
        x = x[k]
    x[path[-1]] = value
    return d


def genz_system(tflops, mem_gbs, *, eff=1.0, link_gbs=25.0, link_us=1.9, mem_gb=1e9, onchip_gbs=18000.0) -> Hardware:
    """A GenZ `System(...)` in our hardware schema (GenZ: GB/s = 2^30 B/s)."""
    return _genz_system(tflops, mem_gbs, compute_efficiency=eff, memory_efficiency=eff, off_chip_mem_size=mem_gb,
                        onchip_mem_bw=onchip_gbs, interchip_link_bw=link_gbs, interchip_link_latency=link_us)


def workload(**kw):
    return workload_from_dict(kw)


def assert_trees_close(a, b, rtol=1e-6, atol=0.0):
    """Same tree structure, every leaf close (names the leaf that is not)."""
    assert jax.tree.structure(a) == jax.tree.structure(b), (jax.tree.structure(a), jax.tree.structure(b))
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=rtol, atol=atol,
                                   err_msg=jax.tree_util.keystr(path))


_TRACE_OR_COMPILE = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/backend_compile_duration")
_recording: list = []


def _listen(event, duration, **kwargs):
    if _recording and event in _TRACE_OR_COMPILE:
        _recording[-1].append(event)


jax.monitoring.register_event_duration_secs_listener(_listen)


@contextlib.contextmanager
def compile_events():
    """Collects the names of JAX trace and XLA compile events inside the block."""
    events = []
    _recording.append(events)
    try:
        yield events
    finally:
        _recording.remove(events)


# jaxplat train's flags that a training study's top_k.csv names (dp is derived, not a flag)
TRAIN_FLAGS = tuple(k for k in FLAG_COLUMNS if k != "dp")


def sweep_training_study(tmp_path, study: dict, capsys):
    """Write a training study dict, run `jaxplat sweep` on it (one device, no
    cache) and return (the study's path, its top_k.csv as a DataFrame)."""
    import pandas as pd
    import yaml

    from jaxplat.cli.app import main
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--no-cache", "--devices", "1", "--no-progress"]) == 0
    capsys.readouterr()
    return path, pd.read_csv(out / "top_k.csv")


def train_argv(model: str, hardware: str, row, flags=TRAIN_FLAGS) -> list:
    """`jaxplat train ... --json` with a top_k.csv row's flags."""
    argv = ["train", "--model", model, "--hardware", hardware, "--json"]
    for k in flags:
        argv += [f"--{k.replace('_', '-')}", str(row[k])]
    return argv

