"""Energy, power, cost per token and the technology model, against numbers
worked by hand. The end-to-end checks use the genz profile: same energy code,
a much smaller program to compile."""

import json
import math

import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.cli import main
from jaxplat.cost import OpTable, energy
from jaxplat.cost import money as cost
from jaxplat.cost.operators import NUMERIC, OpKind
from jaxplat.model import hardware_from_dict, param_count, replace, workload_from_dict
from jaxplat.specs import SpecError
from jaxplat.specs.units import DTYPES

GENZ = jp.Options(profile="genz")

H100_LIKE = {
    "flops": {"bf16": 989e12},
    "memory": [{"name": "sram", "size": 50e6, "bandwidth": 10e12},
               {"name": "hbm", "size": 80e9, "bandwidth": 3.35e12}],
    "network": [{"domain": 8, "bandwidth": 450e9, "latency": 1e-6},
                {"domain": 1024, "bandwidth": 50e9, "latency": 5e-6}],
    "tdp_w": 700, "price_usd": 30000,
}


def test_spec_defaults_follow_their_sources():
    """Defaults a spec leaves out: the two with a published figure equal it,
    the estimated ones keep the order physics gives them."""
    hw = hardware_from_dict({**H100_LIKE, "memory": H100_LIKE["memory"] + [
        {"name": "host-dram", "size": 1e12, "bandwidth": 64e9}]})
    # HBM: 3.9 pJ/bit at the interface (O'Connor et al., MICRO 2017) = 31.2 pJ per byte.
    np.testing.assert_allclose(hw.energy_mem[0], 31.2e-12, rtol=1e-6)
    # Electricity: US industrial average 8 c/kWh (EIA) = 0.08 USD / 3.6e6 J.
    np.testing.assert_allclose(hw.energy_price, 0.08 / 3.6e6, rtol=1e-6)
    # Idle draw of a 700 W H100 SXM: 70-100 W (nvidia-smi reports); a 4-6 year server life.
    assert 70.0 <= float(hw.static_power) <= 110.0
    assert 4 * 365 * 86400 <= float(hw.lifetime) <= 6 * 366 * 86400
    assert 1.0 < float(hw.pue) < 1.6  # below the Uptime Institute 2023 average of ~1.58
    # Estimates: narrower dtypes cost less per FLOP; per byte SRAM < HBM < off-package
    # DRAM (named by its level); scale-up links < scale-out.
    e = dict(zip(DTYPES, np.asarray(hw.energy_flop)))
    assert e["fp32"] > e["tf32"] > e["bf16"] == e["fp16"] > e["fp8"] > e["fp4"] > 0
    assert e["int8"] < e["fp8"] and e["int4"] < e["fp4"]
    assert 0 < float(hw.energy_sram) < float(hw.energy_mem[0]) < float(hw.energy_mem[1])
    assert 0 < float(hw.energy_net[0]) < float(hw.energy_net[1])


def test_spec_overrides_in_si():
    # Every number the spec gives, converted by hand: pJ -> J, pJ/bit -> J/byte,
    # years -> s (365.25 days), USD/kWh -> USD/J.
    d = {**H100_LIKE, "energy": {"pj_per_flop": {"bf16": 0.5}, "static_w": 50},
         "tco": {"lifetime_years": 5, "usd_per_kwh": 0.1, "pue": 1.1},
         "memory": [H100_LIKE["memory"][0], {**H100_LIKE["memory"][1], "pj_per_bit": 4.0}],
         "network": [{**H100_LIKE["network"][0], "pj_per_bit": 10.0}, H100_LIKE["network"][1]]}
    hw = hardware_from_dict(d)
    np.testing.assert_allclose(hw.energy_flop[DTYPES.index("bf16")], 0.5e-12, rtol=1e-6)
    np.testing.assert_allclose(hw.energy_mem[0], 32e-12, rtol=1e-6)
    np.testing.assert_allclose(hw.energy_net[0], 80e-12, rtol=1e-6)
    np.testing.assert_allclose([hw.static_power, hw.pue], [50, 1.1], rtol=1e-6)
    np.testing.assert_allclose(hw.lifetime, 5 * 365.25 * 86400, rtol=1e-6)
    np.testing.assert_allclose(hw.energy_price, 0.1 / 3.6e6, rtol=1e-6)


@pytest.mark.parametrize("bad, words", [
    ({"energy": {"pj_per_flops": {}}}, "energy.'pj_per_flops'"),
    ({"energy": {"pj_per_flop": {"bf17": 1}}}, "bf17"),
    ({"tco": {"pue": 0.9}}, "pue"),
])
def test_spec_errors_are_one_line(bad, words):
    with pytest.raises(SpecError) as e:
        hardware_from_dict({**H100_LIKE, **bad}, src="chip.yaml")
    assert "\n" not in str(e.value) and words.strip("'") in str(e.value)


def _table(**cols):
    rows = len(next(iter(cols.values())))
    # comm_s (rank stride of a collective group) is 1 for adjacent ranks, as operators.py builds it
    full = {k: jnp.asarray(cols.get(k, [1.0 if k == "comm_s" else 0.0] * rows), jnp.float32) for k in NUMERIC}
    comm = cols.get("kinds", ("",) * rows)
    return OpTable(**full, names=tuple(f"r{i}" for i in range(rows)), groups=("g",) * rows,
                   kinds=tuple(OpKind.COLLECTIVE if c else OpKind.GEMM for c in comm), comm_kinds=comm)


def test_table_energy_by_hand():
    # Row 0: a GEMM, 2 layers, 1e9 FLOPs + 1e6 per token; A on chip (1e3 B), W off chip
    # (1e6 B + 10 B/token), O off chip (1e3 B).
    # Row 1: an all-reduce over 16 chips of 1e6 bytes (8-chip inner domain), once.
    t = _table(count=[2.0, 1.0], f0=[1e9, 0.0], f1=[1e6, 0.0], a0=[1e3, 0.0], w0=[1e6, 0.0], w1=[10.0, 0.0],
               o0=[1e3, 0.0], on_a=[1.0, 0.0], comm_n=[1.0, 16.0], comm_b=[0.0, 1e6], kinds=("", "allreduce"))
    hw = replace(hardware_from_dict(H100_LIKE), energy_flop=jnp.full((8,), 1e-12), energy_sram=2e-12,
                 energy_mem=jnp.array([10e-12, 0.0, 0.0]), energy_net=jnp.array([50e-12, 100e-12, 100e-12]))
    # Decode over s = 1..3: passes 3, sum of s = 6.
    flops, on, off = energy.table_work(t, 3.0, 6.0)
    assert float(flops) == pytest.approx(2 * (3 * 1e9 + 6 * 1e6))
    assert float(on) == pytest.approx(2 * 3 * 1e3)
    assert float(off) == pytest.approx(2 * (3 * 1e6 + 6 * 10.0 + 3 * 1e3))
    # Hierarchical ring all-reduce: inside 8 chips 2·7/8·1e6, across 2 domains 2·1/2·(1e6/8).
    net = energy.comm_bytes(t, hw, GENZ)
    np.testing.assert_allclose(net, [1.75e6, 1.25e5, 0.0], rtol=1e-6)
    wl = jp.load_workload("chatbot")  # bf16 compute
    e = energy.dynamic_energy(t, hw, wl, GENZ, 3.0, 6.0)
    by_hand = (2 * (3e9 + 6e6) * 1e-12 + 6e3 * 2e-12 + 2 * (3e6 + 60 + 3e3) * 10e-12
               + 3 * (1.75e6 * 50e-12 + 1.25e5 * 100e-12))
    assert float(e) == pytest.approx(by_hand, rel=1e-6)


def test_other_collectives_traffic():
    hw = hardware_from_dict(H100_LIKE)
    n, b = jnp.float32(16.0), jnp.float32(1.6e6)
    np.testing.assert_allclose(energy.collective_bytes("allgather", hw, n, b), [1.4e6, 1e5, 0], rtol=1e-6)
    # all-to-all: 7 of 16 peers inside the domain, 8 across it.
    np.testing.assert_allclose(energy.collective_bytes("alltoall", hw, n, b), [0.7e6, 0.8e6, 0], rtol=1e-6)
    np.testing.assert_allclose(energy.collective_bytes("sendrecv", hw, jnp.float32(2.0), b), [1.6e6, 0, 0])
    np.testing.assert_allclose(energy.collective_bytes("allreduce", hw, jnp.float32(1.0), b), [0, 0, 0])


def test_cost_per_mtok_by_hand():
    hw = replace(hardware_from_dict(H100_LIKE), price=1e4, lifetime=1e8, pue=1.5, energy_price=1e-7)
    # capex 2 x 1e4 / 1e8 = 2e-4 $/s, energy 1000 W x 1.5 x 1e-7 = 1.5e-4 $/s, at 100 tokens/s.
    assert float(cost.cost_per_mtok(hw, 2.0, 1000.0, 100.0)) == pytest.approx(3.5, rel=1e-6)
    assert float(cost.cost_per_mtok(hw, 2.0, 1000.0, 0.0)) == 0.0


def test_technology_model_by_hand():
    tech = jp.load_technology("n5")
    area = cost.die_area(tech, 989e12, 50e6, 5.0, 450e9)
    assert float(area) == pytest.approx(989 * 0.6 + 50 * 0.45 + 5 * 12 + 4.5 * 3 + 100, rel=1e-5)  # 789.4 mm²
    # 300 mm wafer, 100 mm² die: π·150²/100 - π·300/√200 = 640.2 gross dies.
    assert float(cost.dies_per_wafer(tech, 100.0)) == pytest.approx(math.pi * 225 - math.pi * 300 / math.sqrt(200),
                                                                     rel=1e-5)
    # D0 = 0.1/cm² = 0.001/mm², α = 3: (1 + 0.1/3)^-3.
    assert float(cost.die_yield(tech, 100.0)) == pytest.approx((1 + 0.1 / 3) ** -3, rel=1e-5)
    die = 17000 / (float(cost.dies_per_wafer(tech, 100.0)) * (1 + 0.1 / 3) ** -3)
    assert float(cost.chip_price(tech, 100.0, 2.0)) == pytest.approx(1.5 * (die + 2 * 540 + 1000) + 4000, rel=1e-5)
    tdp = 0.1 * 100 + 1e15 * 0.8e-12 + 1e15 * 0.01 * 1.6e-12 + 2 * 1.2e12 * 31.2e-12 + 2 * 1e11 * 64e-12
    assert float(cost.chip_tdp(tech, 100.0, 1e15, 2.0, 1e11)) == pytest.approx(tdp, rel=1e-5)
    hbm4 = jp.load_technology("n3", "hbm4")
    assert float(hbm4.stack_bw) == pytest.approx(2e12) and float(hbm4.stack_bytes) == pytest.approx(48 * 2**30)  # 16 x 24 Gbit dies
    with pytest.raises(SpecError, match="hbm5"):
        jp.load_technology("n5", "hbm5")


@pytest.fixture(scope="module")
def llama7b_short():
    return jp.load_model("llama-2-7b"), workload_from_dict({"batch": 1, "prompt": 128, "output": 128})


def test_energy_counts_two_flops_per_parameter(llama7b_short):
    # Only FLOPs cost energy (1 pJ each): a forward pass over P + O tokens costs 2 FLOPs per
    # weight per token. GenZ conventions (CONVENTIONS.md): the embedding is a one-hot GEMM in
    # prefill only and the LM head runs on all P prompt tokens, then once per decode step;
    # attention over <= 256 tokens adds < 1%.
    model, wl = llama7b_short
    hw = replace(hardware_from_dict(H100_LIKE), energy_flop=jnp.full((8,), 1e-12), energy_sram=0.0,
                 energy_mem=jnp.zeros(3), energy_net=jnp.zeros(3), static_power=0.0)
    m = jp.evaluate(model, hw, jp.Parallel(), wl, GENZ)
    emb = float(model.vocab * model.hidden)
    body = float(param_count(model)) - 2 * emb  # untied: embedding + LM head
    by_hand = 1e-12 * (2 * body * (128 + 128) + 2 * emb * (128 + 128 + 127)) / 128
    assert float(m.energy_per_token_j) == pytest.approx(by_hand, rel=0.01)
    # Splitting the same work over pipeline stages or tensor-parallel chips moves no extra FLOPs.
    for par in (jp.Parallel(pp=2), jp.Parallel(tp=2)):
        split = jp.evaluate(model, hw, par, wl, GENZ)
        assert float(split.energy_per_token_j) == pytest.approx(float(m.energy_per_token_j), rel=1e-3)


def test_static_power_and_cost_in_metrics(llama7b_short):
    model, wl = llama7b_short
    hw = replace(hardware_from_dict(H100_LIKE), energy_flop=jnp.zeros(8), energy_sram=0.0,
                 energy_mem=jnp.zeros(3), energy_net=jnp.zeros(3), static_power=100.0)
    par = jp.Parallel(tp=2, dp=3)
    m = jp.evaluate(model, hw, par, wl, GENZ)
    # 2 chips per replica at 100 W for e2e seconds, over batch x output tokens; 3 replicas.
    assert float(m.energy_per_token_j) == pytest.approx(2 * 100 * float(m.e2e) / 128, rel=1e-5)
    assert float(m.power_w) == pytest.approx(6 * 100, rel=1e-5)
    per_s = 6 * 30000 / float(hw.lifetime) + 600 * 1.2 * float(hw.energy_price)
    assert float(m.cost_per_mtok_usd) == pytest.approx(1e6 * per_s / float(m.throughput), rel=1e-5)
    m = jp.evaluate(model, hw, jp.Parallel(tp=2, pp=2), wl, GENZ)  # 4 chips draw static power
    assert float(m.energy_per_token_j) == pytest.approx(4 * 100 * float(m.e2e) / 128, rel=1e-5)


def test_estimate_json_energy_and_cost_by_hand(capsys):
    main(["estimate", "--model", "llama-2-7b", "--hardware", "h100-sxm", "--profile", "genz", "--json"])
    out = json.loads(capsys.readouterr().out)
    model, hw, wl = jp.load_model("llama-2-7b"), jp.load_hardware("h100-sxm"), jp.load_workload("chatbot")
    m = jp.evaluate(model, hw, jp.Parallel(), wl, GENZ)
    for k, f in (("energy_per_token_j", "energy_per_token_j"), ("power_w", "power_w"), ("e2e_s", "e2e"),
                 ("cost_per_mtok_usd", "cost_per_mtok_usd"), ("throughput_tok_s", "throughput")):
        assert out[k] == pytest.approx(float(getattr(m, f)), rel=1e-6), k
    # Average power: the batch's energy (per token x batch x output) over its end-to-end time,
    # between the chip's idle draw (0.15 x 700 W) and its 700 W TDP.
    tokens = float(wl.batch * wl.output)
    assert out["power_w"] == pytest.approx(out["energy_per_token_j"] * tokens / out["e2e_s"], rel=1e-5)
    assert 0.15 * 700 < out["power_w"] < 700
    # USD per million tokens: a 30000 USD chip over 4 years, plus power x PUE 1.2 at
    # 8 c/kWh, at the reported throughput.
    per_s = 30000 / (4 * 365.25 * 86400) + out["power_w"] * 1.2 * 0.08 / 3.6e6
    assert out["cost_per_mtok_usd"] == pytest.approx(1e6 * per_s / out["throughput_tok_s"], rel=1e-5)
