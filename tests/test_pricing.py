"""Priced hypothetical chips: a sweep that varies a chip's numbers prices each
point with the technology model (cost.money.priced_chip, the pricing co-design
uses), unless the study says `price: fixed`."""

import math

import jax
import numpy as np
import pytest

import jaxplat as jp
from jaxplat import search
from jaxplat.cost import money
from jaxplat.design import codesign
from jaxplat.model import load_technology, replace
from jaxplat.search import study_from_dict
from jaxplat.specs import SpecError

STUDY = dict(
    name="priced", models=["llama-3.1-8b"], workloads=["chatbot"], hardware="h100-sxm",
    axes=dict(tp=[1, 2], hbm_bandwidth={"log": [1e12, 8e12], "count": 3}, flops=[2e14, 1e15, 4e15]),
    constraints=dict(max_chips=2), objective={"minimize": "cost_per_mtok_usd"},
    pareto=["tpot", "cost_per_mtok_usd"], top_k=18, engine=dict(block=64, blocks_per_step=1))


def test_priced_chip_by_hand():
    """N5 constants (specs/technology/n5.yaml, HBM3E 36 GB, 1.2 TB/s a stack):
    989 TFLOP/s, 50 MB SRAM, 80 GB and 3.35 TB/s of HBM (3 stacks for either),
    450 GB/s links: area = 100 + 989 x 0.6 + 50 x 0.45 + 3 x 12 + 4.5 x 3 mm²."""
    tech = load_technology("n5")
    hw = jp.load_hardware("h100-sxm")
    hw = replace(hw, flops=hw.flops * (989e12 / hw.flops[2]), sram_size=50e6, mem_size=hw.mem_size.at[0].set(80e9),
                 mem_bw=hw.mem_bw.at[0].set(3.35e12), net_bw=hw.net_bw.at[0].set(450e9))
    area = 100 + 989 * 0.6 + 50 * 0.45 + 3 * 12 + 4.5 * 3
    priced = money.priced_chip(hw, tech)
    assert float(priced.static_power) == pytest.approx(0.1 * area, rel=1e-5)
    a, _, _ = codesign.chip_numbers(jax.numpy.array([989e12, 50e6, 3.0, 450e9]), tech)
    assert float(a) == pytest.approx(area, rel=1e-5)
    # Price and TDP by hand from n5.yaml (the old test compared priced_chip
    # with chip_numbers, the function it calls). Gross dies on a 300 mm wafer
    # pi 150^2 / A - pi 300 / sqrt(2 A) (Hennessy & Patterson), negative-binomial
    # yield (1 + A D0 / 3)^-3 with D0 = 0.1 / cm^2; price = 1.5 x (die + 3 HBM3E
    # stacks x $540 + $1000 packaging) + $4000. TDP: 0.1 W/mm^2 leakage,
    # 0.8 pJ/FLOP, SRAM at 0.01 B/FLOP x 0.2 pJ/bit, 3 stacks x 1.2 TB/s x
    # 3.9 pJ/bit, 450 GB/s both ways x 8 pJ/bit.
    dies = math.pi * 150**2 / area - math.pi * 300 / math.sqrt(2 * area)
    die_usd = 17000 / (dies * (1 + area / 100 * 0.1 / 3) ** -3)
    price = 1.5 * (die_usd + 3 * 540 + 1000) + 4000
    tdp = (0.1 * area + 989e12 * 0.8e-12 + 989e12 * 0.01 * 8 * 0.2e-12 + 3 * 1.2e12 * 8 * 3.9e-12
           + 2 * 450e9 * 8 * 8e-12)
    assert (round(price), round(tdp, 1)) == (8669, 1053.5)  # $492 a good die (68.3 gross, yield 0.506)
    assert (float(priced.price), float(priced.tdp)) == pytest.approx((price, tdp), rel=1e-5)
    bigger = money.priced_chip(replace(hw, flops=hw.flops * 2), tech)
    assert float(bigger.price) > float(priced.price) and float(bigger.tdp) > float(priced.tdp)


def _loop(study, priced):
    one = lambda h, p: jp.evaluate(study.models[0], h, p, study.workloads[0], study.options)  # noqa: E731
    h0, tech = study.hardware, load_technology("n5")
    rows = []
    for flat in range(study.size):
        cfg = {k: v[0] for k, v in study.decode([flat]).items()}
        hw = replace(h0, mem_bw=h0.mem_bw.at[0].set(cfg["hbm_bandwidth"]), flops=h0.flops * (cfg["flops"] / h0.flops[2]))
        if priced:
            hw = money.priced_chip(hw, tech)
        r = jax.device_get(one(hw, jp.Parallel(tp=cfg["tp"])))
        if bool(r.feasible) and r.chips <= 2 and r.ttft <= 0.2 and r.tpot <= 0.01:
            rows.append((float(r.cost_per_mtok_usd), flat))
    return sorted(rows)


@pytest.mark.parametrize("price", [None, "fixed"])
def test_sweep_prices_each_point(price):
    spec = dict(STUDY) if price is None else {**STUDY, "price": price}
    st = study_from_dict(spec)
    assert st.pricing == ("technology" if price is None else "fixed")
    assert ("technology model n5" in st.pricing_text) == (price is None)
    engine = search.Engine(st)
    res = search.run(engine, progress=False)
    want = _loop(st, priced=price is None)
    assert 3 < len(want) == len(res.top["index"])
    col = engine.metrics.index("cost_per_mtok_usd")
    np.testing.assert_allclose(res.top["vals"][:, col], [c for c, _ in want], rtol=1e-4)
    assert list(res.top["index"]) == [flat for _, flat in want]


def test_price_axis_needs_fixed_pricing():
    with pytest.raises(SpecError, match="price: fixed"):
        study_from_dict({**STUDY, "price": "technology", "axes": {**STUDY["axes"], "price": [1e4, 2e4]}})
    st = study_from_dict({**STUDY, "axes": {**STUDY["axes"], "price": [1e4, 2e4]}})
    assert st.pricing == "fixed"  # the axis sets the price itself
    with pytest.raises(SpecError, match="price 'datasheet' is not one of"):
        study_from_dict({**STUDY, "price": "datasheet"})
