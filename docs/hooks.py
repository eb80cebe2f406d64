"""MkDocs hook: fill the generated reference sections at build time, and
serve the experiments' figures.

A page line `<!-- gen:NAME -->` is replaced by `gen_reference.render(NAME)`
(NAME: specs, cli, calibration). Nothing generated is written to docs/ or kept
in git, so the reference always matches the code that builds it. Figures the
experiments write (under experiments/) are served as `img/NAME.png` without a
copy in docs/.
"""

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

_DOCS = Path(__file__).resolve().parent
_ROOT = _DOCS.parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_DOCS))

import gen_reference  # noqa: E402

_MARKER = re.compile(r"^<!-- gen:(\w+) -->$", re.M)
FIGURES = {
    "img/calibration_parity.png": "experiments/calibration_parity.png",
    "img/whatif_sensitivity.png": "experiments/whatif_sensitivity.png",
    "img/npu_case_study.png": "experiments/paper/npu_case_study.png",
    "img/megatron_weak_scaling.png": "experiments/training/megatron_weak_scaling.png",
    "img/training_parity.png": "experiments/training/validate_parity.png",
    "img/training_scaling.png": "experiments/training/validate_scaling.png",
    "img/llama405b_16k_split.png": "experiments/training/llama-3.1-405b-16384-split.png",
    "img/deepseek_v3_2048_split.png": "experiments/training/deepseek-v3-2048-split.png",
}


def on_files(files, config):
    for uri, path in FIGURES.items():
        files.append(File.generated(config, uri, abs_src_path=str(_ROOT / path)))
    return files


def on_page_markdown(markdown, page, config, files):
    return _MARKER.sub(lambda m: gen_reference.render(m.group(1)), markdown)
