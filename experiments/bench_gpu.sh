#!/usr/bin/env bash
# Both sweep benchmarks on one accelerator, in one call, figures printed:
#   1. the factorized bench (experiments/bench_sweep.py: 1.2e9 configurations,
#      hardware axes inner), target >= 1e9 configurations/s on one H200;
#   2. the outer-heavy study (specs/studies/catalog-parallelism.yaml: every
#      configuration its own model, chip, use case, dtype and parallelism),
#      target >= 1e8 configurations/s;
# each with its compile time (target <= 10 s) and the block layout the device
# profile chose (search.devices: blocks sized to memory, 2^20 and up). The
# last lines repeat each bench's figures (compile, configs/s).
#
# Run from the repository root on the device machine; the project goes on
# PYTHONPATH (it is not installed). Its python3 has jax (with the CUDA
# plugin), numpy, PyYAML, tqdm, optax and pandas (.library/device/KINDS.md),
# so nothing needs to travel:
#   run(command="bash experiments/bench_gpu.sh", timeout_s=480)
# Where a package is missing, copy it into .device_site/ (ignored by git)
# and carry that folder: it goes first on PYTHONPATH.
# Environment: PYTHON (default python3), BENCH_SECONDS (sweep time per bench,
# default 15), BENCH_TIMEOUT (seconds per bench, default 200). With $OUT set
# (the device tool), each bench's full output is also written there.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -d .device_site ] && export PYTHONPATH="$PWD/.device_site:$PYTHONPATH"
export PYTHONUNBUFFERED=1
SECS=${BENCH_SECONDS:-15}
LIMIT=${BENCH_TIMEOUT:-200}
LOGS=${OUT:-$(mktemp -d)}

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
"$PY" -c "import jax, yaml, tqdm; print('jax', jax.__version__, jax.devices())" \
    || { echo "missing jax, yaml or tqdm"; exit 1; }

status=0
bench() {  # name, then bench_sweep.py's arguments
    local name=$1; shift
    echo "== $name"
    timeout "$LIMIT" "$PY" experiments/bench_sweep.py "$@" --seconds "$SECS" --loop-sample 50 2>&1 \
        | tr '\r' '\n' | grep -v 'cfg/s\]$' | tee "$LOGS/bench_$name.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] && { echo "($name: exit status $rc)"; status=$rc; }
}
bench factorized
bench outer-heavy --study specs/studies/catalog-parallelism.yaml

echo "== figures"
for name in factorized outer-heavy; do
    echo "$name: $(grep -h -m1 '^compile:' "$LOGS/bench_$name.log" | cut -d'(' -f1)|" \
         "$(grep -h '^configs/s:' "$LOGS/bench_$name.log")"
done
exit $status
