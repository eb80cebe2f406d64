"""Platform requirements (jaxplat.design.requirements, `jaxplat requirements`):
GenZ's closed forms equal GenZ 0.0.16's own numbers for the paper's models
and use cases (tests/data/genz_requirements), and the cost-model inversions
land on the SLO and, where the roofline is a single bound, on the closed form."""

import csv
import json
from pathlib import Path

import pytest
from helpers import genz_system, workload

import jaxplat as jp
from jaxplat.design import closed_forms, platform_requirements
from jaxplat.model import replace
from jaxplat.specs import units

DATA = Path(__file__).resolve().parent / "data" / "genz_requirements"
GENZ = jp.Options(profile="genz")
KEYS = ("mem_bytes", "decode_mem_bw_bytes_s", "prefill_flops_s")


def _with_dtype(wl, dtype):
    b = units.BYTES_PER_ELEMENT[dtype]
    return replace(wl, bytes_weight=b, bytes_act=b, bytes_kv=b, compute_dtype=float(units.DTYPES.index(dtype)))


def test_genz_closed_forms_match_genz():
    """5 models x 5 use cases x bf16/int8 (README.md there: the command that
    made them). GenZ's GPT-3 has 50272 tokens to our 50257: 2e-6 apart."""
    rows = list(csv.DictReader(open(DATA / "genz_requirements.csv")))
    assert len(rows) == 50
    models = {}
    for r in rows:
        m = models.setdefault(r["model"], jp.load_model(r["model"]))
        wl = _with_dtype(jp.load_workload(r["workload"]), r["dtype"])
        got = closed_forms(m, jp.Parallel(), wl, GENZ)
        for key in KEYS:
            assert float(got[key]) == pytest.approx(float(r[key]), rel=1e-5), (r["model"], r["workload"], key)


def test_closed_form_active_weights_leave_idle_experts_out():
    m = jp.load_model("mixtral-8x7b")
    got = closed_forms(m, jp.Parallel(), jp.load_workload("qa"), GENZ)
    # GenZ decode: 2 of 8 experts run, 6 x (3 x 4096 x 14336) x 2 B per layer idle, 32 layers
    idle = 32 * 6 * 3 * 4096 * 14336 * 2.0
    assert float(got["weights_bytes"] - got["used_weights_bytes"]) == pytest.approx(idle, rel=1e-6)


@pytest.fixture(scope="module")
def plain_genz_chip():
    """A GenZ system whose memory and links are all but free: TTFT is prefill
    FLOPs / peak and TPOT is bytes / memory bandwidth, op by op."""
    return genz_system(400, 2000, onchip_gbs=1e12, link_gbs=1e12, link_us=0.0, mem_gb=1000)


def test_inversions_equal_closed_forms_on_a_single_bound_chip(plain_genz_chip):
    m, wl = jp.load_model("llama-2-7b"), jp.load_workload("qa")
    req = platform_requirements(m, plain_genz_chip, jp.Parallel(), wl, GENZ)
    # prefill on a chip with free memory is compute-bound: peak = FLOPs / TTFT
    assert req["prefill_flops_s_model"] == pytest.approx(req["prefill_flops_s"], rel=1e-4)
    # GenZ's fit: prefill weights (embedding included) + KV <= memory
    met = jp.evaluate(m, plain_genz_chip, jp.Parallel(), wl, GENZ)
    assert req["mem_bytes_model"] == pytest.approx(float(met.weights_bytes + met.kv_bytes), rel=1e-4)
    assert req["binding"] in KEYS and not req["reasons"]


def test_bandwidth_inversion_lands_on_the_tpot_slo(h100):
    m, wl = jp.load_model("llama-3.1-8b"), jp.load_workload("qa")
    req = platform_requirements(m, h100, jp.Parallel(), wl, jp.Options())
    bw = req["decode_mem_bw_bytes_s_model"]
    at = lambda v: float(jp.evaluate(m, replace(h100, mem_bw=h100.mem_bw.at[0].set(v)), jp.Parallel(), wl).tpot)  # noqa: E731
    assert at(bw * (1 + 1e-5)) <= float(wl.tpot_slo) < at(bw * 0.999)  # bisection resolution ~1e-6
    fl = req["prefill_flops_s_model"]
    at = lambda v: float(jp.evaluate(m, replace(h100, flops=h100.flops * v / req["base_prefill_flops_s"]),  # noqa: E731
                                     jp.Parallel(), wl).ttft)
    assert at(fl * (1 + 1e-5)) <= float(wl.ttft_slo) < at(fl * 0.999)


def test_unreachable_slo_is_inf_with_a_reason(capsys):
    from jaxplat.cli.app import main
    assert main(["requirements", "--model", "llama-2-7b", "--workload", "qa", "--output", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mem_bytes"] > 0 and out["prefill_flops_s"] > 0 and out["binding"] in KEYS
    m = jp.load_model("llama-2-7b")
    wl = replace(workload(batch=1, prompt=100, output=4), ttft_slo=1e-9, tpot_slo=1.0)
    req = platform_requirements(m, jp.load_hardware("h100-sxm"), jp.Parallel(), wl, jp.Options())
    assert req["prefill_flops_s_model"] == float("inf") and "TTFT" in req["reasons"]["prefill_flops_s_model"]


def test_each_requirement_holds_on_one_chip_that_meets_every_slo():
    """Llama-3.1-70B chat on 8 H200s: the FLOP/s found for TTFT is found on
    a chip whose bandwidth is max(base, its own requirement); at those
    numbers both SLOs hold, and 0.99 x the FLOP/s misses TTFT (the root is
    tight)."""
    m, wl, hw = jp.load_model("llama-3.1-70b"), jp.load_workload("chatbot"), jp.load_hardware("h200-sxm")
    par = jp.Parallel(tp=8)
    req = platform_requirements(m, hw, par, wl, jp.Options())
    fl, bw = req["prefill_flops_s_model"], req["decode_mem_bw_bytes_s_model"]
    assert 0 < fl < float("inf") and 0 < bw < float("inf")

    def chip(flops, mem_bw):
        return replace(hw, flops=hw.flops * flops / req["base_prefill_flops_s"],
                       mem_bw=hw.mem_bw.at[0].set(max(mem_bw, float(hw.mem_bw[0]))))
    ok = jp.evaluate(m, chip(fl * (1 + 1e-4), bw * (1 + 1e-4)), par, wl)
    assert float(ok.ttft) <= float(wl.ttft_slo) and float(ok.tpot) <= float(wl.tpot_slo)
    assert float(jp.evaluate(m, chip(fl * 0.99, bw), par, wl).ttft) > float(wl.ttft_slo)


def test_a_power_bound_ttft_says_so():
    """Llama-3.1-70B chat on one H100-class chip: whatever its FLOP/s, the
    3000-token prefill's energy at 700 W takes longer than 200 ms (the
    chip is held to its TDP), and the reason names the power limit."""
    m, wl, hw = jp.load_model("llama-3.1-70b"), jp.load_workload("chatbot"), jp.load_hardware("h100-sxm")
    req = platform_requirements(m, hw, jp.Parallel(), wl, jp.Options())
    assert req["prefill_flops_s_model"] == float("inf")
    assert "power limit (tdp_w 700 W" in req["reasons"]["prefill_flops_s_model"]
    # with ten times the power the same chip meets it at some FLOP/s
    req = platform_requirements(m, replace(hw, tdp=hw.tdp * 10), jp.Parallel(), wl, jp.Options())
    assert req["prefill_flops_s_model"] < float("inf")
