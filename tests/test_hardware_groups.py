"""`Hardware` in groups (issue 39 item 1): the grouped spec layout and the
flat one of earlier versions load to the same leaves, the flat names still
read and `replace` the numbers of their group, and a grouped spec's errors
name its own keys."""

import copy
import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.model import hardware_from_dict
from jaxplat.model.hardware import FLAT_NAMES, GROUPS, Hardware, hardware_paths
from jaxplat.model.hardware_layout import flat_layout, grouped_layout
from jaxplat.model.pytree import get
from jaxplat.specs import SpecError, read_yaml, resolve

FLAT = Path(__file__).parent / "data" / "hardware_flat"
# Chips whose flat twins cover every section: tensor cores and a host CPU, a
# systolic array with an offload target and an efficiency block, a dataflow
# chip's execution, AMD's software part.
TWINS = ("h100-sxm", "npu-case-study-iv", "cerebras-wse-3", "mi300x")


def _leaves(hw):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(hw)]


@pytest.mark.parametrize("name", TWINS)
def test_flat_twin_loads_to_the_same_hardware(name, capsys):
    grouped = jp.load_hardware(name)
    assert not capsys.readouterr().err  # the shipped (grouped) file: no note
    flat = jp.load_hardware(FLAT / f"{name}.yaml")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "flat hardware layout" in err and f"{name}.yaml" in err
    assert jax.tree_util.tree_structure(flat) == jax.tree_util.tree_structure(grouped)
    for a, b in zip(_leaves(flat), _leaves(grouped)):
        np.testing.assert_array_equal(a, b)
    jp.load_hardware(FLAT / f"{name}.yaml")
    assert not capsys.readouterr().err  # one note per file


@pytest.mark.parametrize("name", TWINS)
def test_layouts_convert_both_ways(name):
    # (the NPU's description names its keys, so it changed with them)
    flat = {k: v for k, v in read_yaml(FLAT / f"{name}.yaml").items() if k != "description"}
    grouped = {k: v for k, v in read_yaml(resolve("hardware", name)).items() if k != "description"}
    assert flat_layout(grouped, name) == flat
    assert grouped_layout(flat) == grouped


def _bumped(v):
    return v * 1.5 + 1.0  # changes every element, zeros included


def test_each_flat_name_reads_and_replaces_its_group_field():
    hw = jp.load_hardware("npu-case-study-iv")
    touched = set()
    for flat, (group, field) in FLAT_NAMES.items():
        sub = getattr(hw, group)
        assert getattr(hw, flat) is getattr(sub, field)
        if field in ("dataflow", "offload"):  # static: a new value is a new tree
            new = "os" if field == "dataflow" else ("softmax",)
        else:
            new = _bumped(np.asarray(getattr(sub, field)))
        by_flat = jp.replace(hw, **{flat: new})
        by_group = jp.replace(hw, **{group: jp.replace(sub, **{field: new})})
        by_path = jp.replace(hw, **{f"{group}.{field}": new})
        for other in (by_group, by_path):
            assert jax.tree_util.tree_structure(by_flat) == jax.tree_util.tree_structure(other), flat
            for a, b in zip(_leaves(by_flat), _leaves(other)):
                np.testing.assert_array_equal(a, b, err_msg=flat)
        changed = [p for p in hardware_paths()
                   if not np.array_equal(np.asarray(get(by_flat, p)), np.asarray(get(hw, p)))]
        assert changed == ([] if field in ("dataflow", "offload") else [f"{group}.{field}"]), flat
        touched.add((group, field))
    # Every traced field of every group has its flat name (the names of earlier versions, all kept).
    every = {(g, f.name) for g, cls in GROUPS.items() for f in dataclasses.fields(cls)}
    assert touched == every


def test_keep_working_replace_names_vary_the_numbers():
    """The issue's Keep-working list: replace(hw, flops=, mem_bw=, net_bw=,
    net_latency=, sram_size=, sram_bw=) change TPOT as the old flat fields did:
    doubling the HBM bandwidth of a batch-1 decode on one H100 cuts its TPOT
    (the part above the software stack's fixed time per step)."""
    hw, model, wl = jp.load_hardware("h100-sxm"), jp.load_model("llama-3.1-8b"), jp.load_workload("chatbot")
    base = float(jp.evaluate(model, hw, jp.Parallel(), wl).tpot)
    faster = jp.replace(hw, mem_bw=hw.mem_bw * 2.0, sram_bw=hw.sram_bw * 2.0, flops=hw.flops * 2.0,
                        net_bw=hw.net_bw * 2.0, net_latency=hw.net_latency / 2.0, sram_size=hw.sram_size * 2.0)
    assert float(faster.memory.bandwidth[0]) == 2.0 * float(hw.memory.bandwidth[0])
    step = float(hw.software.iteration_overhead)
    assert float(jp.evaluate(model, faster, jp.Parallel(), wl).tpot) - step < 0.6 * (base - step)


def test_unknown_names_are_refused():
    hw = jp.load_hardware("h100-sxm")
    for bad in ("mem_bandwidth", "memory.bw", "nope.size"):
        with pytest.raises(KeyError, match="no field"):
            jp.replace(hw, **{bad: 1.0})


def _grouped(name="npu-case-study-iv"):
    return copy.deepcopy(read_yaml(resolve("hardware", name)))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["chip"].update(clock_hz="fast"), "x.yaml: chip.clock_hz must be a number, got 'fast'"),
    (lambda d: d["host"].pop("bandwidth"), "x.yaml: missing key host.'bandwidth'"),
    (lambda d: d["host"].update(offload=["logits"]), "x.yaml: host.offload names unknown operator 'logits'"),
    (lambda d: d["power"].pop("tdp_w"), "x.yaml: missing key 'power.tdp_w'"),
    (lambda d: d["power"].update(static_w=1000), "x.yaml: power.static_w (1000 W) must be below power.tdp_w"),
    (lambda d: d["cost"].update(pue=0.5), "x.yaml: cost.pue is facility / IT energy"),
    (lambda d: d["chip"].update(execution="x"), "x.yaml: chip.execution must be kernels"),
    (lambda d: d["chip"].pop("array"), "x.yaml: chip.cores describes a systolic array; give chip.array too"),
    (lambda d: d["host"].update(ghz=3), "x.yaml: unknown key host.'ghz'"),
    (lambda d: d.update(tdp_w=3), "x.yaml: mixes the flat layout (tdp_w:) with sections (chip:)"),
])
def test_grouped_errors_name_grouped_keys(mutate, message):
    d = _grouped()
    mutate(d)
    with pytest.raises(SpecError) as e:
        hardware_from_dict(d, src="x.yaml")
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)


def test_groups_say_what_is_fitted():
    """The calibration's parameters are the `efficiency` and `software`
    groups' fields under their YAML names (one name, spec to code)."""
    from jaxplat.model import EFFICIENCY_PARAMS, SOFTWARE_KEYS
    for key, (path, *_rest) in {**EFFICIENCY_PARAMS, **SOFTWARE_KEYS}.items():
        group, field = path.split(".")
        assert field == key and group in ("efficiency", "software")
        assert field in {f.name for f in dataclasses.fields(GROUPS[group])}
    assert [f.name for f in dataclasses.fields(Hardware)] == list(GROUPS)


def test_efficiency_values_may_say_where_they_came_from():
    d = _grouped("h100-sxm")
    plain = hardware_from_dict({**d, "efficiency": {"compute": 0.61}}, src="x.yaml")
    sourced = hardware_from_dict({**d, "efficiency": {"compute": {"value": 0.61, "source": "a DeepGEMM run"}}},
                                 src="x.yaml")
    assert float(sourced.efficiency.compute) == float(plain.efficiency.compute) == pytest.approx(0.61)
    for bad in ({"value": 0.61}, {"value": 0.61, "source": " "}, {"value": 2.0, "source": "x"}):
        with pytest.raises(SpecError, match=r"^x.yaml: efficiency.compute ") as e:
            hardware_from_dict({**d, "efficiency": {"compute": bad}}, src="x.yaml")
        assert "\n" not in str(e.value)
