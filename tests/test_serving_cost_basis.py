"""Serving modes price energy and money at the throughput they report.

`estimate --rate 0` and `--concurrency N` report a throughput at the engine's
own batch (max load or the closed loop): the cost per token, energy per
token and power beside it must come from that operating point, not from the
static batch of the workload (batch 1: its cost per token is ~70x higher).
"""

import json

import pytest

from jaxplat.cli import main

# The TCO basis of jaxplat/cost/money.py with the spec's defaults
# (jaxplat/model/hardware_spec.py): h100-sxm.yaml's street price, 4 years,
# $0.08/kWh, PUE 1.2; a Julian year of 365.25 days.
H100_PRICE_USD = 30000.0
LIFETIME_S = 4 * 365.25 * 86400.0
USD_PER_J = 0.08 / 3.6e6
PUE = 1.2


def _estimate(capsys, *flags):
    # The programs of test_serving_modes.py's `--rate 0` and `--concurrency` commands: read back from the
    # run's shared program cache (tests/conftest.py) when that module ran first.
    argv = ["estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--workload", "chatbot",
            "--beams", "1", "--json", *flags]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _by_hand(out):
    """USD per Mtok from the reported chips, power and throughput (money.py's basis)."""
    usd_per_s = out["chips"] * H100_PRICE_USD / LIFETIME_S + out["power_w"] * PUE * USD_PER_J
    return 1e6 * usd_per_s / out["throughput_tok_s"]


@pytest.mark.parametrize("flags", [("--rate", "0"), ("--concurrency", "16")])
def test_cost_per_token_at_the_reported_throughput(capsys, flags):
    out = _estimate(capsys, *flags)
    assert out["cost_per_mtok_usd"] == pytest.approx(_by_hand(out), rel=1e-5)
    # energy per token and power describe one operating point: P = E/token x tokens/s
    assert out["power_w"] == pytest.approx(out["energy_per_token_j"] * out["throughput_tok_s"], rel=1e-5)
    static = _estimate(capsys)  # the workload's own batch (1 sequence): a much dearer token
    assert static["cost_per_mtok_usd"] > 5 * out["cost_per_mtok_usd"]
