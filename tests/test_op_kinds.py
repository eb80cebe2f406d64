"""Typed operator rows (OpTable.kinds): every row of every table has a kind,
consumers read the kind and never the row's name, and the MoE activation
row is element-wise (not a grouped GEMM) so it takes no grouped-GEMM derate."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import workload

import jaxplat as jp
from jaxplat.cost import OpKind, build_table, row_components
from jaxplat.cost.efficiency import row_rates
from jaxplat.model import replace
from jaxplat.serving.iteration import iteration_table

PLAIN = jp.Options(memory_hierarchy=False)  # the plain roofline: bytes over main-memory bandwidth


def _wl(**kw):
    return workload(**{"batch": 4, "prompt": 256, "output": 8, **kw})


@pytest.mark.parametrize("model, par", [
    ("llama-3.1-8b", dict(tp=2)), ("mixtral-8x7b", dict(tp=2)), ("deepseek-v3", dict(tp=8, ep=2)),
    ("jamba-1.5-mini", dict(tp=2)), ("falcon-mamba-7b", dict()), ("gemma-2-27b", dict(tp=2))])
@pytest.mark.parametrize("profile", ["default", "genz"])
def test_every_row_has_a_kind(model, par, profile):
    m, wl = jp.load_model(model), _wl(batch=2)
    opts = jp.Options(profile=profile)
    for phase in ("prefill", "decode"):
        t = build_table(m, jp.Parallel(**par), wl, phase, opts)
        assert len(t.kinds) == len(t.names) == t.f0.shape[0]
        assert set(t.kinds) <= set(OpKind.ALL), set(t.kinds) - set(OpKind.ALL)
        for name, kind, comm in zip(t.names, t.kinds, t.comm_kinds):
            assert (kind == OpKind.COLLECTIVE) == bool(comm), name  # collectives and only they
        # rows with GEMM dims are matrix products; element-wise rows have none
        dims = np.asarray(t.m * t.k * t.n) > 0
        for name, kind, d in zip(t.names, t.kinds, dims):
            if d:
                assert kind in OpKind.MATMUL, (name, kind)
            if kind == OpKind.ELEMENTWISE:
                assert not d, name


def test_row_kinds_by_name():
    t = build_table(jp.load_model("mixtral-8x7b"), jp.Parallel(tp=2), _wl(), "decode", jp.Options())
    kind = dict(zip(t.names, t.kinds))
    assert kind["experts_act"] == OpKind.ELEMENTWISE  # the defect: `experts_` once made it a grouped GEMM
    assert kind["experts_up_gate"] == kind["experts_down"] == OpKind.EXPERT_GEMM
    assert kind["moe_permute"] == kind["moe_finalize"] == OpKind.ELEMENTWISE
    assert kind["router"] == kind["lm_head"] == OpKind.WIDE_GEMM
    assert kind["qkv"] == kind["up_gate"] == kind["out_proj"] == OpKind.GEMM
    assert kind["logit_prefix"] == kind["logit_suffix"] == OpKind.SCORES
    assert kind["attend_suffix"] == OpKind.ATTEND and kind["softmax_prefix"] == OpKind.SOFTMAX
    assert kind["kv_write"] == OpKind.CACHE_WRITE and kind["embedding"] == OpKind.LOOKUP


def test_moe_activation_row_takes_no_grouped_gemm_derate(h100):
    """Mixtral-8x7B FP8 decode at batch 4 on one H100 (tp 1): each token's
    k = 2 experts give 8 token copies; the SwiGLU between the grouped GEMMs
    reads gate and up (2 x 8 x 14336 FP8 bytes = 229,376 B) and writes 8 x
    14336 B = 114,688 B: 344,064 B at the derated HBM bandwidth, whatever
    eff_moe_memory is (0.4 here; the old `experts_` name prefix charged it
    x 2.5). The grouped GEMMs themselves keep the derate."""
    hw = replace(h100, eff_moe_memory=0.4, eff_moe=0.5)
    wl = _wl(dtype="fp8")
    t = build_table(jp.load_model("mixtral-8x7b"), jp.Parallel(), wl, "decode", PLAIN)
    i, g = t.names.index("experts_act"), t.names.index("experts_down")
    assert float(t.a0[i]) == 2 * 8 * 14336 and float(t.o0[i]) == 8 * 14336
    _, _, m0, _, _ = row_components(t, hw, wl, PLAIN)
    bw = float(hw.mem_bw[0] * hw.eff_memory)
    np.testing.assert_allclose(float(m0[i]), 344064 / bw, rtol=1e-6)
    _, scale, _ = row_rates(t, hw, wl, PLAIN, 1.0)
    np.testing.assert_allclose(np.asarray(scale)[[i, g]], [1.0, 1 / 0.4], rtol=1e-6)


def test_consumers_read_kinds_not_names(h100):
    """Renaming every row changes no time: prefill, decode and a merged engine
    iteration of an MoE model, priced with the memory hierarchy on."""
    m, wl, opts = jp.load_model("mixtral-8x7b"), _wl(), jp.Options()
    z = jnp.zeros((1,), jnp.float32)
    tables = [build_table(m, jp.Parallel(tp=2), wl, ph, opts) for ph in ("prefill", "decode")]
    tables.append(iteration_table(m, jp.Parallel(tp=2), wl, opts, 4.0, 300.0, z + 128.0, z))
    for t in tables:
        anon = dataclasses.replace(t, names=tuple(f"r{j}" for j in range(len(t.names))))
        for a, b in zip(row_components(t, h100, wl, opts), row_components(anon, h100, wl, opts)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_merged_iteration_keeps_kinds():
    m, wl, opts = jp.load_model("mixtral-8x7b"), _wl(), jp.Options()
    z = jnp.zeros((1,), jnp.float32)
    t = iteration_table(m, jp.Parallel(tp=2), wl, opts, 4.0, 300.0, z + 128.0, z)
    pre = build_table(m, jp.Parallel(tp=2), wl, "prefill", opts)
    dec = build_table(m, jp.Parallel(tp=2), wl, "decode", opts)
    want = dict(zip(pre.names, pre.kinds)) | dict(zip(dec.names, dec.kinds))
    assert len(t.kinds) == len(t.names) and all(want[n] == k for n, k in zip(t.names, t.kinds))
