"""The Megatron GPT model specs of the Calculon comparison
(experiments/training/calculon_compare.py): their weights, worked by hand
from the papers' shapes, and the papers' own parameter counts."""

import pytest

import jaxplat as jp
from jaxplat.model import param_count


@pytest.mark.parametrize("name, layers, hidden, published", [
    ("megatron-gpt-22b", 48, 6144, 22e9),       # Korthikanti et al. 2022 (arXiv 2205.05198) Table 3: "22B"
    ("mt-nlg-530b", 105, 20480, 530e9),         # Smith et al. 2022 (arXiv 2201.11990): 530B
    ("megatron-gpt-1t", 128, 25600, 1008.0e9),  # Narayanan et al. SC'21 Table 1: 1008.0 B
])
def test_megatron_spec_weights(name, layers, hidden, published):
    """A GPT layer holds 4h² attention and 8h² MLP weights (4h FFN); the
    51,200-token embedding is tied: 12·l·h² + V·h, within 0.3% of the count
    each paper states (which adds biases, norms and positions)."""
    by_hand = 12 * layers * hidden**2 + 51200 * hidden
    got = float(param_count(jp.load_model(name)))
    assert got == pytest.approx(by_hand, rel=1e-6)
    assert got == pytest.approx(published, rel=3e-3)
