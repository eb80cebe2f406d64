"""`--cp` (context parallelism, Megatron's context_parallel_size) on
`estimate` and `requirements`, with `--sp`, its former name, kept as a
hidden alias; a study accepts `cp` and `sp` as axis names alike."""

import json

import pytest

from jaxplat.cli import main
from jaxplat.search import study_from_dict

ARGS = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--workload", "chatbot", "--json", "--no-cache"]


def _json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_cp_and_its_former_name_sp_give_identical_json(capsys):
    cp = _json(capsys, "estimate", *ARGS, "--cp", "2")
    sp = _json(capsys, "estimate", *ARGS, "--sp", "2")
    one = _json(capsys, "estimate", *ARGS)
    assert cp == sp
    assert cp["chips"] == 2.0 and one["chips"] == 1.0 and cp["ttft_s"] < one["ttft_s"]  # not vacuous: cp is used
    req = ["requirements", "--model", "llama-3.1-8b", "--workload", "chatbot", "--json"]
    assert _json(capsys, *req, "--cp", "2") == _json(capsys, *req, "--sp", "2")


def test_sp_is_hidden_and_named_in_its_errors(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = capsys.readouterr().out
    assert "--cp" in text and "--sp" not in text
    assert main(["estimate", *ARGS, "--sp", "0"]) == 2
    assert "--sp must be positive" in capsys.readouterr().err
    assert main(["estimate", *ARGS, "--cp", "2", "--sp", "4"]) == 2
    assert "--sp is the former name of --cp" in capsys.readouterr().err


def test_study_axis_cp_and_sp_alike():
    base = dict(name="s", models=["llama-3.1-8b"], workloads=["chatbot"], hardware="h100-sxm",
                objective={"maximize": "throughput"})
    cp, sp = study_from_dict({**base, "axes": {"cp": [1, 2]}}), study_from_dict({**base, "axes": {"sp": [1, 2]}})
    assert [a.values.tolist() for a in cp.axes] == [a.values.tolist() for a in sp.axes] == [[1.0, 2.0]]
    assert cp.axes[0].kind.setter is not None and sp.axes[0].kind.group == cp.axes[0].kind.group == "parallel"
