"""The `compute:` block: systolic-array cycles, the vector unit and host
offload as each operator's compute time (jaxplat.cost.compute), checked
against cycle counts worked out by hand from SCALE-Sim's fold arithmetic
(tests/test_microarch.py checks that arithmetic against SCALE-Sim itself).

One NPU (specs/hardware/npu-case-study-iv.yaml: 256x256 PEs, ws, 1 GHz,
4 TFLOP/s vector unit, 8 TFLOP/s host over 128 GB/s with 2 us per call) and
Llama-3.1-8B (32 heads of 128, 8 KV heads, hidden 4096). Array dims are
traced: every design below shares one compiled breakdown per phase."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.cost import build_table
from jaxplat.cost.microarch import gemm_cycles
from jaxplat.model import OFFLOAD_GROUPS, OFFLOAD_NAMES, hardware_from_dict
from jaxplat.model.hardware_layout import flat_layout
from jaxplat.specs import SpecError, read_yaml, resolve

T = 2048.0  # prompt
ATTN = ("logit", "softmax", "attend")


@pytest.fixture(scope="module")
def npu():
    return jp.load_hardware("npu-case-study-iv")


@pytest.fixture(scope="module")
def wl():
    return jp.replace(jp.load_workload("chatbot"), batch=1.0, beams=1.0, prompt=T, output=16.0)


def _row(b, name):
    i = b["name"].index(name)
    return {k: v[i] for k, v in b.items() if isinstance(v, list)}


@pytest.fixture(scope="module")
def prefill(npu, llama8b, wl):
    """Prefill breakdowns of the three Case Study IV designs (one compile)."""
    return {(r, c, n): jp.breakdown(llama8b, jp.replace(npu, array_rows=r, array_cols=c, cores=n), jp.Parallel(),
                                    wl, "prefill")
            for r, c, n in ((256, 256, 1), (128, 128, 4), (64, 64, 16))}


def test_spec_loads_and_derives_the_peak(npu):
    assert npu.dataflow == "ws" and npu.offload == ()
    assert float(npu.array_rows) == 256 and float(npu.cores) == 1 and float(npu.clock_hz) == 1e9
    np.testing.assert_allclose(np.asarray(npu.flops), 2 * 256 * 256 * 1e9)  # 65,536 MACs x 2 x 1 GHz
    got = [float(npu.host_bw), float(npu.host_flops), float(npu.vector_flops), float(npu.host_latency)]
    np.testing.assert_allclose(got, [1.28e11, 8e12, 4e12, 2e-6], rtol=1e-7)  # float32


def test_qkv_cycles_by_hand(prefill):
    # qkv: m = 2048 tokens, k = 4096, n = (32 + 2 x 8) x 128 = 6144; ws puts k on rows, n on columns, streams m.
    # 1 x 256x256: 16 x 24 = 384 folds of 2*256 + 256 + 2048 - 2 = 2814 cycles -> 1,080,576 cycles
    # 4 x 128x128: 32 x 48 = 1536 folds in 384 waves of 256 + 128 + 2048 - 2 = 2430 -> 933,120
    # 16 x 64x64: 64 x 96 = 6144 folds in 384 waves of 128 + 64 + 2048 - 2 = 2238 -> 859,392
    for design, cycles in (((256, 256, 1), 1_080_576), ((128, 128, 4), 933_120), ((64, 64, 16), 859_392)):
        r = _row(prefill[design], "qkv")
        assert (r["m"], r["k"], r["n"]) == (2048, 4096, 6144)
        assert r["compute_time"] * 1e9 == pytest.approx(cycles, abs=0.25)  # to a quarter cycle
    # utilization of the one big array: useful MACs / PE-cycles = 2048*4096*6144 / (1,080,576 * 65,536)
    r = _row(prefill[256, 256, 1], "qkv")
    assert r["flops"] / (r["compute_time"] * 2 * 65536 * 1e9) == pytest.approx(0.72776, rel=1e-4)


def test_causal_attention_heads_share_the_waves(prefill):
    # logit: 32 heads of (2048 x 128) . (128 x 2048), causal: 2049/4096 of the pairs, so
    # 32 x 2049/4096 = 16.0078 GEMMs of ceil(128/256) x ceil(2048/256) = 8 folds: 128.06 folds,
    # 129 waves on one array of 2814 cycles = 363,006 cycles; on 16 cores of 64x64,
    # 16.0078 x 2 x 32 = 1024.5 folds in ceil(64.03) = 65 waves of 2238 cycles = 145,470.
    assert _row(prefill[256, 256, 1], "logit")["compute_time"] * 1e9 == pytest.approx(363_006, abs=0.25)
    assert _row(prefill[64, 64, 16], "logit")["compute_time"] * 1e9 == pytest.approx(145_470, abs=0.25)


def test_kernel_efficiency_derates_the_array_as_it_does_tensor_cores(npu, llama8b, wl, prefill):
    """One mechanism for arrays and tensor cores: peak x utilization x the
    efficiency model's kernel kind (cost.efficiency.kernel_kind): halving
    eff_attention_compute doubles the attention rows' array time, GEMMs stay."""
    b = jp.breakdown(llama8b, jp.replace(npu, eff_attention_compute=0.5), jp.Parallel(), wl, "prefill")
    base = prefill[256, 256, 1]
    assert _row(b, "logit")["compute_time"] == pytest.approx(2 * _row(base, "logit")["compute_time"], rel=1e-6)
    assert _row(b, "qkv")["compute_time"] == _row(base, "qkv")["compute_time"]


def test_elementwise_rows_run_on_the_vector_unit(prefill):
    for name in ("softmax", "attn_norm", "act"):
        r = _row(prefill[256, 256, 1], name)
        assert r["flops"] > 0 and r["compute_time"] == pytest.approx(r["flops"] / 4e12, rel=1e-6)


def test_offloaded_attention_pays_host_and_link(npu, llama8b, wl):
    hw = jp.replace(npu, offload=ATTN)
    b = jp.breakdown(llama8b, hw, jp.Parallel(), wl, "prefill")
    # logit reads Q (2048 x 32 x 128 x 2 B = 16,777,216) and K (2048 x 8 x 128 x 2 B = 4,194,304) over
    # the link; its scores stay on the host (fused attention). attend reads V (4,194,304) and returns
    # the output (16,777,216). 20,971,520 B / 128 GB/s + 2 us = 165.84 us each; softmax moves nothing.
    for name in ("logit", "attend"):
        r = _row(b, name)
        assert r["compute_time"] == pytest.approx(r["flops"] / 8e12, rel=1e-6)
        assert r["memory_time"] == pytest.approx(20_971_520 / 1.28e11 + 2e-6, rel=1e-6)
    assert _row(b, "softmax")["memory_time"] == pytest.approx(2e-6, rel=1e-6)
    assert _row(b, "softmax")["compute_time"] == pytest.approx(_row(b, "softmax")["flops"] / 8e12, rel=1e-6)
    # rows not offloaded are untouched
    base = jp.breakdown(llama8b, npu, jp.Parallel(), wl, "prefill")
    for name in ("qkv", "up_gate", "down"):
        assert _row(b, name)["time"] == _row(base, name)["time"]


def test_decode_attention_slope_by_hand(npu, llama8b, wl):
    b = jp.breakdown(llama8b, npu, jp.Parallel(), wl, "decode")
    # A step attends over the 2048-token prompt (prefix) and the s tokens generated so far (suffix).
    # logit_prefix: 32 heads of (1 x 128) . (128 x 2048): 32 x 8 folds of 2*256 + 256 + 1 - 2 = 767 cycles.
    assert _row(b, "logit_prefix")["compute_time"] * 1e9 == pytest.approx(32 * 8 * 767, abs=0.25)
    # logit_suffix: each generated token adds a key to 32 heads; ceil(N/256) folds per head, so the cycles
    # grow by 32 x 767 / 256 = 95.875 per key (the exact count's slope: 32 x (32 - 16) x 767 / (8192 - 4096)).
    # The breakdown shows the mean step, s = (1 + 15) / 2 = 8 keys.
    assert _row(b, "logit_suffix")["compute_time"] == pytest.approx(8 * 95.875e-9, rel=1e-6)
    assert _row(b, "attend_suffix")["compute_time"] == pytest.approx(8 * 95.875e-9, rel=1e-6)


def test_groups_share_waves():
    # 4 independent GEMMs on 4 cores take the time of one on one core (ws: 2 x 3 folds of 2*32 + 32 + 100 - 2).
    one = gemm_cycles(100.0, 96.0, 64.0, 32.0, 32.0, "ws", cores=1)
    assert float(one) == 6 * 194 - 1
    assert float(gemm_cycles(100.0, 96.0, 64.0, 32.0, 32.0, "ws", cores=4, groups=4.0)) == float(one)
    assert float(gemm_cycles(100.0, 96.0, 64.0, 32.0, 32.0, "ws", cores=4, groups=5.0)) == 8 * 194 - 1  # 30 folds


def test_ttft_gradient_in_array_shape_matches_finite_differences(npu, llama8b, wl):
    """Smooth mode: d TTFT / d (rows, cols, cores) through the whole of `evaluate`
    equals central differences of the same smooth function (at a shape where
    no fold count is whole, so the smooth folds are not at a kink)."""
    opts = jp.Options(smooth=True)

    def ttft(v):
        hw = jp.replace(npu, array_rows=v[0], array_cols=v[1], cores=v[2])
        return jp.evaluate(llama8b, hw, jp.Parallel(), jp.replace(wl, prompt=1000.0), opts).ttft

    f = jax.jit(jax.value_and_grad(ttft))
    v = jnp.array([90.0, 150.0, 3.0], jnp.float32)
    g = np.asarray(f(v)[1])
    h = np.array([0.5, 0.5, 0.02])
    fd = np.array([(float(f(v.at[i].add(h[i]))[0]) - float(f(v.at[i].add(-h[i]))[0])) / (2 * h[i])
                   for i in range(3)])
    assert np.all(np.isfinite(g)) and np.all(g != 0)
    np.testing.assert_allclose(g, fd, rtol=2e-2)
    assert g[2] < 0  # more cores of the same shape: faster


def _spec(**compute):
    d = flat_layout(read_yaml(resolve("hardware", "npu-case-study-iv")))  # the flat layout's `compute:` block
    return {**d, "compute": {**d["compute"], **compute}}


def test_compute_block_errors_are_one_line():
    for bad, word in (({"array": [256]}, "array"), ({"dataflow": "rs"}, "rs"), ({"array": [64.5, 64]}, "array"),
                      ({"offload": ["logits"]}, "logits"), ({"clock_hz": "fast"}, "clock_hz"),
                      ({"host": {"flops": 8e12}}, "bandwidth")):
        with pytest.raises(SpecError) as e:
            hardware_from_dict(_spec(**bad), src="npu.yaml")
        assert word in str(e.value) and "npu.yaml" in str(e.value) and "\n" not in str(e.value)
    d = _spec(offload=["attention"])
    del d["compute"]["host"]
    with pytest.raises(SpecError, match="needs compute.host"):
        hardware_from_dict(d)
    with pytest.raises(SpecError, match="give compute.array"):
        hardware_from_dict({**_spec(), "compute": {"cores": 4}})
    assert hardware_from_dict(_spec(offload=["logit", "attention"], clock_hz="9e8")).offload == ("logit", "attention")


def test_offload_names_cover_every_operator(wl):
    """Every row of every table (dense, MoE, MLA, Mamba, hybrid; both phases;
    both profiles) can be named in compute.offload, by its name, its decode
    stem or its group."""
    seen = set()
    for name in ("llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "falcon-mamba-7b", "jamba-1.5-mini"):
        model = jp.load_model(name)
        for profile in ("default", "genz"):
            if model.attention == "mla" and profile == "genz":
                continue
            for phase in ("prefill", "decode"):
                t = build_table(model, jp.Parallel(), wl, phase, jp.Options(profile=profile))
                seen |= {(n, g) for n, g, k in zip(t.names, t.groups, t.comm_kinds) if not k}
    for n, g in seen:
        stem = n.rsplit("_", 1)[0] if n.endswith(("_prefix", "_suffix")) else n
        assert stem in OFFLOAD_NAMES and g in OFFLOAD_GROUPS, (n, g)


def test_npu_sweep_over_array_shape_matches_evaluate(npu, llama8b):
    """A sweep over the array's rows, columns and cores (hardware axes, traced)
    ranks the same TTFTs as `evaluate` one design at a time. Sweeping the
    array prices each design from its technology (price, TDP, static power
    and energies: `cost.priced_chip`), so each is evaluated so priced."""
    from jaxplat import search
    from jaxplat.cost import priced_chip
    from jaxplat.search import study_from_dict

    st = study_from_dict(dict(
        name="npu", models=["llama-3.1-8b"], workloads=["chatbot"], hardware="npu-case-study-iv",
        axes=dict(array_rows=[64, 128, 256], array_cols=[128, 256], cores=[1, 4]),
        constraints=dict(ttft=None, tpot=None), objective={"minimize": "ttft"}, top_k=12,
        engine=dict(block=16, blocks_per_step=1)))
    res = search.run(search.Engine(st), progress=False)
    assert res.counts[0] == res.counts[2] == 12  # evaluated, all within the (absent) constraints
    assert st.pricing == "technology"
    one = lambda hw: jp.evaluate(llama8b, hw, jp.Parallel(), st.workloads[0]).ttft  # noqa: E731
    want = {}
    for flat in range(12):
        cfg = {k: float(v[0]) for k, v in st.decode([flat]).items() if k in ("array_rows", "array_cols", "cores")}
        want[flat] = float(one(priced_chip(jp.replace(npu, **cfg), st.technology)))
    order = sorted(want, key=lambda i: (want[i], i))
    assert list(res.top["index"]) == order
    np.testing.assert_allclose(-res.top["score"], [want[i] for i in order], rtol=1e-5)
    with pytest.raises(SpecError, match="systolic arrays"):
        study_from_dict(dict(name="x", models=["llama-3.1-8b"], workloads=["chatbot"], hardware="npu-case-study-iv",
                             axes=dict(flops=[1e14, 2e14]), objective={"minimize": "ttft"}))


def test_exp_rate_from_the_spec():
    """The special-function units' exponentials per second: given (A100: 108 SMs x 16 x 1.41 GHz; Blackwell
    Ultra doubles Blackwell's), else the listed FP32 peak / 16 (an H100 SXM's 67 TFLOP/s: 132 SMs x 16 x
    1.98 GHz), else none (a TPU lists no FP32 peak; an array's derived peak is no FP32 unit)."""
    rates = {n: float(jp.load_hardware(n).chip.exp_rate) for n in ("h100-sxm", "a100-80gb", "gb300", "tpu-v5p")}
    assert rates == pytest.approx({"h100-sxm": 67e12 / 16, "a100-80gb": 2.44e12, "gb300": 10e12, "tpu-v5p": 0.0})
    assert float(jp.load_hardware("npu-case-study-iv").chip.exp_rate) == 0.0
    with pytest.raises(SpecError, match=r"compute.exp_rate"):
        hardware_from_dict({**_spec(), "compute": {**_spec()["compute"], "exp_rate": -1.0}})


def test_softmax_exponentials_by_hand(llama8b, wl):
    """One exponential per causal score at the chip's rate, on the score row's compute time: Llama-3.1-8B's
    2,048-token prefill, 32 layers of 32 heads x 2048 x (2048 + 128) / 2 scores (the query-key pairs and the
    diagonal tiles' masked ones, 128-row tiles), on an H100 (4.1875e12/s); nothing else moves, and the GenZ
    profile ("flat") has no such time."""
    h100 = jp.load_hardware("h100-sxm")
    rows = {r: jp.breakdown(llama8b, jp.replace(h100, exp_rate=r), jp.Parallel(), wl, "prefill")
            for r in (67e12 / 16, 0.0)}
    with_exp, without = (np.asarray(rows[r]["compute_time"]) for r in (67e12 / 16, 0.0))
    soft = rows[0.0]["name"].index("logit")
    layers = rows[0.0]["count"][soft]
    assert layers == 32
    assert (with_exp - without)[soft] * layers == pytest.approx(32 * 32 * 2048 * 2176 / 2 / (67e12 / 16), rel=1e-5)
    np.testing.assert_array_equal(np.delete(with_exp, soft), np.delete(without, soft))
    genz = [jp.breakdown(llama8b, jp.replace(h100, exp_rate=r), jp.Parallel(), wl, "prefill",
                         jp.Options(profile="genz"))["compute_time"] for r in (67e12 / 16, 0.0)]
    assert genz[0] == genz[1]


def test_causal_diagonal_tiles_by_hand(llama8b, wl, npu):
    """A multi-query attention kernel computes a causal mask's diagonal tiles whole: Llama-3.1-8B's 2,048-token
    prefill on an H100 (128-row tiles) adds 32 heads x 2,048 queries x 127 / 2 pairs per layer, at 2 x 128 FLOPs
    each on the score and weighted-sum rows and 5 on the softmax's. None on the other rows, in decode (one query
    per sequence), on a chip without tiles (the NPU's systolic arrays) or under GenZ's conventions (T^2 pairs)."""
    from jaxplat.cost.compute import diagonal_flops
    from jaxplat.cost.operators import SOFTMAX_FLOPS
    h100, opts = jp.load_hardware("h100-sxm"), jp.Options()
    t = build_table(llama8b, jp.Parallel(), wl, "prefill", opts)
    extra = np.asarray(diagonal_flops(t, h100, opts))
    pairs = 32 * 2048 * 127 / 2
    want = {"logit": 2 * 128 * pairs, "softmax": SOFTMAX_FLOPS * pairs, "attend": 2 * 128 * pairs}
    for name, x in zip(t.names, extra):
        assert x == pytest.approx(want.get(name, 0.0), rel=1e-6), name
    dec = build_table(llama8b, jp.Parallel(), wl, "decode", opts)
    assert not np.any(np.asarray(diagonal_flops(dec, h100, opts)))
    assert not np.any(np.asarray(diagonal_flops(t, npu, opts)))
    genz = jp.Options(profile="genz")
    assert not np.any(np.asarray(diagonal_flops(build_table(llama8b, jp.Parallel(), wl, "prefill", genz), h100, genz)))


def test_attention_overlap_by_hand(llama8b, wl):
    """A multi-query attention kernel's rows take the 2-norm of their compute and memory times (attention_overlap
    2; their launch outside it), every other row the max: Llama-3.1-8B's 2,048-token prefill on an H100 (its power
    limit lifted, so that the clock stays put), breakdown against breakdown. Overlap 0 is the max again."""
    h100 = jp.replace(jp.load_hardware("h100-sxm"), tdp=1e6)
    rows = {q: jp.breakdown(llama8b, jp.replace(h100, eff_attention_overlap=q), jp.Parallel(), wl, "prefill")
            for q in (2.0, 0.0)}
    b = rows[2.0]
    c, m, fixed, comm = (np.asarray(b[k]) for k in ("compute_time", "memory_time", "fixed_time", "comm_time"))
    joined = {"logit", "softmax", "attend"}
    for i, name in enumerate(b["name"]):
        if name in joined:
            assert b["time"][i] == pytest.approx(fixed[i] + np.hypot(c[i], m[i]) + comm[i], rel=1e-5), name
        else:
            assert b["time"][i] == pytest.approx(rows[0.0]["time"][i], rel=1e-6), name
    assert sum(b["time"][b["name"].index(n)] for n in joined) > sum(rows[0.0]["time"][rows[0.0]["name"].index(n)]
                                                                    for n in joined)


def test_gemm_overlap_by_hand(llama8b):
    """With Options.gemm_overlap p > 0 the weight GEMMs' rows take the p-norm of their compute and memory times
    (their launch outside it), every other row of a decode step its max: Llama-3.1-8B decoding 256 sequences on an
    H100 in bf16 (near the GEMMs' ridge: 256 rows are 256 FLOP per weight byte, the chip's achieved FLOP/s over its
    achieved bandwidth about 270), the mean step of the breakdown at p = 3 against the default (0, the max). At the
    ridge the norm is 2^(1/3) x the max, so the GEMM rows slow down, by at most that."""
    h100 = jp.replace(jp.load_hardware("h100-sxm"), tdp=1e6)
    decode = jp.replace(jp.load_workload("chatbot"), batch=256.0, beams=1.0, prompt=512.0, output=64.0)
    rows = {q: jp.breakdown(llama8b, h100, jp.Parallel(), decode, "decode", jp.Options(gemm_overlap=q))
            for q in (3.0, 0.0)}
    b = rows[3.0]
    c, m, fixed = (np.asarray(b[k]) for k in ("compute_time", "memory_time", "fixed_time"))
    gemms = {"qkv", "out_proj", "up_gate", "down", "lm_head"}
    assert gemms <= set(b["name"])
    for i, name in enumerate(b["name"]):
        if not b["count"][i]:  # a dense model's rows of the MoE layer, never run
            continue
        if name in gemms:
            assert b["time"][i] == pytest.approx(fixed[i] + (c[i] ** 3 + m[i] ** 3) ** (1 / 3), rel=1e-5), name
            assert rows[0.0]["time"][i] < b["time"][i] <= 2 ** (1 / 3) * rows[0.0]["time"][i], name
        else:
            assert b["time"][i] == pytest.approx(rows[0.0]["time"][i], rel=1e-6), name
    up = b["name"].index("up_gate")
    assert 0.5 < c[up] / m[up] < 2.0  # near the ridge, where the norm matters
    with pytest.raises(jp.SpecError, match=r"gemm_overlap is 0 \(the max\) or an exponent in \[1, 64\], got 0.5"):
        jp.Options(gemm_overlap=0.5)


def test_exp_rate_is_a_sweep_axis(llama8b):
    """A study sweeps the special-function units' rate like any hardware number: TTFT falls as it grows (the
    prefill's exponentials), and each point is `evaluate`'s on the chip with that rate (not priced: the rate
    is no axis of the technology model)."""
    from jaxplat import search
    from jaxplat.search import study_from_dict

    st = study_from_dict(dict(
        name="sfu", models=["llama-3.1-8b"], workloads=["chatbot"], hardware="h100-sxm",
        axes=dict(exp_rate=[1e12, 4e12, 16e12]), constraints=dict(ttft=None, tpot=None),
        objective={"minimize": "ttft"}, top_k=3, engine=dict(block=4, blocks_per_step=1)))
    assert st.pricing == "fixed"
    res = search.run(search.Engine(st), progress=False)
    hw = jp.load_hardware("h100-sxm")
    one = lambda h: jp.evaluate(llama8b, h, jp.Parallel(), st.workloads[0]).ttft  # noqa: E731
    want = {i: float(one(jp.replace(hw, exp_rate=float(st.decode([i])["exp_rate"][0])))) for i in range(3)}
    assert want[0] > want[1] > want[2]
    assert list(res.top["index"]) == [2, 1, 0]
    np.testing.assert_allclose(-res.top["score"], [want[2], want[1], want[0]], rtol=1e-5)
