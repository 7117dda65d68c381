#!/usr/bin/env bash
# One prepared device check for a lent GPU machine (no network there): the CUDA tests, the whole
# suite, and a short training + decoding run on the GPU. Logs go to $OUT (or ./gpu_out).
#
# Before the call, on the development machine (both folders ignored by .git/info/exclude):
#   .whl/      wheels of the runtime packages the GPU image lacks (fastapi, uvicorn, sentencex, ...)
#   .gpudata/  a copy of ../shared/data (multi30k/, ted_hrlr/)
# and call the device tool with carry=[".whl", ".gpudata"] and `bash benchmarks/gpu_check.sh`.
set -uo pipefail
OUT="${OUT:-gpu_out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
# Eight test workers of 16 threads each would fight over 16 cores.
export PYTHONPATH="$PWD/src:/tmp/site" NMT_MIRROR="$PWD/.gpudata" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; lscpu | grep 'Model name';
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'; } 2>&1 | tee "$OUT/machine.txt"

# 0. Where the host CPU has AMX: 2-core training and decoding figures for train.precision / --precision bf16.
AMX=$(grep -o -m1 amx_bf16 /proc/cpuinfo)
[ -n "$AMX" ] && timeout 120 taskset -c 0,1 python3 benchmarks/train_precision.py --threads 2 --rounds 5 2>&1 | tee "$OUT/amx_train_precision.log"

# 1. The CUDA tests alone, first (they are the ones only this machine can run).
[ -z "${SKIP_CUDA:-}" ] && timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee "$OUT/cuda_tests.log" | tail -30

if [ -z "${SKIP_TRAIN:-}" ]; then
# 2. Training speed and decoding on the GPU: the README's de->en recipe for a short budget.
timeout 150 python3 -m nmt train configs/multi30k_de_en.yaml --set train.device=cuda train.max_time=80s \
  train.valid_every=400 train.tune_decoding=false --out /tmp/gpu_run --quiet 2>&1 | tail -5 | tee "$OUT/train.log"
cp /tmp/gpu_run/metrics.jsonl "$OUT/metrics.jsonl" 2>/dev/null
for beam in 1 5; do
  /usr/bin/time -f "wall %e s, max RSS %M KB" timeout 90 python3 -m nmt evaluate --model /tmp/gpu_run \
    --test multi30k:test_2016_flickr:de-en --beam $beam --device cuda --json 2>&1 | tail -4 | tee -a "$OUT/evaluate.log"
done
# The same model decoded on 2 host cores: nmt's engine in fp32, bf16 (AMX) and int8, and CTranslate2 int8.
if [ -n "$AMX" ]; then
  for eng in "torch fp32" "torch bf16" "torch int8" "ctranslate2 int8"; do set -- $eng
    echo "$1 $2:" | tee -a "$OUT/amx_decode.log"
    /usr/bin/time -f "wall %e s, max RSS %M KB" timeout 90 taskset -c 0,1 python3 -m nmt evaluate --model /tmp/gpu_run \
      --test multi30k:test_2016_flickr:de-en --beam 5 --device cpu --engine $1 --precision $2 --workers 1 --threads 2 \
      --json 2>&1 | tail -3 | tee -a "$OUT/amx_decode.log"
  done
fi
fi

# 3. The whole suite (CPU tests stay on the CPU: conftest hides the GPU from them).
# -v makes xdist name each test as it ends, so a failure is on record even if the timeout cuts the run.
timeout "${SUITE_TIMEOUT:-200}" python3 -m pytest -v -p no:cacheprovider -n 8 -m 'not cuda' --tb=short -rf --maxfail=25 2>&1 | tee "$OUT/suite.log" | grep -E "(FAILED|ERROR) tests/|passed|failed" | head -60

