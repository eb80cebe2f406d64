"""`jaxplat sweep` on 4 devices (killed midway, then resumed) and on 2
processes joined by jax.distributed: each must select exactly what the
single-device run selects (same top-k and Pareto indices, per-axis counts,
histogram, feasible counts), with metric values equal to float32 rounding.

Every run is a real subprocess (the device count is fixed when JAX starts).
They run side by side to share the 2-core machine's wall time.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_search import STUDY

FILES = ("top_k.csv", "pareto.csv", "axes.csv", "histogram.csv")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep(study, out, *extra, env=None):
    # This session's XLA flags (the test compile settings, conftest.py) but not its device
    # count: each run sets its own.
    env = dict(env or {})
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    e = {**os.environ, "JAX_PLATFORMS": "cpu", **env,
         "XLA_FLAGS": " ".join(flags + env.get("XLA_FLAGS", "").split())}
    cmd = [sys.executable, "-m", "jaxplat.cli", "sweep", str(study), "--out", str(out), "--no-progress", *extra]
    return subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait(proc, timeout=600):
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-3000:]
    return out


def _next_block(state: Path) -> int:
    try:
        with np.load(state) as z:
            return json.loads(str(z["meta"]))["next_block"]
    except (OSError, ValueError, KeyError):
        return -1  # not written yet (or being replaced)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweeps")
    study = tmp / "tiny.yaml"
    study.write_text(yaml.safe_dump(STUDY))
    port = _free_port()
    # Each process has its own persistent compilation cache (they compile
    # side by side); the resumed run reuses the killed one's.
    cache = lambda name: ("--cache-dir", str(tmp / f"cache-{name}"))  # noqa: E731
    four = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    procs = {
        "single": [_sweep(study, tmp / "single", "--devices", "1", *cache("single"))],
        "two": [_sweep(study, tmp / "two", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                       "--process-id", str(i), *cache(f"two{i}")) for i in range(2)],
        # On 4 devices, slowed to one step per 0.5 s so that it can be killed midway, then resumed (on 4
        # devices): one run checks both that 4 devices select what one does and that a resumed sweep
        # selects what an uninterrupted one does (each sweep here costs 7-13 CPU s, as fast as the host
        # runs: importing JAX, tracing and compiling its step).
        "killed": [_sweep(study, tmp / "four", *cache("four"), env={**four, "JAXPLAT_SWEEP_STEP_PAUSE": "0.5"})],
    }
    state = tmp / "four" / "state.npz"
    deadline = time.time() + 600
    while _next_block(state) < 1 and time.time() < deadline and procs["killed"][0].poll() is None:
        time.sleep(0.05)
    procs["killed"][0].send_signal(signal.SIGKILL)
    procs["killed"][0].communicate()
    killed_at = _next_block(state)
    logs = {name: [_wait(p) for p in ps] for name, ps in procs.items() if name != "killed"}
    logs["four"] = [_wait(_sweep(study, tmp / "four", *cache("four"), env=four))]
    return tmp, killed_at, logs


def _same_files(a: Path, b: Path):
    """Same configurations selected, same counts; metric values equal to a few
    float32 ulps (XLA:CPU gives one loop fusion a different intra-op thread
    split when the client has 4 devices, so a few elements take the scalar
    rather than the vector code path: ~1e-7 relative)."""
    import pandas as pd

    for f in FILES:
        da, db = pd.read_csv(a / f), pd.read_csv(b / f)
        assert list(da.columns) == list(db.columns) and len(da) == len(db), f
        for c in da.columns:
            if da[c].dtype.kind == "f" and c not in ("bin_lo", "bin_hi"):
                np.testing.assert_allclose(db[c], da[c], rtol=1e-6, err_msg=f"{f}:{c}")
            else:
                assert da[c].tolist() == db[c].tolist(), f"{f}:{c}"
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for key in ("evaluated", "feasible", "ok", "over_ttft", "over_tpot", "pareto_points"):
        assert sa[key] == sb[key], key


def test_single_device_run_is_complete(runs):
    tmp, _, logs = runs
    s = json.loads((tmp / "single" / "summary.json").read_text())
    assert s["evaluated"] == 360 and s["devices"] == 1
    # The Pareto figure is a PNG that decodes to an image with something drawn on it.
    import matplotlib.image

    png = tmp / "single" / "pareto.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(png)
    assert img.ndim == 3 and min(img.shape[:2]) >= 200
    assert len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)) > 16  # not a blank canvas


def test_four_devices_killed_then_resumed_equal_one(runs):
    tmp, killed_at, logs = runs
    assert "on 4 device(s) in 1 process(es)" in logs["four"][0]
    assert 1 <= killed_at < 6, killed_at  # it was killed midway (6 blocks)
    _same_files(tmp / "single", tmp / "four")


def test_two_processes_equal_one(runs):
    tmp, _, logs = runs
    assert "on 2 device(s) in 2 process(es)" in logs["two"][0]
    _same_files(tmp / "single", tmp / "two")

