"""Shared pieces of the HTML report: names and units of columns, reading an
output folder, HTML tables and the page shell.
"""

import datetime
import html
import json
import math
from pathlib import Path

import numpy as np

from jaxplat.model.hardware import FLAT_NAMES
from jaxplat.search import AXIS_KINDS
from jaxplat.specs import SpecError

REPORT_FILE = "report.html"

# ------------------------------------------------------------ names, units

# column (or axis, or summary key) -> (readable name, unit shown, SI value per shown unit)
COLUMNS = {
    # metrics, as the sweep's tables name them (SI suffix in the key)
    "ttft_s": ("TTFT", "ms", 1e-3),
    "tpot_s": ("TPOT", "ms", 1e-3),
    "e2e_s": ("end-to-end", "s", 1.0),
    "throughput_tok_s": ("throughput", "tok/s", 1.0),
    # training studies (jaxplat.search.train_metrics)
    "step_time_s": ("step time", "s", 1.0), "tokens_per_s_per_chip": ("tokens per chip", "tok/s/chip", 1.0),
    "mfu": ("MFU", "", 1.0), "hfu": ("HFU", "", 1.0), "train_time_s": ("time to train", "days", 86400.0),
    "train_cost_usd": ("cost to train", "USD", 1.0), "train_energy_j": ("energy to train", "MWh", 3.6e9),
    "clock_share": ("clock under the power limit", "%", 1e-2),
    "throughput_per_chip_tok_s": ("throughput per chip", "tok/s/chip", 1.0),
    "chips": ("chips used", "", 1.0),
    "memory_bytes": ("memory per chip", "GB", 1e9),
    "memory_fraction": ("memory used", "%", 1e-2),
    "cost_per_mtok_usd": ("cost", "USD/Mtok", 1.0),
    "energy_per_token_j": ("energy", "J/tok", 1.0),
    # axes (jaxplat.study.AXIS_KINDS)
    "model": ("model", "", 1.0),
    "workload": ("use case", "", 1.0),
    "hardware": ("chip", "", 1.0),
    "tp": ("TP", "", 1.0), "pp": ("PP", "", 1.0), "ep": ("EP", "", 1.0), "dp": ("DP", "", 1.0),
    "moe_ep": ("MoE EP (experts over the TP chips)", "", 1.0),
    "moe_gather": ("MoE tokens by all-gather (1) or all-to-all (0)", "", 1.0),
    "sp": ("CP", "", 1.0), "cp": ("CP", "", 1.0), "microbatches": ("micro-batches", "", 1.0),
    "overlap": ("communication hidden", "%", 1e-2),
    "batch": ("batch", "seq", 1.0),
    "prompt": ("prompt", "tok", 1.0),
    "output": ("output", "tok", 1.0),
    "beams": ("beams", "", 1.0),
    "dtype": ("dtype", "", 1.0), "weight_dtype": ("weight dtype", "", 1.0), "kv_dtype": ("KV dtype", "", 1.0),
    "experts_dtype": ("experts' dtype", "", 1.0),
    "flops": ("dense BF16 compute", "TFLOP/s", 1e12),
    "hbm_bandwidth": ("HBM bandwidth", "TB/s", 1e12),
    "hbm_size": ("HBM capacity", "GB", 1e9),
    "sram_size": ("SRAM capacity", "MB", 1e6),
    "sram_bandwidth": ("SRAM bandwidth", "TB/s", 1e12),
    "link_bandwidth": ("scale-up link", "GB/s", 1e9),
    "link_latency": ("scale-up latency", "µs", 1e-6),
    "domain": ("scale-up domain", "chips", 1.0),
    "scaleout_bandwidth": ("scale-out link", "GB/s", 1e9),
    "scaleout_latency": ("scale-out latency", "µs", 1e-6),
    "eff_compute": ("compute efficiency", "%", 1e-2),
    "eff_memory": ("memory efficiency", "%", 1e-2),
    "eff_network": ("network efficiency", "%", 1e-2),
    "price": ("chip price", "USD", 1.0),
    "tdp": ("TDP", "W", 1.0),
    "array_rows": ("array rows", "PEs", 1.0),
    "array_cols": ("array columns", "PEs", 1.0),
    "cores": ("array cores", "", 1.0),
    "clock": ("array clock", "GHz", 1e9),
    "vector_flops": ("vector unit", "TFLOP/s", 1e12),
    "exp_rate": ("exponential rate (SFU)", "T exp/s", 1e12),
    "host_flops": ("offload host compute", "TFLOP/s", 1e12),
    "host_bandwidth": ("offload host link", "GB/s", 1e9),
    # bookkeeping
    "rank": ("#", "", 1.0),
    "index": ("configuration no.", "", 1.0),
}
# sweep metric name -> its column (jaxplat.cli.sweep.metric_columns)
_METRIC_SUFFIXES = ("", "_s", "_tok_s")
# hardware axes, and those where a smaller value is the harder requirement to
# meet (its requirement is the largest value that works): from the axes' kinds
HARDWARE_AXES = {k for k, v in AXIS_KINDS.items() if v.group == "hardware"}
LOWER_IS_BETTER = {k for k in HARDWARE_AXES if AXIS_KINDS[k].better == "less"}
CATEGORICAL_AXES = {"model", "workload", "dtype", "weight_dtype", "kv_dtype", "experts_dtype", "tp", "pp", "ep",
                    "moe_ep", "moe_gather", "dp", "sp", "cp", "microbatches", "chips", "batch", "beams", "domain"}

SWEEP_COUNTERS = (  # summary key -> row label
    ("configurations", "configurations in the study"),
    ("evaluated", "evaluated"),
    ("feasible", "feasible: parallelism divides the model and it fits in memory"),
    ("ok", "meet every constraint"),
    ("over_chips", "rejected: more chips than allowed"),
    ("wrong_chips", "rejected: not exactly the chips of the chips axis"),
    ("over_ttft", "rejected: TTFT over its SLO"),
    ("over_tpot", "rejected: TPOT over its SLO"),
    ("over_memory", "rejected: memory over the allowed fraction"),
)

# co-design
OBJECTIVE_NAMES = {"cost_per_mtok": ("cost per million tokens", "USD/Mtok"),
                   "usd_per_tok_s": ("chip capex per token/s", "USD/(tok/s)"),
                   "joules_per_token": ("energy per token", "J/tok"),
                   "train_cost_usd": ("cost to train", "USD"), "train_days": ("time to train", "days")}
CHIP_ROWS = (  # key in summary["chip"], name, unit, SI per unit, key in summary["bounds"]
    ("array_rows", "systolic array rows", "PEs", 1.0, "rows"),  # array space only (jaxplat.design.spaces)
    ("array_cols", "systolic array columns", "PEs", 1.0, "cols"),
    ("cores", "array cores", "", 1.0, "cores"),
    ("sram_per_core_bytes", "SRAM per core", "MB", 1e6, "sram_per_core"),
    ("flops_bf16", "dense BF16 compute", "TFLOP/s", 1e12, "flops"),
    ("sram_bytes", "SRAM capacity", "MB", 1e6, "sram"),
    ("hbm_stacks", "HBM stacks", "", 1.0, "hbm_stacks"),
    ("hbm_bytes", "HBM capacity", "GB", 1e9, None),
    ("hbm_bytes_s", "HBM bandwidth", "TB/s", 1e12, None),
    ("link_bytes_s", "scale-up link, per direction", "GB/s", 1e9, "link_bw"),
    ("area_mm2", "die area", "mm²", 1.0, None),
    ("tdp_w", "TDP", "W", 1.0, None),
    ("price_usd", "price", "USD", 1.0, None),
)
CODESIGN_METRICS = (  # key in summary["metrics"], name, unit, SI per unit, SLO key
    ("ttft", "TTFT", "ms", 1e-3, "ttft_s"),
    ("tpot", "TPOT", "ms", 1e-3, "tpot_s"),
    ("throughput", "throughput", "tok/s", 1.0, None),
    ("energy_per_token_j", "energy per token", "J/tok", 1.0, None),
    ("power_w", "average power", "W", 1.0, None),
    ("cost_per_mtok_usd", "cost per million tokens", "USD/Mtok", 1.0, None),
    ("memory_bytes", "memory per chip", "GB", 1e9, None),
    ("chips", "chips used", "", 1.0, None),
    # a training co-design's (design.codesign_train): TrainMetrics
    ("step_time_s", "step time", "s", 1.0, None),
    ("tokens_per_s_per_chip", "throughput per chip", "tok/s", 1.0, None),
    ("mfu", "MFU", "%", 0.01, None),
    ("train_time_s", "time to train", "days", 86400.0, "max_train_s"),
    ("train_energy_j", "energy to train (IT)", "GWh", 3.6e12, None),
    ("train_cost_usd", "cost to train", "USD", 1.0, None),
)
TRAJECTORY_PARAMS = (  # trajectory.csv column, name, unit, SI per unit
    ("flops", "dense BF16 compute", "TFLOP/s", 1e12),
    ("sram", "SRAM capacity", "MB", 1e6),
    ("hbm_stacks", "HBM stacks", "", 1.0),
    ("link_bw", "scale-up link", "GB/s", 1e9),
)
ELASTIC_METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "throughput",
                        "energy_per_token_j": "energy per token", "cost_per_mtok_usd": "cost per Mtok",
                        "step_time_s": "step time", "train_time_s": "time to train", "train_cost_usd": "cost to train",
                        "memory_bytes": "memory per chip"}
_HW_FIELDS = {  # Hardware "group.field" path -> name ({level} where it has levels)
    "chip.flops": "peak compute", "memory.sram_size": "SRAM capacity", "memory.sram_bandwidth": "SRAM bandwidth",
    "memory.size": "{level} capacity", "memory.bandwidth": "{level} bandwidth",
    "network.domain": "{level} domain size", "network.bandwidth": "{level} link bandwidth",
    "network.latency": "{level} latency", "efficiency.compute": "compute efficiency",
    "efficiency.memory": "memory efficiency", "efficiency.network": "network efficiency", "power.tdp": "TDP",
    "cost.price": "chip price", "power.energy_flop": "energy per FLOP", "power.energy_sram": "SRAM energy per byte",
    "power.energy_mem": "{level} energy per byte", "power.energy_net": "{level} energy per byte sent",
    "power.static_power": "static power", "cost.lifetime": "lifetime", "cost.energy_price": "electricity price",
    "cost.pue": "PUE", "chip.clock_hz": "array clock", "chip.vector_flops": "vector unit",
    "chip.exp_rate": "exponential rate (SFU)",
    "host.flops": "offload host compute", "host.bandwidth": "offload host link", "host.latency": "offload call latency",
}
_MEM_LEVELS = ("HBM", "host memory", "memory level 3")
_NET_LEVELS = ("scale-up", "scale-out", "network level 3")

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
          "#7f7f7f")


def column_info(col: str) -> tuple[str, str, float]:
    """(readable name, unit, SI per unit) of a table column; unknown ones as they are."""
    if col in COLUMNS:
        return COLUMNS[col]
    if col.startswith("best_"):  # axes.csv: best_<metric name>, the metric without its unit suffix
        metric = col[5:]
        key = next((metric + suf for suf in _METRIC_SUFFIXES if metric + suf in COLUMNS), metric)
        name, unit, scale = column_info(key)
        return f"best {name}", unit, scale
    for suf in _METRIC_SUFFIXES[1:]:  # a metric by its name (summary.json's objective and pareto)
        if col + suf in COLUMNS:
            return COLUMNS[col + suf]
    return col.replace("_", " "), "", 1.0


def header(col: str) -> str:
    name, unit, _ = column_info(col)
    return f"{name} [{unit}]" if unit else name


def header_html(col: str, extra: str = "") -> str:
    """A table header: the name, the unit on its own line (narrow columns)."""
    name, unit, _ = column_info(col)
    return _esc(name) + (f"<br>[{_esc(unit)}]" if unit else "") + (f"<br>{_esc(extra)}" if extra else "")


def log_axis(values) -> dict:
    """Plotly settings of a log axis over `values` with readable ticks: 1-2-5
    per decade (or decades on a wide range), written out in full."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], np.float64)
    if not len(v):
        return dict(type="log")
    lo, hi = math.floor(math.log10(v.min())), math.ceil(math.log10(v.max()))
    mult = (1, 2, 5) if hi - lo <= 3 else (1,) if hi - lo <= 8 else None
    if mult is None:
        return dict(type="log")
    ticks = [m * 10.0 ** k for k in range(lo, hi + 1) for m in mult]
    ticks = [t for t in ticks if v.min() / 1.6 <= t <= v.max() * 1.6]
    return dict(type="log", tickvals=ticks, ticktext=[fmt(t) for t in ticks], minor=dict(showgrid=False))


def hardware_number_name(label: str) -> str:
    """'memory.bandwidth[0]' -> 'HBM bandwidth', 'chip.flops[bf16]' -> 'peak compute (bf16)'."""
    field, _, rest = label.partition("[")
    idx = rest.rstrip("]")
    field = ".".join(FLAT_NAMES.get(field, (field,)))  # a summary written before the groups ('mem_bw[0]')
    name = _HW_FIELDS.get(field, field.rpartition(".")[2].replace("_", " "))
    if "{level}" in name:
        levels = _MEM_LEVELS if field.startswith("memory.") or field == "power.energy_mem" else _NET_LEVELS
        lvl = levels[int(idx)] if idx.isdigit() and int(idx) < len(levels) else f"level {idx}"
        return name.format(level=lvl)
    return f"{name} ({idx})" if idx else name


def fmt(v, digits: int = 4) -> str:
    """A number for a table cell: 4 significant digits, thousands separated."""
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    v = float(v)
    if not math.isfinite(v):
        return "n/a"
    if abs(v) < 1e3 and v != round(v):
        v = float(f"{v:.{digits}g}")  # rounded first: 999.99 is 1,000
    a = abs(v)
    if a >= 1e3 or (v == round(v) and a < 1e15):
        return f"{v:,.0f}"
    if a >= 1e-3:
        return f"{v:.{digits}g}"
    return f"{v:.{digits - 1}e}"


def fmt_col(col: str, v) -> str:
    """A table value of column `col` in its shown unit."""
    if isinstance(v, str):
        return v
    _, _, scale = column_info(col)
    return fmt(None if v is None else float(v) / scale)


# ------------------------------------------------------------- reading

def _read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SpecError(f"{path}: not a readable JSON summary ({type(e).__name__}: {e})") from None
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected a JSON object")
    return d


def _read_csv(out: Path, name: str, required: bool = True, columns=()):
    import pandas as pd

    path = out / name
    if not path.is_file():
        if required:
            raise SpecError(f"{out}: has summary.json but no {name} (rerun the command that wrote this folder)")
        return None
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:  # pandas' parser errors are ValueErrors
        raise SpecError(f"{path}: not a readable table ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    missing = [c for c in columns if not any(k == c or (c.endswith("*") and k.startswith(c[:-1])) for k in df.columns)]
    if missing:
        raise SpecError(f"{path}: no column for {', '.join(c.rstrip('*') for c in missing)}")
    return df


def load(out_dir) -> dict:
    """The output folder's summary and tables; SpecError if it is not one."""
    out = Path(out_dir)
    if not out.exists():
        raise SpecError(f"output folder not found: {out}")
    if not out.is_dir():
        raise SpecError(f"not a folder: {out} (give the --out folder of jaxplat sweep or jaxplat codesign)")
    if not (out / "summary.json").is_file():
        raise SpecError(f"{out}: no summary.json here; not the output folder of jaxplat sweep or codesign")
    summary = _read_json(out / "summary.json")
    kind = summary.get("kind") or ("sweep" if "configurations" in summary
                                    else "codesign" if "chip" in summary else None)
    if kind == "sweep":
        missing = [k for k in ("configurations", "feasible", "ok", "objective", "pareto") if k not in summary]
        if missing:
            raise SpecError(f"{out / 'summary.json'}: a sweep summary without {', '.join(missing)}")
        if not (isinstance(summary["pareto"], list) and len(summary["pareto"]) == 2):
            raise SpecError(f"{out / 'summary.json'}: pareto must name two metrics")
        metrics = [summary["objective"].split(" ")[-1]] + list(summary["pareto"])
        need = [m + "*" for m in metrics]
        data = dict(kind=kind, out=out, summary=summary, top_k=_read_csv(out, "top_k.csv", columns=["rank"] + need),
                    pareto=_read_csv(out, "pareto.csv", columns=need),
                    axes=_read_csv(out, "axes.csv", columns=("group", "axis", "value", "n_feasible", "n_ok",
                                                             "best_*")),
                    histogram=_read_csv(out, "histogram.csv", required=False, columns=("bin_lo", "bin_hi", "count")))
    elif kind == "codesign":
        missing = [k for k in ("objective", "chip", "metrics", "parallel") if k not in summary]
        if missing:
            raise SpecError(f"{out / 'summary.json'}: a co-design summary without {', '.join(missing)}")
        data = dict(kind=kind, out=out, summary=summary,
                    trajectory=_read_csv(out, "trajectory.csv", columns=("step", "start", "loss")),
                    sensitivities=_read_csv(out, "sensitivities.csv", required=False,
                                            columns=("number", "metric", "autodiff", "finite_difference")))
    else:
        raise SpecError(f"{out / 'summary.json'}: neither a sweep's nor a co-design's summary")
    return data


# ------------------------------------------------------------- HTML pieces

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif; margin: 0;
       color: #222; background: #fafafa; }
main { max-width: 1500px; margin: 0 auto; padding: 16px 24px 40px; background: #fff; }
h1 { font-size: 1.6em; margin: 0.4em 0 0.1em; }
h2 { font-size: 1.25em; margin: 1.6em 0 0.4em; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p.sub { color: #555; margin: 0 0 1em; }
p.note { color: #555; font-size: 0.9em; max-width: 980px; }
table { border-collapse: collapse; font-size: 0.86em; margin: 0.4em 0 0.6em; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e4e4e4; }
th { background: #f0f2f5; text-align: left; vertical-align: bottom; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td:first-child { white-space: nowrap; }
th.obj, td.obj { background: #fff6d9; }
tr:nth-child(even) td { background: #fafbfc; }
tr:nth-child(even) td.obj { background: #fbf0cc; }
.wide { overflow-x: auto; }
table.compact { font-size: 0.76em; }
table.compact th, table.compact td { padding: 2px 5px; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 50%; margin-right: 5px;
          vertical-align: -1px; }
.warn { background: #fff3f3; border-left: 4px solid #d62728; padding: 6px 10px; }
"""


def _esc(s) -> str:
    return html.escape(str(s))


def table_html(headers, rows, *, numeric=None, keys=None, table_id=None, highlight=None) -> str:
    """An HTML table; `numeric` marks right-aligned columns, `keys` gives each
    row a data-key, `highlight` a column index to shade."""
    numeric = numeric or [False] * len(headers)
    cls = lambda j: " ".join(c for c in ("n" if numeric[j] else "", "obj" if j == highlight else "") if c)  # noqa: E731
    attr = lambda j: f' class="{cls(j)}"' if cls(j) else ""  # noqa: E731
    head = "".join(f"<th{attr(j)}>{h}</th>" for j, h in enumerate(headers))  # headers may hold markup
    body = []
    for i, r in enumerate(rows):
        key = f' data-key="{_esc(keys[i])}"' if keys else ""
        body.append(f"<tr{key}>" + "".join(f"<td{attr(j)}>{_esc(c)}</td>" for j, c in enumerate(r)) + "</tr>")
    tid = f' id="{_esc(table_id)}"' if table_id else ""
    if len(headers) > 12:
        tid += ' class="compact"'
    return f'<div class="wide"><table{tid}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


class _Figures:
    """Plotly figures as HTML fragments; the first one carries plotly.js."""

    def __init__(self):
        self.first = True

    def __call__(self, fig) -> str:
        out = fig.to_html(full_html=False, include_plotlyjs=self.first, include_mathjax=False,
                          config={"displaylogo": False, "responsive": True})
        self.first = False
        return out


def _page(title: str, body: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_esc(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}<p class=note>Written by <code>jaxplat report</code> on {stamp}.</p>"
            f"</main></body></html>\n")


def _log_if_wide(vals) -> bool:
    v = np.asarray([x for x in vals if x is not None and np.isfinite(x)], np.float64)
    return bool(len(v) and v.min() > 0 and v.max() / v.min() > 20)
