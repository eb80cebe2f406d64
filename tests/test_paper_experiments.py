"""Smoke test of the paper's case studies (experiments/paper): one cheap script
on its reduced grid, one number checked by hand."""

from pathlib import Path

import pytest
from helpers import import_script

PAPER = Path(__file__).resolve().parents[1] / "experiments" / "paper"


@pytest.fixture(scope="module")
def requirements_script():
    return import_script(PAPER, "requirements_use_cases")


def test_requirements_use_cases_quick(requirements_script, tmp_path):
    out = tmp_path / "req.png"
    req = requirements_script.main(["--quick", "--out", str(out)])
    assert out.stat().st_size > 10_000  # a figure was written
    # LLaMA-2-7B, QA (1000-token prompt, TTFT 0.2 s), genz profile: prefill FLOPs by hand.
    # Per layer linear weights: attention 4 d^2 = 4 * 4096^2 = 67,108,864; gated FFN
    # 3 * 4096 * 11008 = 135,266,304; sum 202,375,168. Prefill, T = 1000 tokens:
    #   GEMMs      2 * T * 202,375,168 * 32 layers         = 1.29520108e13
    #   attention  2 GEMMs * 2 * T^2 * d * 32 (GenZ: T^2)   = 5.24288e11
    #   embedding (one-hot GEMM) + LM head over all T tokens: 2 * 2 * T * 32000 * 4096 = 5.24288e11
    flops = 2 * 1000 * 202_375_168 * 32 + 2 * 2 * 1000**2 * 4096 * 32 + 2 * 2 * 1000 * 32000 * 4096
    assert req[("llama-2-7b", "qa")]["prefill_flops"] == pytest.approx(flops, rel=1e-4)
    assert req[("llama-2-7b", "qa")]["prefill_flops_s"] == pytest.approx(flops / 0.2, rel=1e-4)
