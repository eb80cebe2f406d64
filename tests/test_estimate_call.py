"""`jaxplat estimate` as one compiled call kept on disk (cli.compiled): the
same numbers as `evaluate`, `breakdown` and `comm_breakdown` called one by
one; a key that a changed spec value keeps and a changed shape, static
option or source file changes; an unreadable cache file ignored with one
warning line; a second command of the same shape read back from disk with
the same output."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.cli import compiled
from jaxplat.cli.estimate import estimate_arrays
from jaxplat.cost import breakdown_rows, collectives, comm_breakdown, comm_rows


def test_one_call_gives_what_the_separate_calls_give(llama7b, h100, chatbot):
    """Metrics, both phases' per-operator columns and the collectives'
    breakdown (tp = 4, pp = 2: all-reduces and a send/recv) equal the
    separately jitted functions (float32 rounding: other XLA programs)."""
    par, opts = jp.Parallel(tp=4, pp=2), jp.Options()
    res = compiled.run("estimate", estimate_arrays, (llama7b, h100, par, chatbot, None), (opts, None, True))
    want = jax.device_get(jp.evaluate(llama7b, h100, par, chatbot, opts))
    for k, v in vars(want).items():
        np.testing.assert_allclose(np.asarray(getattr(res["metrics"], k), np.float64), np.asarray(v, np.float64),
                                   rtol=2e-6, err_msg=k)
    for phase in ("prefill", "decode"):
        got, ref = breakdown_rows(*res["operators"][phase]), jp.breakdown(llama7b, h100, par, chatbot, phase, opts)
        assert got["name"] == ref["name"] and got["bound"] == ref["bound"]
        for col in ("time", "total_time", "flops", "bytes_w", "comm_time"):
            np.testing.assert_allclose(got[col], ref[col], rtol=2e-6, err_msg=f"{phase} {col}")
    tables = {phase: t for phase, (t, _) in res["operators"].items()}
    got, ref = comm_rows(tables, res["comm"], opts), comm_breakdown(llama7b, h100, par, chatbot, opts)
    assert [r["name"] for r in got] == [r["name"] for r in ref] and len(got) >= 4
    assert {r["kind"] for r in got} >= {"allreduce", "sendrecv"}
    assert [r["algorithms"] for r in got] == [r["algorithms"] for r in ref]
    np.testing.assert_allclose([r["seconds"] for r in got], [r["seconds"] for r in ref], rtol=2e-6)
    for r in got:  # each row as the one-collective report (`describe`, eager) has it
        one = collectives.describe(r["kind"], h100, r["group"], r["payload_bytes"], r["stride"])
        assert r["algorithms"] == one["algorithms"] and r["form"] == one["form"]
        np.testing.assert_allclose(r["level_seconds"], one["levels"], rtol=2e-6)
    # Property: the per-operator totals add up to the metrics the same call reduced.
    ttft = sum(breakdown_rows(*res["operators"]["prefill"])["total_time"])
    assert ttft == pytest.approx(float(res["metrics"].ttft), rel=1e-4)


def _path(model, hw, par, wl, opts=jp.Options(), plan=None, tables=True):
    return compiled.program_path("/cache", "estimate", (model, hw, par, wl, None), (opts, plan, tables)).name


def test_key_keeps_values_and_changes_with_shapes_and_options(llama7b, h100, chatbot):
    base = _path(llama7b, h100, jp.Parallel(tp=2), chatbot)
    # Values: another dense model, another chip, other degrees and lengths: the same program.
    assert _path(jp.load_model("llama-2-13b"), jp.load_hardware("h200-sxm"), jp.Parallel(tp=8, pp=2),
                 jp.replace(chatbot, batch=64.0, prompt=4096.0)) == base
    # Structure, static options, what the call computes: new programs, each its own.
    others = {_path(jp.load_model("deepseek-v3"), h100, jp.Parallel(tp=2), chatbot),  # MLA: other table rows
              _path(llama7b, h100, jp.Parallel(tp=2), chatbot, jp.Options(profile="genz")),
              _path(llama7b, h100, jp.Parallel(tp=2), chatbot, tables=False),
              _path(llama7b, h100, jp.Parallel(tp=2), jp.replace(chatbot, batch=jnp.ones((2,))))}  # a shape
    assert base not in others and len(others) == 4


def test_code_digest_follows_the_source(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    first = compiled.code_digest.__wrapped__(tmp_path)
    (tmp_path / "b.py").write_text("y = 3\n")
    assert compiled.code_digest.__wrapped__(tmp_path) != first
    (tmp_path / "b.py").write_text("y = 2\n")
    assert compiled.code_digest.__wrapped__(tmp_path) == first


def _scale(tree, factor):
    return {"y": tree["x"] * factor}


def test_disk_cache_reuses_values_and_ignores_a_damaged_file(tmp_path, monkeypatch, capsys):
    """A program saved for x = [1, 2] serves x = [5, 7] without compiling;
    a damaged file is reported on one line, compiled again and replaced."""
    monkeypatch.setattr(compiled, "_MEMORY", {})
    x = {"x": jnp.asarray([1.0, 2.0], jnp.float32)}
    assert compiled.run("t", _scale, (x,), (3.0,), tmp_path)["y"].tolist() == [3.0, 6.0]
    (path,) = tmp_path.glob("t-*.bin")
    monkeypatch.setattr(compiled, "_MEMORY", {})
    real_build = compiled.build

    def no_build(*a):
        raise AssertionError("compiled again")
    monkeypatch.setattr(compiled, "build", no_build)
    y = {"x": jnp.asarray([5.0, 7.0], jnp.float32)}
    assert compiled.run("t", _scale, (y,), (3.0,), tmp_path)["y"].tolist() == [15.0, 21.0]
    assert capsys.readouterr().err == ""
    for damage in (b"not a program", path.read_bytes()[:1000]):
        path.write_bytes(damage)
        monkeypatch.setattr(compiled, "_MEMORY", {})
        monkeypatch.setattr(compiled, "build", real_build)
        assert compiled.run("t", _scale, (y,), (3.0,), tmp_path)["y"].tolist() == [15.0, 21.0]
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("jaxplat: warning: ignoring unreadable compiled program")
        assert compiled.load(path) is not None  # replaced by a good one
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary files left


def _solve(a):
    return jnp.linalg.solve(a["m"], jnp.ones(2))


def test_a_program_that_calls_lapack_runs_when_read_back(tmp_path, monkeypatch):
    """The serving model's prompt chain solves a linear system (LAPACK on
    the CPU). JAX sets LAPACK up when it lowers such a program; read back in
    a fresh process the program is not lowered, and without
    `compiled.prepare` it crashed (segmentation fault)."""
    monkeypatch.setattr(compiled, "_MEMORY", {})
    a = {"m": jnp.asarray([[2.0, 0.0], [1.0, 4.0]], jnp.float32)}
    assert compiled.run("s", _solve, (a,), (), tmp_path).tolist() == [0.5, 0.125]  # 2x = 1, x + 4y = 1
    (path,) = tmp_path.glob("s-*.bin")
    code = ("import sys, jax.numpy as jnp; from jaxplat.cli import compiled; "
            "p = compiled.load(__import__('pathlib').Path(sys.argv[1])); "
            "print(p({'m': jnp.asarray([[4.0, 0.0], [0.0, 8.0]], jnp.float32)}).tolist())")
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "[0.25, 0.125]", (r.returncode, r.stderr[-1000:])


def test_second_command_reads_the_program_back(tmp_path):
    """Cold: compiled and saved (one program for --json, one for the text
    tables); warm: the same files read back, not written again, and the same
    output, byte for byte."""
    env = dict(os.environ, JAXPLAT_CACHE_DIR=str(tmp_path))
    cmd = [sys.executable, "-m", "jaxplat", "estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
           "--tp", "2"]

    def run(*extra):
        r = subprocess.run(cmd + list(extra), env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
        return r.stdout
    cold_json, cold_text = run("--json"), run()
    files = sorted((tmp_path / compiled.SUBDIR).glob("estimate-*.bin"))
    assert len(files) == 2
    stamps = [f.stat().st_mtime_ns for f in files]
    assert run("--json") == cold_json and run() == cold_text
    assert [f.stat().st_mtime_ns for f in files] == stamps and len(list(files[0].parent.iterdir())) == 2
    assert json.loads(cold_json)["chips"] == 2.0 and "Prefill (one pass over the prompt)" in cold_text
