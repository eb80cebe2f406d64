"""A new user's first hour with the `jaxplat` command (issue 16): SLOs beside
their metrics, infeasible configurations that say why and exit non-zero,
flags the model clips, one-line errors naming the file and key, capacity
without the SRAM, wording and --version. The command runs in-process
(`jaxplat.cli.main`); JSON goes through a parser that refuses NaN."""

import json

import pytest

import jaxplat
from jaxplat.cli import main


def strict_json(text: str) -> dict:
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------- SLOs (item 3)

def test_json_says_which_slo_is_missed(capsys):
    # Llama-3.1-70B on 4 H100s: each chip streams 141e9 B / 4 = 35.3 GB of
    # bf16 weights per decode step, >= 35.3e9 / (3.35e12 B/s x 0.8) = 13.2 ms,
    # so the chatbot's 10 ms TPOT SLO cannot be met; TTFT's 0.2 s can with a
    # 1000-token prompt (2 x 70.6e9 x 1000 FLOP / (4 x 989e12 x 0.7) = 51 ms).
    rc, out, _ = run(capsys, "estimate", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--tp", "4",
                     "--prompt", "1000", "--json")
    d = strict_json(out)
    assert rc == 0 and d["feasible"] is True
    assert d["tpot_s"] > 13.2e-3 * 0.99
    assert d["slo"] == {"ttft_s": pytest.approx(0.2), "tpot_s": pytest.approx(0.01)}
    assert d["meets_slo"] is False and d["slo_missed"] == ["tpot"]
    assert d["infeasible_reasons"] == [] and d["warnings"] == []


def test_text_shows_slos_capacity_and_what_the_decode_table_is(capsys):
    rc, out, _ = run(capsys, "estimate", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--tp", "4",
                     "--prompt", "1000")
    assert rc == 0
    lines = out.splitlines()
    tpot_line = next(line for line in lines if line.startswith("TPOT"))
    ttft_line = next(line for line in lines if line.startswith("TTFT"))
    assert "MISSED (<= 10 ms)" in tpot_line and "met (<= 200 ms)" in ttft_line
    assert "meets the SLOs: no, TPOT" in out
    # capacity: the H100's 80 GiB of HBM (85.9e9 B), its 50 MB L2 apart (it printed the sum)
    cap = next(line for line in lines if line.startswith("memory per chip / capacity"))
    assert "/ 85.9 GB" in cap and "80 GiB" in cap and "/ 86 GB" not in cap  # 85.9 + 0.05 would print 86
    assert any(line.startswith("on-chip SRAM") and "50 MB" in line for line in lines)
    assert "Decode (mean step over the output" in out and "GenZ" not in out


def test_power_line_says_which_phase_the_tdp_holds(capsys):
    """A B200 (1,000 W) prefilling 3,000 tokens of Llama-3.1-8B would draw
    more than its TDP at its rated clock (2.25 PFLOP/s at 0.8 pJ per FLOP):
    the power line says how far it holds the prefill, as the JSON's clock
    share does; the decode, memory-bound, runs at its rated clock."""
    flags = ("--model", "llama-3.1-8b", "--workload", "chatbot", "--beams", "1")
    rc, out, _ = run(capsys, "estimate", "--hardware", "b200", *flags)
    assert rc == 0
    line = next(x for x in out.splitlines() if x.startswith("average power"))
    assert "TDP holds prefill at" in line and "decode" not in line
    limited = json.loads(run(capsys, "estimate", "--hardware", "b200", *flags, "--json")[1])
    assert 0.8 < limited["prefill_clock_share"] < 0.99 and limited["decode_clock_share"] == 1.0
    assert f"at {100 * limited['prefill_clock_share']:.0f}%" in line
    h100 = run(capsys, "estimate", "--hardware", "h100-sxm", *flags)[1]
    assert "TDP holds" not in h100


def test_infeasible_exits_nonzero_with_the_reason(capsys):
    # Llama-3.1-8B has 32 attention heads: tp 3 does not divide them.
    rc, out, err = run(capsys, "estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "3",
                       "--json")
    d = strict_json(out)
    assert rc == 3 and d["feasible"] is False and d["divisible"] is False
    assert any("tp=3 does not divide the 32 attention heads" in r for r in d["infeasible_reasons"])
    assert "infeasible: tp=3 does not divide" in err and len(err.strip().splitlines()) == 1
    rc, out, err = run(capsys, "estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "3")
    assert rc == 3 and out == "" and "--allow-infeasible" in err
    rc, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "3",
                     "--json", "--allow-infeasible")
    assert rc == 0 and strict_json(out)["feasible"] is False


# ------------------------------------------------- clipped flags (item 4)

def test_microbatches_clipped_by_batch_warn_and_work_with_a_batch(capsys):
    base = ("estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--pp", "2", "--microbatches", "4",
            "--json")
    rc, out, err = run(capsys, *base)
    d = strict_json(out)
    assert rc == 0 and "--microbatches 4 clipped to 1" in err
    assert d["pipeline_bubble_fraction"] == pytest.approx(1 / 2)  # (pp - 1) / (nmb + pp - 1), nmb = 1
    rc, out, err = run(capsys, *base, "--batch", "8")
    d = strict_json(out)
    assert rc == 0 and "warning" not in err and d["warnings"] == []
    assert d["pipeline_bubble_fraction"] == pytest.approx(1 / 5)  # 4 micro-batches, 2 stages


# ----------------------------------------------------- wording (item 9)

def test_capacity_is_the_memory_that_holds_weights(capsys):
    # H100: 80 GiB of HBM (its 50 MB L2 is a cache, reported apart);
    # Groq LPU: no HBM, its 230 MB SRAM holds everything.
    rc, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--json")
    d = strict_json(out)
    assert d["capacity_bytes"] == pytest.approx(80 * 2**30, rel=1e-3) and d["sram_bytes"] == pytest.approx(50e6)
    rc, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--hardware", "groq-lpu", "--tp", "8",
                     "--json", "--allow-infeasible")
    assert strict_json(out)["capacity_bytes"] == pytest.approx(230e6, rel=1e-6)


def test_dtype_takes_weights_activations_kv(capsys):
    # Blackwell deployments run NVFP4 GEMMs beside an FP8 KV cache: Llama-3.1-8B
    # (8,029,995,008 weights) at 0.5625 B each (4 bits and an 8-bit scale per 16) but for the
    # embedding and the LM head (2 x 128,256 x 4,096), which stay at 2 B; 32
    # layers x 2 x 8 KV heads x 128 x 1 B = 65,536 B of KV per token, 1000 + 2 beams
    # (chatbot's) x 24 = 1048 tokens.
    base = ("estimate", "--model", "llama-3.1-8b", "--hardware", "b200", "--prompt", "1000", "--output", "24",
            "--json")
    head = 2 * 128_256 * 4_096
    rc, out, _ = run(capsys, *base, "--dtype", "fp4/fp4/fp8")
    d = strict_json(out)
    assert rc == 0 and d["weights_bytes"] == pytest.approx((8_029_995_008 - head) * 0.5625 + head * 2, rel=1e-6)
    assert d["kv_bytes"] == pytest.approx(65_536 * 1048, rel=1e-6)
    _, out, _ = run(capsys, *base, "--dtype", "fp4")
    assert strict_json(out)["kv_bytes"] == pytest.approx(65_536 * 1048 / 2, rel=1e-6)
    rc, out, err = run(capsys, *base, "--dtype", "fp4/fp9/fp8")
    assert rc == 2 and out == "" and err.strip().count("\n") == 0 and "'fp4/fp9/fp8' is not a dtype" in err


def test_decode_title_says_what_each_profile_does():
    from jaxplat.cli.estimate import decode_title

    assert decode_title(jaxplat.Options()).startswith("Decode (mean step over the output")
    assert decode_title(jaxplat.Options(profile="genz")) == (
        "Decode (GenZ's decode step: the KV cache at prompt + output tokens)")


def test_serving_table_has_labels_with_units():
    from jaxplat.cli.serving_args import serving_table

    text = serving_table({"max_batch": 362.0, "ttft_p99_s": 0.0276, "goodput_req_s": 16.19, "stable": True})
    assert "ttft_p99_s" not in text and "goodput_req_s" not in text and "max_batch" not in text
    assert "TTFT p99" in text and "27.6 ms" in text and "16.19 requests/s" in text
    assert "highest rate with 90% of requests within both SLOs" in text


def test_goodput_note_names_the_slo_missed_unloaded():
    # Llama-3.1-8B on one H100 streams 16 GB of weights per decode step:
    # >= 16.1e9 / (3.35e12 x 0.8) = 6.0 ms, so a 1 ms TPOT SLO fails even
    # unloaded, while a 10 s TTFT SLO holds.
    from jaxplat import serving
    from jaxplat.cli.serving_args import goodput_note
    from jaxplat.model import replace

    m, hw = jaxplat.load_model("llama-3.1-8b"), jaxplat.load_hardware("h100-sxm")
    wl = replace(jaxplat.load_workload("qa"), beams=1.0, ttft_slo=10.0, tpot_slo=1e-3)
    note = goodput_note(m, hw, jaxplat.Parallel(), wl, serving.serving(rate=1.0), jaxplat.Options(), 64.0)
    assert note.startswith("no request meets the SLOs even unloaded") and "p90 TPOT" in note
    assert "> SLO 1 ms" in note and "TTFT" not in note


def test_goodput_note_checks_the_serving_flags_as_given():
    # The note's unloaded case is goodput's own lowest-rate check: the serving flags as given
    # (budget, KV blocks, chunk), only the rate at 1e-4 requests/s.
    import dataclasses

    from jaxplat import serving
    from jaxplat.cli.serving_args import _unloaded

    srv = serving.serving(rate=3.0, max_num_tokens=512.0, kv_block=32.0, chunk=256.0, max_batch=8.0)
    low = _unloaded(srv)
    assert float(low.rate) == pytest.approx(1e-4)
    for f in dataclasses.fields(srv):
        if f.name != "rate":
            assert float(getattr(low, f.name)) == float(getattr(srv, f.name)), f.name


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"jaxplat {jaxplat.__version__}"


# ------------------------------------------------ one-line errors (item 6)

CODESIGN = """name: t
model: llama-3.1-8b
workload: chatbot
params: {flops: [1.0e+14, 1.0e+15]}
candidates: {tp: [1, 2]}
optimizer: {starts: STARTS, steps: 5}
"""


@pytest.mark.parametrize("case, words", [
    ("missing", ["nope.yaml", "file not found"]),
    ("directory", ["is a directory"]),
    ("binary", ["bin.yaml", "not a text file"]),
    ("starts", ["optimizer.starts", "whole number", "'eight'"]),
    ("sweep", ["sweep study", "jaxplat sweep"]),
])
def test_codesign_errors_are_one_line_naming_file_and_key(case, words, tmp_path, capsys):
    path = {"missing": tmp_path / "nope.yaml", "directory": tmp_path, "binary": tmp_path / "bin.yaml",
            "starts": tmp_path / "s.yaml", "sweep": tmp_path / "w.yaml"}[case]
    if case == "binary":
        path.write_bytes(b"\xd3\x00\xff\xfe binary")
    elif case == "starts":
        path.write_text(CODESIGN.replace("STARTS", '"eight"'))
    elif case == "sweep":
        path.write_text("models: [llama-3.1-8b]\nworkloads: [chatbot]\nhardware: h100-sxm\naxes: {tp: [1]}\n")
    rc, out, err = run(capsys, "codesign", str(path), "--out", str(tmp_path / "o"))
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("jaxplat: error: ")
    assert "Traceback" not in err
    for w in words:
        assert w in err


def test_spec_given_as_a_directory_or_binary_names_it(tmp_path, capsys):
    rc, _, err = run(capsys, "estimate", "--model", str(tmp_path), "--hardware", "h100-sxm")
    assert rc == 2 and "is a directory" in err and "not found" not in err
    (tmp_path / "m.json").write_bytes(b"\x89PNG\r\n\x1a\n\xd3")
    rc, _, err = run(capsys, "estimate", "--model", str(tmp_path / "m.json"), "--hardware", "h100-sxm")
    assert rc == 2 and "m.json: not a text file" in err and len(err.strip().splitlines()) == 1
    rc, _, err = run(capsys, "sweep", str(tmp_path), "--out", str(tmp_path / "o"), "--no-cache")
    assert rc == 2 and "is a directory" in err
