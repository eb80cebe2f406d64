"""Bad user input is a SpecError with one line, never an internal error
(issue 39, item 8): `jaxplat.cli.app` prints a traceback file for any other
exception, so a ValueError / TypeError / OverflowError raised on bad input
would report as a bug. Each case here raised one of those before."""


import pytest
from helpers import with_value

import jaxplat as jp
from jaxplat.cli import main
from jaxplat.cost.microarch import gemm_cycles
from jaxplat.model import default_calibration, hardware_from_dict, model_from_config, workload_from_dict
from jaxplat.search.study import study_from_dict
from jaxplat.specs import SpecError, read_yaml, resolve

BAD = ["abc", -1, [], {}, None, True, "1e400", 0]


def _one_line(e):
    assert "\n" not in str(e.value) and str(e.value)


def test_explicit_raises_are_spec_errors():
    with pytest.raises(SpecError, match="unknown profile 'gen'"):
        jp.Options(profile="gen")
    with pytest.raises(SpecError, match="dataflow must be one of"):
        gemm_cycles(64, 64, 64, 16, 16, dataflow="rs")
    from jaxplat.design.calibration import Predictor
    with pytest.raises(SpecError, match="cannot fit 'no_such'"):
        Predictor([], names=("no_such",))


def test_genz_profile_on_mla_is_one_line(capsys):
    rc = main(["estimate", "--model", "deepseek-v3", "--hardware", "h100-sxm", "--tp", "8", "--profile", "genz"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "profile has no MLA" in err[0], err


@pytest.mark.parametrize("kind, name, path, value, match", [
    ("workloads", "chatbot", ("slo",), -1, "slo must be a mapping"),
    ("models", "llama-3.1-8b", ("num_hidden_layers",), "1e400", "num_hidden_layers must be a finite number"),
    ("models", "deepseek-v3", ("first_k_dense_replace",), "1e400", "must be a finite number"),
    ("models", "jamba-1.5-mini", ("attn_layer_period",), "1e400", "must be a finite number"),
])
def test_found_by_mutation(kind, name, path, value, match):
    d = read_yaml(resolve(kind, name))
    d[path[0]] = value
    load = workload_from_dict if kind == "workloads" else model_from_config
    with pytest.raises(SpecError, match=match) as e:
        load(d, src=name)
    _one_line(e)


@pytest.mark.parametrize("path, value, match", [
    (("constraints", "max_chips"), "abc", "constraints.max_chips must be a number"),
    (("constraints", "max_chips"), [], "constraints.max_chips must be a number"),
    (("constraints", "max_memory_fraction"), "x", "max_memory_fraction must be a number"),
    (("objective", "maximize"), [], r"objective \[\] is not one of"),
    (("axes", "batch"), {"pow2": [1, "1e400"]}, r"pow2 must be a \[lo, hi\] pair of numbers"),
])
def test_study_mutations(path, value, match):
    d = read_yaml(resolve("studies", "catalog-parallelism"))
    d.setdefault(path[0], {})
    if path[0] == "objective":
        d["objective"] = {"maximize": value}
    else:
        d[path[0]][path[1]] = value
    with pytest.raises(SpecError, match=match) as e:
        study_from_dict(d, src="study")
    _one_line(e)


def _paths(d, pre=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield pre + (k,)
            yield from _paths(v, pre + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d[:2]):
            yield pre + (i,)
            yield from _paths(v, pre + (i,))


@pytest.mark.parametrize("kind, name", [("hardware", "h100-sxm"), ("hardware", "tpu-v5p"), ("workloads", "chatbot"),
                                        ("models", "deepseek-v3"), ("models", "jamba-1.5-mini")])
def test_every_mutated_key_loads_or_says_one_line(kind, name):
    """Each key (and the first two items of each list) of a built-in spec set
    to a string, a negative, an empty list or mapping, null, true, 1e400 or 0:
    the loader accepts it or raises a one-line SpecError, nothing else."""
    loaders = {"hardware": lambda d, src: hardware_from_dict(d, src=src, defaults=default_calibration()),
               "workloads": workload_from_dict, "models": model_from_config}
    d = read_yaml(resolve(kind, name))
    n = 0
    for path in _paths(d):
        for v in BAD:
            try:
                loaders[kind](with_value(d, path, v), src=name)
            except SpecError as e:
                assert "\n" not in str(e), (path, v, str(e))
            n += 1
    assert n > 50
