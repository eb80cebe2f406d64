#!/usr/bin/env bash
# Both sweep benchmarks on one accelerator, in one call, figures printed:
#   1. the factorized bench (experiments/bench_sweep.py: 1.2e9 configurations,
#      hardware axes inner), target >= 1e9 configurations/s on one H200;
#   2. the outer-heavy study (specs/studies/catalog-parallelism.yaml: every
#      configuration its own model, chip, use case, dtype and parallelism),
#      target >= 1e8 configurations/s;
# each with its compile time (target <= 10 s) and the block layout the device
# profile chose (search.devices: blocks sized to memory, 2^20 and up).
#
# Run from the repository root on the device machine (the project goes on
# PYTHONPATH, it is not installed); the device's Python needs jax, numpy and
# PyYAML. Without PyYAML there, copy it beside the tree first and carry it:
#   mkdir -p .device_site && cp -r .venv/lib/python3*/site-packages/yaml .device_site/
#   run(command="bash experiments/bench_gpu.sh", carry=[".device_site"], timeout_s=420)
# Environment: PYTHON (default python3), BENCH_SECONDS (sweep time per bench,
# default 15), BENCH_TIMEOUT (seconds per bench, default 180).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -d .device_site ] && export PYTHONPATH="$PWD/.device_site:$PYTHONPATH"
SECS=${BENCH_SECONDS:-15}
LIMIT=${BENCH_TIMEOUT:-180}

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
"$PY" -c "import jax, yaml; print('jax', jax.__version__, jax.devices())" || { echo "missing jax or yaml"; exit 1; }

status=0
echo "== factorized bench (1.2e9 configurations, hardware axes inner)"
timeout "$LIMIT" "$PY" experiments/bench_sweep.py --seconds "$SECS" --loop-sample 50 || status=$?
echo "== outer-heavy study (specs/studies/catalog-parallelism.yaml)"
timeout "$LIMIT" "$PY" experiments/bench_sweep.py --study specs/studies/catalog-parallelism.yaml \
    --seconds "$SECS" --loop-sample 50 || status=$?
exit $status
