"""`jaxplat report`: the HTML page of a sweep's and a co-design's output
folder is written, loads nothing from the network, and holds the numbers of
the folder's summary.json and tables; a folder that is not one gives a
one-line error and exit code 2."""

import json
import math
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from jaxplat.cli import main
from jaxplat.report import html_common as html_report

TINY_STUDY = """\
name: tiny-report
models: [llama-3.1-8b]
workloads: [chatbot, qa]
hardware: h100-sxm
axes:
  tp: [1, 2]
  batch: [1, 4]
  flops: {log: [2.0e+14, 1.0e+15], count: 3}
  hbm_bandwidth: [2.0e+12, 4.0e+12]
constraints: {max_chips: 2, ttft: workload, tpot: workload}
objective: {minimize: cost_per_mtok_usd}
pareto: [tpot, throughput_per_chip]
group_by: workload
top_k: 5
engine: {block: 64, blocks_per_step: 1}
"""


class _Page(HTMLParser):
    """Tables (by id: rows of cell texts and each row's data-key) and every
    URL the page would load."""

    def __init__(self):
        super().__init__()
        self.tables, self.keys, self.urls, self.scripts = {}, {}, [], []
        self._table = self._row = self._cell = None
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in ("src", "href", "data", "poster", "action", "srcset", "background"):
            if a.get(name):
                self.urls.append((tag, name, a[name]))
        if tag == "table":
            self._table = a.get("id")
            self.tables[self._table], self.keys[self._table] = [], []
        elif tag == "tr" and self._table is not None:
            self._row = []
            self.keys[self._table].append(a.get("data-key"))
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""
        elif tag == "br" and self._cell is not None:
            self._cell += " "
        elif tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_script:
            self.scripts[-1] += data


def _parse(path) -> _Page:
    p = _Page()
    p.feed(Path(path).read_text(encoding="utf-8"))
    return p


def _num(cell: str) -> float:
    return float(cell.replace(",", "").lstrip("≤≥ "))


def _assert_self_contained(page: _Page, text: str):
    remote = [u for u in page.urls if u[2].strip().lower().startswith(("http:", "https:", "//", "ftp:"))]
    assert not remote, f"the page loads from the network: {remote}"
    assert "@import" not in text and "url(http" not in text
    assert max(len(s) for s in page.scripts) > 1_000_000, "plotly.js is not embedded"


def _row_map(page: _Page, table_id: str) -> dict:
    rows = page.tables[table_id][1:]  # the header row first
    return dict(zip(page.keys[table_id][1:], rows))


# ----------------------------------------------------------------- sweep

@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """The output folder of a 48-configuration sweep, run through the
    command line in this process (no compilation cache: nothing from an
    earlier run)."""
    d = tmp_path_factory.mktemp("report")
    study = d / "tiny.yaml"
    study.write_text(TINY_STUDY)
    out = d / "out"
    assert main(["sweep", str(study), "--out", str(out), "--no-progress", "--fast-compile", "--devices", "1",
                 "--no-cache"]) == 0
    return out


def test_sweep_report_is_written_self_contained_and_holds_the_summary(sweep_dir, capsys):
    assert main(["report", str(sweep_dir)]) == 0
    path = sweep_dir / "report.html"
    assert capsys.readouterr().out.strip() == str(path)
    text = path.read_text(encoding="utf-8")
    page = _parse(path)
    _assert_self_contained(page, text)

    summary = json.loads((sweep_dir / "summary.json").read_text())
    rows = _row_map(page, "summary")
    for key in ("configurations", "evaluated", "feasible", "ok", "pareto_points"):
        assert _num(rows[key][1]) == summary[key], key
    for key in ("over_chips", "wrong_chips", "over_ttft", "over_tpot", "over_memory"):  # zero ones left out
        assert _num(rows[key][1]) == summary[key] if summary[key] else key not in rows, key
    assert summary["configurations"] == 48

    top = pd.read_csv(sweep_dir / "top_k.csv")
    table = page.tables["top_k"]
    head = table[0]
    assert len(table) - 1 == len(top)
    col = head.index("cost [USD/Mtok]")
    for cells, v in zip(table[1:], top["cost_per_mtok_usd"]):
        assert math.isclose(_num(cells[col]), v, rel_tol=1e-3)
    tpot = head.index("TPOT [ms]")
    for cells, v in zip(table[1:], top["tpot_s"]):
        assert math.isclose(_num(cells[tpot]), v * 1e3, rel_tol=1e-3)
    assert not any("_" in h for h in head)  # readable names, not the CSV's keys
    assert len(page.tables["pareto"]) - 1 == summary["pareto_points"]
    assert set(page.keys["requirements"][1:]) == {"chatbot", "qa"}


def test_report_output_flag(sweep_dir, tmp_path, capsys):
    target = tmp_path / "sub" / "page.html"
    assert main(["report", str(sweep_dir), "--output", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target) and target.stat().st_size > 1_000_000


# ----------------------------------------------------------------- co-design

def _codesign_dir(tmp_path) -> Path:
    """A co-design output folder as `jaxplat codesign` writes it, from made-up
    numbers (running the optimizer and its grid takes a minute)."""
    from jaxplat.cli.codesign import write_outputs

    steps, starts = 6, 3
    rng = np.random.default_rng(0)
    x = np.exp(rng.normal(size=(steps, starts, 4))) * np.array([5e14, 3e7, 4.0, 4e11])
    traj = dict(loss=np.exp(-np.arange(steps))[:, None] + rng.random((steps, starts)), x=x,
                tau=np.geomspace(0.3, 0.002, steps), hinge=np.geomspace(20, 3000, steps),
                sharpness=np.geomspace(8, 300, steps), penalty=np.geomspace(1, 10, steps))
    labels = ["flops[bf16]", "mem_bw[0]", "net_latency[0]"]
    metrics = ["ttft", "tpot", "throughput", "energy_per_token_j", "cost_per_mtok_usd"]
    grad = rng.normal(size=(3, 5))
    grad[0, 1] = np.nan  # as today's NaN sensitivities
    result = {"kind": "codesign", "name": "tiny-chip", "model": "llama-3.1-70b", "workload": "chatbot",
              "technology": "n5", "objective_name": "cost_per_mtok", "objective": 2.1667, "grid_objective": 2.1608,
              "gap": 0.00277, "evaluations": 39552, "grid_evaluations": 6291456, "starts": starts, "steps": steps,
              "chip": {"flops_bf16": 9.362e14, "sram_bytes": 9.158e6, "hbm_stacks": 8.0, "link_bytes_s": 1e12,
                       "area_mm2": 791.8, "tdp_w": 802.5, "price_usd": 12765.0, "hbm_bytes": 2.88e11,
                       "hbm_bytes_s": 9.6e12},
              "bounds": {"flops": [1e14, 1e15], "sram": [8e6, 2.56e8], "hbm_stacks": [1, 8], "link_bw": [5e10, 1e12]},
              "slo": {"ttft_s": 0.2, "tpot_s": 0.01},
              "parallel": {"tp": 4.0, "pp": 1.0, "ep": 1.0, "dp": 1.0, "batch": 1.0},
              "metrics": {"ttft": 0.1869, "tpot": 0.004767, "throughput": 202.1, "energy_per_token_j": 6.184,
                          "power_w": 1250.0, "cost_per_mtok_usd": 2.167, "memory_bytes": 3.583e10, "chips": 4.0},
              "sensitivities": {lab: {m: float(grad[i, j]) for j, m in enumerate(metrics)}
                                for i, lab in enumerate(labels)}}
    write_outputs(tmp_path, result, traj, 1, labels, metrics, grad, grad + 0.001)
    return tmp_path


def test_codesign_report_holds_the_chip_and_strict_json(tmp_path, capsys):
    out = _codesign_dir(tmp_path)
    summary = json.loads((out / "summary.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"summary.json holds {c}"))
    assert summary["sensitivities"]["flops[bf16]"]["tpot"] is None
    assert main(["report", str(out)]) == 0
    capsys.readouterr()
    path = out / "report.html"
    page = _parse(path)
    _assert_self_contained(page, path.read_text(encoding="utf-8"))
    s = _row_map(page, "summary")
    assert _num(s["objective"][1]) == pytest.approx(summary["objective"], rel=1e-3)
    assert _num(s["grid_evaluations"][1]) == summary["grid_evaluations"]
    chip = _row_map(page, "chip")
    assert chip["flops_bf16"][0] == "dense BF16 compute [TFLOP/s]"
    assert _num(chip["flops_bf16"][1]) == pytest.approx(936.2)
    assert _num(chip["sram_bytes"][1]) == pytest.approx(9.158)
    metrics = _row_map(page, "metrics")
    assert _num(metrics["tpot"][1]) == pytest.approx(4.767) and metrics["tpot"][3] == "yes"
    sens = _row_map(page, "sensitivities")
    assert sens["flops[bf16]"][0] == "peak compute (bf16)" and sens["mem_bw[0]"][0] == "HBM bandwidth"
    assert sens["flops[bf16]"][2].startswith("n/a")


# ----------------------------------------------------------------- errors

def _bad_folders(tmp_path, sweep_dir):
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "binary").mkdir()
    (tmp_path / "binary" / "summary.json").write_bytes(b"\xd3\x00\xff")
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "summary.json").write_text("[1, 2]")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "summary.json").write_text('{"hello": 1}')
    (tmp_path / "no-tables").mkdir()
    (tmp_path / "no-tables" / "summary.json").write_text((sweep_dir / "summary.json").read_text())
    (tmp_path / "bad-table").mkdir()
    for f in ("summary.json", "pareto.csv", "axes.csv"):
        (tmp_path / "bad-table" / f).write_text((sweep_dir / f).read_text())
    (tmp_path / "bad-table" / "top_k.csv").write_bytes(b"")
    (tmp_path / "bad-columns").mkdir()
    for f in ("summary.json", "top_k.csv", "axes.csv"):
        (tmp_path / "bad-columns" / f).write_text((sweep_dir / f).read_text())
    (tmp_path / "bad-columns" / "pareto.csv").write_text("a,b\n1,2\n")
    return {"missing": (tmp_path / "nope", "not found"), "file": (tmp_path / "a-file", "not a folder"),
            "empty": (tmp_path / "empty", "no summary.json"), "binary": (tmp_path / "binary", "summary.json"),
            "list": (tmp_path / "list", "JSON object"), "other": (tmp_path / "other", "neither"),
            "no-tables": (tmp_path / "no-tables", "top_k.csv"), "bad-table": (tmp_path / "bad-table", "top_k.csv"),
            "bad-columns": (tmp_path / "bad-columns", "pareto.csv: no column for cost_per_mtok_usd, tpot")}


def test_bad_folders_give_one_line_and_exit_2(tmp_path, sweep_dir, capsys):
    for name, (folder, words) in _bad_folders(tmp_path, sweep_dir).items():
        assert main(["report", str(folder)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("jaxplat: error: ") and err.count("\n") == 1, (name, err)
        assert words in err, (name, err)
        assert not (folder / "report.html").exists()


# ----------------------------------------------------------------- names, plots

def test_every_axis_and_metric_has_a_readable_name_and_unit():
    from jaxplat.cli.sweep import metric_columns
    from jaxplat.search.study import AXIS_KINDS, METRICS

    for col in list(AXIS_KINDS) + metric_columns(METRICS):
        assert col in html_report.COLUMNS, col
        name, unit, scale = html_report.COLUMNS[col]
        assert "_" not in name and scale > 0
    assert html_report.header("tpot_s") == "TPOT [ms]"
    assert html_report.fmt(999.99) == "1,000" and html_report.fmt(0.15537) == "0.1554"
    assert html_report.fmt(float("nan")) == "n/a"


def test_pareto_png_in_ms_with_a_legend_per_group(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure

    from jaxplat.report import plots

    front = pd.DataFrame(dict(tpot_s=[7.5e-4, 7.75e-4, 8.3e-4, 9.4e-4], cost_per_mtok_usd=[1.7, 0.9, 0.5, 0.3],
                              workload=["qa", "chatbot", "qa", "chatbot"]))
    top = front.iloc[[3, 2]].copy()
    seen = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def spy(fig, *a, **k):
        ax = fig.axes[0]
        fig.canvas.draw()
        seen["xlabel"] = ax.get_xlabel()
        seen["xticks"] = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        seen["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
        return real_savefig(fig, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    plots.pareto_plot(front, top, "tpot_s", "cost_per_mtok_usd", "s", "USD/Mtok", tmp_path / "p.png",
                      group="workload", groups=["chatbot", "qa"])
    assert (tmp_path / "p.png").stat().st_size > 0
    assert seen["xlabel"] == "TPOT [ms]"
    assert 2 <= len(seen["xticks"]) <= 8 and all(len(t) <= 5 for t in seen["xticks"]), seen["xticks"]
    assert {"chatbot", "qa"} <= set(seen["legend"])


def test_pareto_png_shows_each_point_where_its_axes_put_it(tmp_path, monkeypatch):
    """The PNG holds a marker at every point of the front (tab:blue, filled)
    and of the top-k (tab:gray at alpha 0.6 on white: 1 - 0.6 (1 - 0.498) =
    0.699 per channel), read back from the file at the pixel where the axes
    put the point's (TPOT in ms, USD/Mtok). A plot of the axes alone, without
    its points, has hundreds of colours too (axes, text, grid)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure
    import matplotlib.image

    from jaxplat.report import plots

    front = pd.DataFrame({"tpot_s": [8e-3, 1.05e-2, 1.3e-2, 1.55e-2], "cost_per_mtok_usd": [1.62, 1.13, 0.83, 0.61]})
    top = pd.DataFrame({"tpot_s": [1.17e-2, 1.45e-2], "cost_per_mtok_usd": [1.47, 1.27]})
    where = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def spy(fig, *a, **k):
        fig.canvas.draw()
        ax, height = fig.axes[0], fig.bbox.height
        for name, df in (("front", front), ("top", top)):
            xy = ax.transData.transform(np.c_[df["tpot_s"] * 1e3, df["cost_per_mtok_usd"]])
            where[name] = [(height - y, x) for x, y in xy]  # (row, column) in display pixels
        where["height"] = height
        return real_savefig(fig, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    img = matplotlib.image.imread(plots.pareto_plot(front, top, "tpot_s", "cost_per_mtok_usd", "s", "USD/Mtok",
                                                    tmp_path / "p.png"))[..., :3]
    scale = img.shape[0] / where["height"]  # file pixels per display pixel

    def pixel(r, c):
        return round(r * scale), round(c * scale)

    blue = np.array([0x1F, 0x77, 0xB4]) / 255.0  # tab:blue
    for r, c in where["front"]:
        r, c = pixel(r, c)
        # Below-left of the centre: inside the marker (radius 3.5 px), off the step line
        # (it leaves each point upwards and to the right).
        np.testing.assert_allclose(img[r + 1:r + 3, c - 2:c], np.broadcast_to(blue, (2, 2, 3)), atol=0.05)
    for r, c in where["top"]:
        np.testing.assert_allclose(img[pixel(r, c)], [0.699] * 3, atol=0.05)
