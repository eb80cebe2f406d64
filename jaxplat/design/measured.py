"""Measured rows for calibration: the CSV schema (README, "Calibration
rows"), validated on the host with one-line errors naming the file, the row
and the column, and turned into the pytrees the cost model takes.

One row is one measured number of one deployment under one load:
  model, hardware        built-in names or spec paths
  tp, pp, ep, moe_ep, dp parallel degrees (dp: replicas; moe_ep where the
                         cost model has it)
  dtype                  one dtype, or weights/activations/kv[/experts] (fp4/fp4/fp8)
  prompt, output         mean tokens per request
  batch | concurrency | rate | offline
                         exactly one: a static batch per replica, closed-loop
                         clients (whole deployment), Poisson requests/s
                         (whole deployment), or offline max load (1)
  metric, value          throughput_tok_s (output tokens/s of the whole
                         deployment), ttft_s or tpot_s (mean seconds)
Optional: microbatches, moe_gather (1: MoE tokens by all-gather /
reduce-scatter, Parallel.moe_gather), prompt_cv, output_cv (length spread; 0: fixed),
max_batch, max_num_tokens, chunk, kv_block, mem_fraction, prefill_first
(engine settings, jaxplat.serving.Serving), engine, source, note (kept for
reports).

`chip_ratio_errors` compares chips on these rows: per-chip throughput of
two chips on one benchmark, measured against predicted (`ChipRatio`).
"""

import csv
import dataclasses
import math
from pathlib import Path
from typing import NamedTuple

from jaxplat.model import (
    Parallel,
    default_calibration,
    engine_parts,
    load_hardware,
    load_model,
    load_software,
    workload_from_dict,
)
from jaxplat.serving import serving
from jaxplat.specs import SpecError, dtype_triple

REQUIRED = ("model", "hardware", "tp", "pp", "ep", "moe_ep", "dp", "dtype", "prompt", "output", "batch",
            "concurrency", "rate", "offline", "metric", "value")
OPTIONAL = {"microbatches": None, "prompt_cv": 0.0, "output_cv": 0.0, "max_batch": 0.0, "max_num_tokens": 8192.0,
            "chunk": 0.0, "kv_block": 0.0, "mem_fraction": 0.9, "prefill_first": 0.0, "engine": "", "source": "",
            "note": ""}
LOADS = ("batch", "concurrency", "rate", "offline")
METRICS = ("throughput_tok_s", "ttft_s", "tpot_s")


@dataclasses.dataclass
class Row:
    """One validated measured row (SI units) and where it came from."""

    line: int
    model: str
    hardware: str
    par: dict
    dtype: dict
    prompt: float
    output: float
    load: str         # one of LOADS
    amount: float     # batch, clients, requests/s, or 1 for offline
    metric: str
    value: float
    settings: dict    # Serving fields
    engine: str = ""
    source: str = ""
    note: str = ""

    def config_key(self):
        """Rows of one deployment under one load, run by one engine, share a prediction."""
        return (self.model, self.hardware, tuple(sorted(self.par.items())), tuple(sorted(self.dtype.items())),
                self.prompt, self.output, self.load, self.amount, tuple(sorted(self.settings.items())), self.engine)


def _num(src, line, col, text, *, positive=True, allow_zero=True, integer=False):
    try:
        x = float(text)
    except ValueError:
        raise SpecError(f"{src}: row {line}: column {col}: not a number: {text!r}") from None
    if math.isnan(x) or math.isinf(x):
        raise SpecError(f"{src}: row {line}: column {col}: not a finite number: {text!r}")
    if positive and (x < 0 or (x == 0 and not allow_zero)):
        raise SpecError(f"{src}: row {line}: column {col}: must be {'>= 0' if allow_zero else '> 0'}, got {text}")
    if integer and x != round(x):
        raise SpecError(f"{src}: row {line}: column {col}: must be a whole number, got {text}")
    return x


def _dtype(src, line, text):
    return dtype_triple(f"{src}: row {line}: column dtype", text)


_known: dict = {}


def _check_spec(src, line, col, kind, name):
    """Unknown model or chip -> a one-line error naming the row."""
    key = (kind, name)
    if key not in _known:
        try:
            (load_model if kind == "models" else load_hardware)(name)
            _known[key] = None
        except SpecError as e:
            _known[key] = str(e)
    if _known[key]:
        raise SpecError(f"{src}: row {line}: column {col}: {_known[key]}")


def read_rows(path) -> list[Row]:
    """Read and validate a measured CSV (module docstring)."""
    src = str(path)
    try:
        f = open(path, newline="")
    except OSError as e:
        raise SpecError(f"{src}: cannot read ({e.strerror})") from None
    with f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise SpecError(f"{src}: row 1: missing column {missing[0]!r} (required: {', '.join(REQUIRED)})")
        rows = []
        for line, r in enumerate(reader, start=2):
            for c in REQUIRED:
                if r.get(c) is None:
                    raise SpecError(f"{src}: row {line}: column {c}: missing value (short row)")
            _check_spec(src, line, "model", "models", r["model"])
            _check_spec(src, line, "hardware", "hardware", r["hardware"])
            par = {k: _num(src, line, k, r[k] or "1", allow_zero=False, integer=True)
                   for k in ("tp", "pp", "ep", "moe_ep", "dp")}
            mb = r.get("microbatches") or ""
            par["microbatches"] = _num(src, line, "microbatches", mb, allow_zero=False) if mb else par["pp"]
            if par["moe_ep"] != 1 and "moe_ep" not in Parallel.__dataclass_fields__:
                raise SpecError(f"{src}: row {line}: column moe_ep: {r['moe_ep']} needs expert parallelism inside "
                                "tensor parallelism (Parallel.moe_ep), which this jaxplat lacks")
            if par["moe_ep"] == 1:
                del par["moe_ep"]
            gather = (r.get("moe_gather") or "").strip()
            if gather:
                if gather not in ("0", "1"):
                    raise SpecError(f"{src}: row {line}: column moe_gather: 0 (all-to-all) or 1 (all-gather), "
                                    f"got {gather!r}")
                if gather == "1":
                    par["moe_gather"] = 1.0
            loads = [k for k in LOADS if (r.get(k) or "").strip()]
            if len(loads) != 1:
                raise SpecError(f"{src}: row {line}: columns {', '.join(LOADS)}: exactly one must be set, "
                                f"got {', '.join(loads) or 'none'}")
            load = loads[0]
            amount = _num(src, line, load, r[load], allow_zero=False)
            if r["metric"] not in METRICS:
                raise SpecError(f"{src}: row {line}: column metric: {r['metric']!r} unknown; "
                                f"allowed: {', '.join(METRICS)}")
            settings = {}
            for k, default in OPTIONAL.items():
                if k in ("engine", "source", "note", "microbatches"):
                    continue
                text = (r.get(k) or "").strip()
                settings[k] = _num(src, line, k, text) if text else default
            if not 0 < settings["mem_fraction"] <= 1:
                raise SpecError(f"{src}: row {line}: column mem_fraction: must be in (0, 1], got "
                                f"{settings['mem_fraction']}")
            rows.append(Row(line=line, model=r["model"], hardware=r["hardware"], par=par,
                            dtype=_dtype(src, line, r["dtype"]),
                            prompt=_num(src, line, "prompt", r["prompt"], allow_zero=False),
                            output=_num(src, line, "output", r["output"], allow_zero=False),
                            load=load, amount=amount, metric=r["metric"],
                            value=_num(src, line, "value", r["value"], allow_zero=False), settings=settings,
                            engine=r.get("engine") or "", source=r.get("source") or Path(src).stem,
                            note=r.get("note") or ""))
    if not rows:
        raise SpecError(f"{src}: no measured rows")
    return rows


def row_hardware(row: Row, calibration=None, software=None):
    """The Hardware of a row: its chip, with `calibration`'s (default: the
    shipped one's) efficiency as run by the row's engine (each of its "+"
    parts) where the calibration has values for it (Calibration.for_engine).
    With `software` (a stack's name or file), the row runs as `estimate
    --engine` runs it instead: the calibration's values beneath that stack's
    fixed costs, no engine's own values. Depends on the row's chip and engine
    only."""
    cal = calibration if calibration is not None else default_calibration()
    if software is not None:
        return load_hardware(row.hardware, software=load_software(software), defaults=cal)
    if cal is not None and any(e in cal.engines for e in engine_parts(row.engine)):
        calibration = cal.for_engine(row.engine)
    # A calibration's rows run on the software stack its fixed costs were fitted with.
    stack = load_software(cal.software) if cal is not None and cal.software else None
    return load_hardware(row.hardware, calibration, software=stack)


def row_inputs(row: Row):
    """(Parallel, Workload, Serving) of a row."""
    par = Parallel(**row.par)
    wl = workload_from_dict({"batch": 1, "prompt": row.prompt, "output": row.output, "dtype": row.dtype},
                            src=f"row {row.line}")
    s = row.settings
    srv = serving(prompt_cv=s["prompt_cv"], output_cv=s["output_cv"], max_batch=s["max_batch"], chunk=s["chunk"],
                  mem_fraction=s["mem_fraction"], max_num_tokens=s["max_num_tokens"], kv_block=s["kv_block"],
                  prefill_first=s["prefill_first"])
    return par, wl, srv


def row_pytrees(row: Row, calibration=None, software=None):
    """(Hardware, Parallel, Workload, Serving) of a row (`row_hardware`, `row_inputs`)."""
    return (row_hardware(row, calibration, software), *row_inputs(row))


class ChipRatio(NamedTuple):
    """Chip a's per-chip throughput over chip b's on one benchmark (model,
    source, prompt/output lengths), measured and predicted; error is
    predicted / measured - 1."""

    benchmark: str
    chip_a: str
    chip_b: str
    measured: float
    predicted: float
    error: float

    @property
    def chips(self) -> str:
        return f"{self.chip_a}/{self.chip_b}"

    def over(self, a: str, b: str):
        """(measured, predicted) as a over b when these are the two chips, in either order; else None."""
        if (a, b) == (self.chip_a, self.chip_b):
            return self.measured, self.predicted
        if (b, a) == (self.chip_a, self.chip_b):
            return 1.0 / self.measured, 1.0 / self.predicted
        return None


def chip_ratio_errors(pred_values, rows: list[Row], source="mlperf") -> list[ChipRatio]:
    """Per-chip throughput ratios between chips running the same benchmark
    (same model, source, prompt and output lengths; offline rows of sources
    whose name starts with `source`), predicted vs measured, one `ChipRatio`
    per pair of rows on different chips (in row order)."""
    by = {}
    for i, r in enumerate(rows):
        if r.metric == "throughput_tok_s" and r.load == "offline" and r.source.startswith(source):
            chips = r.par.get("tp", 1) * r.par.get("pp", 1) * r.par.get("ep", 1) * r.par.get("dp", 1)
            key = (r.model, r.source, f"{r.prompt:g}/{r.output:g}")
            by.setdefault(key, []).append((r.hardware, r.value / chips, pred_values[i] / chips))
    out = []
    for (model, src, lengths), items in sorted(by.items()):
        for a in range(len(items)):
            for b in range(a + 1, len(items)):
                (ha, ma, pa), (hb, mb, pb) = items[a], items[b]
                if ha != hb:
                    out.append(ChipRatio(f"{model} {src} {lengths}", ha, hb, ma / mb, pa / pb,
                                         (pa / pb) / (ma / mb) - 1.0))
    return out


__all__ = ["LOADS", "METRICS", "OPTIONAL", "REQUIRED", "ChipRatio", "Row", "chip_ratio_errors", "read_rows",
           "row_hardware", "row_inputs", "row_pytrees"]
