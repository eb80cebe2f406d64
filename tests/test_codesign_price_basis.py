"""Co-design prices the base chip as it prices the designed ones.

Designed chips are priced by the technology model (die area, yield, HBM
stacks, packaging, markup); a built-in chip's spec carries a street price
(H100: $30,000). Comparing one with the other mixes two bases, so the
co-design result prices the base chip by the technology model of its own
numbers and says which basis it used. The expected price is worked here
from the YAML numbers with plain arithmetic (Hennessy & Patterson's dies
per wafer, Stapper's negative-binomial yield).
"""

import math

import numpy as np
import pytest
import yaml

import jaxplat as jp
from jaxplat.cost import money
from jaxplat.design import codesign as cd
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.specs import read_yaml, resolve
from jaxplat.specs.units import DTYPES

STUDY = "codesign-llama70b-chatbot"


def _tech_price(t: dict, hbm: dict, flops, sram, mem_bytes, mem_bw, link) -> float:
    """USD of a chip with these numbers from a technology YAML (n5.yaml's keys)."""
    stacks = max(math.ceil(mem_bytes / (hbm["stack_gb"] * 2**30)), math.ceil(mem_bw / (hbm["stack_tbs"] * 1e12)))
    area = (t["fixed_mm2"] + flops / 1e12 * t["compute_mm2_per_tflops"] + sram / 1e6 * t["sram_mm2_per_mb"]
            + stacks * t["hbm_phy_mm2"] + link / 100e9 * t["link_mm2_per_100gbs"])
    d = t["wafer_mm"]
    dies = math.pi * (d / 2) ** 2 / area - math.pi * d / math.sqrt(2 * area)
    good = (1 + area * t["defects_per_cm2"] / 100 / t["yield_alpha"]) ** (-t["yield_alpha"])
    die = t["wafer_usd"] / (dies * good)
    return t["markup"] * (die + stacks * hbm["stack_usd"] + t["packaging_usd"]) + t["overhead_usd"]


def test_base_chip_is_priced_by_the_technology_model_of_its_own_numbers(tmp_path):
    d = read_yaml(resolve("studies", STUDY))
    # The chatbot's 10 ms TPOT is out of the H100's reach on the default stack (13.2 ms at tp 8, its 2 ms
    # per step and 3 x 0.8 ms for tp 8's ranks included): the same use case at 15 ms, so that the base chip
    # has a best candidate to price.
    wl = read_yaml(resolve("workloads", d["workload"]))
    wl["slo"]["tpot"] = 0.015
    (tmp_path / "chatbot-15ms.yaml").write_text(yaml.safe_dump(wl))
    d["workload"] = str(tmp_path / "chatbot-15ms.yaml")
    prob, cfg = problem_from_dict(d, src=STUDY)
    with open(resolve("technology", d["technology"])) as f:
        t = yaml.safe_load(f)
    h100 = jp.load_hardware(d["base"])
    expected = _tech_price(t, t["hbm"][d["hbm"]], float(h100.flops[DTYPES.index("bf16")]),
                           float(h100.sram_size), float(h100.mem_size[0]), float(h100.mem_bw[0]),
                           float(h100.net_bw[0]))
    base = cd.base_comparison(prob)
    assert base["price_usd"] == pytest.approx(expected, rel=1e-5)
    assert base["street_price_usd"] == 30000.0 and abs(base["price_usd"] - 30000.0) > 1000.0  # two bases differ
    assert "technology model n5" in cd.price_basis(cfg["technology"])
    # its objective is the exact objective of that re-priced chip on its best candidate
    assert math.isfinite(base["objective"]) and base["candidate"] is not None
    obj, _ = cd.chip_objectives(money.priced_chip(prob.base, prob.tech), True, prob)
    assert float(np.min(np.asarray(obj))) == pytest.approx(base["objective"], rel=1e-6)
