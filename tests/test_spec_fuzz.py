"""1,000 mutated specs, each made invalid on purpose, each refused in one line
(issue 39, "Done when"): a built-in spec of every kind (hardware, models,
workloads, software stacks, sweep and training studies) with one value it
reads set to a negative, a word, NaN, infinity, a list or a mapping, or one
unknown key added to one of its mappings. None may load, and each must raise
a `SpecError` whose message is one line naming the file; anything else (an
accepted spec, a ValueError from inside numpy or JAX) fails.

The mutations are drawn with a fixed seed from every possible one (about
5,800), so the same 1,000 run each time. On the code before the fixes that
came with this test, 104 of these 1,000 failed (of all 5,800: 497 loaded,
infinite bandwidths, sizes, prices and SLOs, a mapping as an expert count;
11 raised OverflowError or ValueError)."""

import random
import warnings

import pytest
from helpers import with_value

from jaxplat.model import default_calibration, hardware_from_dict, model_from_config, workload_from_dict
from jaxplat.model.software_spec import software_from_dict
from jaxplat.search.train_study import study_from_dict
from jaxplat.specs import SpecError, builtin_names, read_yaml, resolve

# Hugging Face configs carry keys no cost reads (token ids, init ranges): only
# the architecture keys below are mutated in them, and no unknown key is added.
ARCHITECTURE_KEYS = (
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "head_dim", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
    "num_local_experts", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    "n_shared_experts", "first_k_dense_replace", "num_experts", "shared_expert_intermediate_size",
    "sliding_window", "state_size", "expand", "conv_kernel", "attn_layer_period", "expert_layer_period")
BAD_NUMBERS = (-5.0, "fast", float("nan"), float("inf"), [], {})
LOADERS = {"hardware": lambda d, src: hardware_from_dict(d, src=src, defaults=default_calibration()),
           "models": model_from_config, "workloads": workload_from_dict, "software": software_from_dict,
           "studies": study_from_dict}
N = 1000


def _leaves(d, path=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _leaves(v, path + (i,))
    else:
        yield path, d


def _mappings(d, path=()):
    if isinstance(d, dict):
        yield path
    items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
    for k, v in items:
        yield from _mappings(v, path + (k,))


def _mutations(kind, d):
    """(path, value) pairs, each of which makes `d` invalid."""
    numeric = [p for p, v in _leaves(d) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if kind == "models":
        numeric = [p for p in numeric if len(p) == 1 and p[0] in ARCHITECTURE_KEYS and d[p[0]]]
    out = [(p, v) for p in numeric for v in BAD_NUMBERS]
    if kind != "models":
        out += [(p + ("frobnicate",), 1.0) for p in _mappings(d)]
    return out


def _pool():
    pool = []
    for kind, load in LOADERS.items():
        for name in builtin_names(kind):
            d = read_yaml(resolve(kind, name))
            try:
                load(d, src=f"{name}.yaml")
            except SpecError:
                continue  # a codesign study: not this loader's kind (its own loader is tested elsewhere)
            pool += [(kind, name, d, m) for m in _mutations(kind, d)]
    return pool


def test_a_thousand_mutated_specs_are_each_refused_in_one_line():
    pool = _pool()
    assert len(pool) > 3 * N and {k for k, *_ in pool} == set(LOADERS)
    failures = []
    for kind, name, d, (path, value) in random.Random(0).sample(pool, N):
        src = f"{name}.yaml"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a NaN reaching numpy is not a clear error
                LOADERS[kind](with_value(d, path, value), src=src)
            failures.append(f"accepted: {kind}/{name} {path} = {value!r}")
        except SpecError as e:
            if "\n" in str(e) or src not in str(e):
                failures.append(f"unclear: {kind}/{name} {path} = {value!r}: {e}")
        except Exception as e:  # noqa: BLE001 - the test's point: nothing but SpecError
            failures.append(f"{type(e).__name__}: {kind}/{name} {path} = {value!r}: {e}")
    assert not failures, f"{len(failures)} of {N}:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize("tail, value", [(("flops", "bf16"), float("inf")), (("bandwidth",), "inf")])
def test_infinite_datasheet_numbers_are_refused(tail, value):
    d = read_yaml(resolve("hardware", "h100-sxm"))
    path = next(p for p, _ in _leaves(d) if p[-len(tail):] == tail)  # wherever the spec's layout puts it
    with pytest.raises(SpecError, match="must be a finite number"):
        LOADERS["hardware"](with_value(d, path, value), src="h100-sxm.yaml")
