"""The manual: README's two commands, the MkDocs site (built with --strict,
its reference sections generated from the code) and the examples its pages
mark as tests.

- Every fenced ```python block in docs/**/*.md runs (short, fast examples).
- Every ```bash block right after a `<!-- doctest -->` line runs its
  `jaxplat ...` lines through `jaxplat.cli.main(argv)`, each to exit 0.
- The README's first fenced block is the setup + main-job one-liner and its
  second the test command, which CI (.ci/run) and a newcomer run.
"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import import_script

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SETUP_LINE = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && "
              "jaxplat estimate --model llama-3.1-70b --hardware h100-sxm --workload chatbot --tp 8")
TEST_LINE = ".venv/bin/python -m pytest -q tests"
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


def fenced(text: str):
    """[(language, body, offset)] of the fenced blocks of a markdown text."""
    return [(m.group(1), m.group(2), m.start()) for m in _FENCE.finditer(text)]


def _blocks(lang: str, marked: bool = False):
    out = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text()
        for kind, body, at in fenced(text):
            before = text[:at].rstrip("\n").rsplit("\n", 1)[-1].strip()
            if kind == lang and (not marked or before == "<!-- doctest -->"):
                out.append(pytest.param(body, id=f"{path.relative_to(DOCS)}:{text.count(chr(10), 0, at) + 1}"))
    return out


def test_readme_two_commands():
    blocks = fenced((ROOT / "README.md").read_text())
    assert [b[1].strip() for b in blocks[:2]] == [SETUP_LINE, TEST_LINE]
    assert blocks[0][0] == blocks[1][0] == "bash"


def test_readme_main_job_prints_what_the_readme_says(capsys):
    """The README's main job (its first command's `jaxplat estimate ...`) gives the TPOT the README states
    under it, to the 0.1 ms it prints, and misses the chatbot's SLO as it says: a change of the default
    stack or calibration that moves the headline number fails here until the README says the new one."""
    import json

    from jaxplat.cli import main

    text = (ROOT / "README.md").read_text()
    stated = re.search(r"The main job prints TPOT ([0-9.]+) ms, MISSED", text)
    assert stated, "the README states the main job's TPOT"
    argv = shlex.split(SETUP_LINE.split(" && ")[-1])[1:]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert round(1e3 * out["tpot_s"], 1) == float(stated.group(1))
    assert not out["meets_slo"]


def test_readme_links_exist():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs|experiments)/[^)#]+)", text)
    assert links, "the README links into the docs"
    assert [p for p in links if not (ROOT / p).is_file()] == []


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]'; the test extra has it)")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[docs]')")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                         env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for flag in ("--engine", "--global-batch", "--moe-ep", "--max-num-tokens", "--calibration"):
        assert flag in cli, f"generated CLI reference lacks {flag}"
    specs = (tmp_path / "site" / "reference" / "specs" / "index.html").read_text()
    assert "host_overlap" in specs and "fully_connected" in specs and "switch_reduction" in specs


def test_reference_covers_schema():
    """Every key the spec loaders accept and every flag of every command is in
    the generated reference (the generator raises on an undocumented key)."""
    gen_reference = import_script(DOCS, "gen_reference")

    from jaxplat.cli.app import COMMANDS, build_parser
    from jaxplat.model import hardware_spec, software_spec
    from jaxplat.model.efficiency_spec import PARAMS
    from jaxplat.model.hardware import TOPOLOGIES
    from jaxplat.search import study

    specs = gen_reference.render("specs")
    keys = [*PARAMS, *software_spec.SOFTWARE_KEYS, *hardware_spec._HW_KEYS, *hardware_spec._MEM_KEYS,
            *hardware_spec._NET_KEYS, *TOPOLOGIES, *study._STUDY_KEYS, *study.AXIS_KINDS, *study.METRICS]
    assert [k for k in keys if f"`{k}`" not in specs] == []
    cli = gen_reference.render("cli")
    sub = build_parser()._subparsers._group_actions[0]
    flags = [o for name in COMMANDS if name in sub.choices for a in sub.choices[name]._actions
             for o in a.option_strings if o not in ("-h", "--help") and a.help != "==SUPPRESS=="]
    assert [f for f in flags if f"`{f}`" not in cli] == []
    calibration = gen_reference.render("calibration")
    assert "leave one chip out" in calibration and "`compute`" in calibration


@pytest.mark.parametrize("code", _blocks("python"))
def test_python_examples(code):
    exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})


def test_some_examples_are_marked():
    assert len(_blocks("python")) >= 2 and len(_blocks("bash", marked=True)) >= 3


@pytest.mark.parametrize("block", _blocks("bash", marked=True))
def test_quick_cli_examples(block, capsys):
    from jaxplat.cli import main

    lines = [shlex.split(ln, comments=True) for ln in block.splitlines() if ln.strip().startswith("jaxplat ")]
    assert lines, "a marked block runs jaxplat commands"
    for argv in lines:
        assert main(argv[1:]) == 0, f"{shlex.join(argv)}: {capsys.readouterr().err[-2000:]}"


def _documented_commands():
    """Every `jaxplat ...` line of the README's and the docs' bash blocks
    (continuation lines joined), and the README's inline `jaxplat ...` commands
    (its tour)."""
    readme = (ROOT / "README.md").read_text()
    out = [pytest.param(c, id=f"README.md:{c[8:60]}") for c in re.findall(r"`(jaxplat [^`]+)`", readme)
           if len(c.split()) > 2]  # a command with arguments, not the name of one
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for kind, body, _ in fenced(path.read_text()):
            if kind != "bash":
                continue
            for line in body.replace("\\\n", " ").splitlines():
                line = line.strip()
                cmd = line[line.index("jaxplat "):] if "jaxplat " in line else ""
                if cmd.startswith("jaxplat "):
                    out.append(pytest.param(cmd, id=f"{path.name}:{cmd[8:60]}"))
    return out


def test_documented_commands_parse():
    """Every documented command line is accepted by today's parser (a renamed
    or removed flag fails here, without running the command)."""
    from jaxplat.cli.app import build_parser

    commands = _documented_commands()
    assert len(commands) >= 30
    bad = []
    for param in commands:
        argv = shlex.split(param.values[0], comments=True)[1:]
        try:
            build_parser(argv[0]).parse_args(argv)
        except SystemExit:
            bad.append(param.values[0])
    assert bad == []


def _shipped_tables():
    """{table lead: [(names, value cell)]} of docs/calibration.md's "Every shipped number" tables."""
    text = (DOCS / "calibration.md").read_text()
    section = text.split("## Every shipped number", 1)[1].split("\n## ", 1)[0]
    table = r"\*\*(The calibration|The default software stack)\*\*(?:(?!\n\n).)*\n\n((?:\|[^\n]*\n)+)"
    tables = {}
    for lead, body in re.findall(table, section, re.S):
        rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in body.splitlines()[2:]]
        tables[lead] = [(re.findall(r"`(\w+)`", r[0]), r[1]) for r in rows if "`" in r[0] and r[0] != "`engines:`"]
    return tables


def _printed(cell: str) -> list[tuple[str, float]]:
    """[(number as printed, its unit in seconds or 1)] of a cell such as "16.8 µs, 57 µs" or "0.8 ms per ..."."""
    unit = {"µs": 1e-6, "ms": 1e-3, "": 1.0}
    return [(num, unit[u]) for num, u in re.findall(r"(\d+(?:\.\d+)?)\s*(µs|ms|)(?![\w.])", cell)]


def _rounds_to(value: float, printed: str, unit: float) -> bool:
    """`value` (SI) in `unit`, shown with as many significant digits as `printed` has, is `printed`."""
    digits = max(len(printed.replace(".", "").lstrip("0")), 1)
    return float(f"{value / unit:.{digits}g}") == float(printed)


def test_every_shipped_number_matches_the_shipped_files():
    """The manual's table of every shipped number states the values the shipped calibration and the default
    software stack hold, to the digits it prints: a refit or a new stack value fails here until the
    table says it."""
    import yaml

    calibration = yaml.safe_load((ROOT / "specs/calibration/default.yaml").read_text())["parameters"]
    stack = {k: v["value"] for k, v in yaml.safe_load((ROOT / "specs/software/graph-captured.yaml").read_text())
             .items() if isinstance(v, dict) and "value" in v}
    tables = _shipped_tables()
    assert set(tables) == {"The calibration", "The default software stack"}
    checked = []
    for lead, shipped in (("The calibration", calibration), ("The default software stack", stack)):
        for names, cell in tables[lead]:
            values = _printed(cell)[:len(names)]
            assert len(values) == len(names), f"{lead}: {names} -> {cell!r}"
            for name, (printed, unit) in zip(names, values):
                assert _rounds_to(shipped[name], printed, unit), f"{lead}: `{name}` is {shipped[name]}, docs: {cell!r}"
                checked.append(name)
    # every fitted or pinned parameter of the calibration, and every number of the stack, has a row
    assert set(calibration) <= set(checked)
    assert {"iteration_overhead", "rank_overhead", "kernel_latency", "collective_latency", "sequence_overhead",
            "moe_speed"} <= {n for names, _ in tables["The default software stack"] for n in names}
