"""The compile caches refuse a directory others can write (issue 39, item 8):
compiled programs read back are deserialized into the process (pickle, XLA
executables), so a shared cache would run another user's code. Each test
fails on the old code, which loaded from any directory."""

import os

import jax.numpy as jnp
import pytest

from jaxplat.cli import compiled, main
from jaxplat.search import runtime
from jaxplat.specs import SpecError


def _double(tree):
    return {"y": tree["x"] * 2.0}


@pytest.mark.parametrize("mode, why", [(0o777, "group- and world-writable"), (0o770, "group-writable"),
                                       (0o703, "world-writable")])
def test_compiled_programs_refuse_a_writable_directory(tmp_path, monkeypatch, mode, why):
    monkeypatch.setattr(compiled, "_MEMORY", {})
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(mode)
    x = {"x": jnp.asarray([1.0], jnp.float32)}
    with pytest.raises(SpecError, match=f"compile cache .* is {why}.*--no-cache") as e:
        compiled.run("t", _double, (x,), (), cache)
    assert "\n" not in str(e.value)
    cache.chmod(0o700)
    assert compiled.run("t", _double, (x,), (), cache)["y"].tolist() == [2.0]


def test_a_missing_cache_is_created_private(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "_MEMORY", {})
    os.umask(old := os.umask(0o002))  # read the umask
    try:
        os.umask(0o002)  # a umask that would make a group-writable folder
        x = {"x": jnp.asarray([1.0], jnp.float32)}
        compiled.run("t", _double, (x,), (), tmp_path / "new" / "programs")
    finally:
        os.umask(old)
    for d in (tmp_path / "new", tmp_path / "new" / "programs"):
        assert d.stat().st_mode & 0o077 == 0


def test_a_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)
    with pytest.raises(SpecError, match="owned by another user"):
        runtime.check_private_dir(tmp_path)


def test_sweep_cache_refuses_a_writable_directory(tmp_path):
    """enable_compilation_cache (sweep, calibrate): refused before JAX's config changes."""
    tmp_path.chmod(0o777)
    with pytest.raises(SpecError, match="world-writable"):
        runtime.enable_compilation_cache(str(tmp_path))


def test_estimate_says_it_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(compiled, "_MEMORY", {})
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("JAXPLAT_CACHE_DIR", str(shared))
    rc = main(["estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("jaxplat: error: compile cache")


@pytest.mark.parametrize("command", [["codesign", "codesign-llama70b-chatbot", "--no-progress"],
                                     ["requirements", "--model", "llama-3.1-8b"]], ids=["codesign", "requirements"])
def test_commands_refuse_a_writable_cache_in_one_line(tmp_path, capsys, command):
    """codesign and requirements keep their compiled programs in the same cache as sweep (--cache-dir), with the
    same check."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    rc = main([*command, "--cache-dir", str(shared)])  # refused before anything runs or is written
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "world-writable" in err[0]
