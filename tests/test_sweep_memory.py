"""Sweeps and co-design check memory as a serving engine holds the batch.

`evaluate`'s static batch prefills every prompt in one pass and holds the
activations of batch x prompt tokens; an engine holds those of one iteration
of its token budget (8192 tokens) and sizes its KV pool after them. A sweep
used the first, so a batch `estimate --rate 0` serves was rejected (for
Llama-3.1-70B on 8 H100s, 372 sequences of 3000 + 1000 tokens: 55 GB of
activations instead of 0.15 GB).
"""

import contextlib
import io
import json

import jax
import numpy as np
import pytest

import jaxplat as jp
from jaxplat import search
from jaxplat.cli import main
from jaxplat.design import codesign as cd
from jaxplat.model import replace
from jaxplat.search import study_from_dict

MODEL, CHIP, TP = "llama-3.1-70b", "h100-sxm", 8


def _estimate(*flags):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["estimate", "--model", MODEL, "--hardware", CHIP, "--tp", str(TP), "--workload", "chatbot",
              "--beams", "1", "--json", "--allow-infeasible", *flags])
    return json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def offline():
    return _estimate("--rate", "0")


@pytest.fixture(scope="module")
def swept(offline):
    """The sweep path (search.Engine) at --rate 0's max batch and one more."""
    mb = offline["max_batch"]
    st = study_from_dict(dict(name="one", models=[MODEL], workloads=["chatbot"], hardware=CHIP,
                              axes=dict(tp=[TP], beams=[1], batch=[mb, mb + 1]),
                              constraints=dict(ttft="none", tpot="none"), objective={"maximize": "throughput"}))
    engine = search.Engine(st)
    res = search.run(engine, progress=False)
    return engine, res, dict(zip(engine.metrics, engine.values([0, 1]).T))


def test_sweep_fits_exactly_the_batches_rate0_serves(offline, swept):
    engine, res, vals = swept
    mb = offline["max_batch"]
    assert mb > 256  # the whole-batch prefill reserve rejected every batch above ~200
    # of the two configurations, the max batch fits and one more does not
    assert res.counts[list(search.COUNTERS).index("feasible")] == 1
    assert list(res.top["index"]) == [0]
    # memory by hand: weights + mb x one sequence's KV cache + the activations
    # of one 8192-token iteration (estimate's static batch-1 figures)
    one, it = _estimate(), _estimate("--batch", "1", "--prompt", "8192", "--output", "1")
    by_hand = one["weights_bytes"] + mb * one["kv_bytes"] + it["activation_bytes"]
    np.testing.assert_allclose(vals["memory_bytes"][0], by_hand, rtol=1e-5)


def test_sweep_throughput_at_the_max_batch_is_the_static_batch_of_it(offline, swept):
    """The sweep prices a static batch (`evaluate`): at --rate 0's max batch its
    throughput is `estimate --batch mb`'s to 1e-5, and within 1% of the max-load
    closed loop's (which interleaves prefills with decodes)."""
    _, _, vals = swept
    mb = int(offline["max_batch"])
    static = _estimate("--batch", str(mb))
    np.testing.assert_allclose(vals["throughput"][0], static["throughput_tok_s"], rtol=1e-5)
    np.testing.assert_allclose(vals["throughput"][0], offline["throughput_tok_s"], rtol=1e-2)


def test_codesign_checks_memory_as_the_engine_does(offline):
    """Co-design's exact check (served_evaluate) accepts --rate 0's max batch
    and not one more; its fill is <= 1 exactly when it fits."""
    mb = offline["max_batch"]
    model, hw = jp.load_model(MODEL), jp.load_hardware(CHIP)
    wl = replace(jp.load_workload("chatbot"), beams=1.0)
    f = jax.jit(lambda b: cd.served_evaluate(model, hw, jp.Parallel(tp=float(TP)), replace(wl, batch=b),
                                             jp.Options()))
    for b, fits in ((mb, True), (mb + 1, False)):
        m, fill = jax.device_get(f(np.float32(b)))
        assert bool(m.fits) is fits and bool(m.feasible) is fits and (float(fill) <= 1.0) is fits
    assert not bool(jp.evaluate(model, hw, jp.Parallel(tp=float(TP)), replace(wl, batch=float(mb))).fits)
