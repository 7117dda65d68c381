#!/usr/bin/env bash
# Training speed on 2 cores of a CPU with AMX (e.g. a cloud GPU machine's Intel host, offline),
# in one run: nmt's step in bf16 against fp32 (benchmarks/train_precision.py), for the code at hand
# and, with BEFORE=1, for an older copy of src/ first; then nmt fp32 and bf16 against OpenNMT-py side
# by side (benchmarks/opennmt_speed.py; ONMT_ARGS passes it options). Logs go to $OUT (or ./amx_out).
#
# Prepared beforehand on a machine with network, in the repository (folders ignored by git):
#   .whl2/        wheels: the runtime packages the GPU image lacks (see gpu_check.sh; ctranslate2 is
#                 not needed here) and OpenNMT-py 3.5.1, pyonmttok, configargparse
#   .gpudata/     a copy of ../shared/data
#   .before/src/  with BEFORE=1: `git archive OLD src | tar -x -C .before`
# then copy the repository with those folders over and run `bash benchmarks/amx_speed.sh` there.
set -uo pipefail
OUT="${OUT:-amx_out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl2/*.whl || exit 1
export NMT_MIRROR="$PWD/.gpudata" PYTHONUNBUFFERED=1
{ lscpu | grep 'Model name'; grep -o -m1 amx_bf16 /proc/cpuinfo || echo "no amx_bf16: nothing to time"; } | tee "$OUT/machine.txt"
grep -q amx_bf16 /proc/cpuinfo || exit 0
[ -z "${SKIP_PRECISION:-}" ] && for version in ${BEFORE:+before} after; do
  src="$PWD/src"; [ "$version" = before ] && src="$PWD/.before/src"
  PYTHONPATH="$src:/tmp/site" timeout 150 taskset -c 0,1 python3 benchmarks/train_precision.py --threads 2 --rounds 5 \
    ${PROFILE:+--profile} 2>&1 | grep -v USDT | tee "$OUT/precision_$version.log"
done
PYTHONPATH="$PWD/src:/tmp/site" timeout "${ONMT_TIMEOUT:-420}" taskset -c 0,1 python3 benchmarks/opennmt_speed.py \
  --onmt-site /tmp/site --precisions fp32,bf16 --no-workers ${ONMT_ARGS:-} 2>&1 | tee "$OUT/opennmt.log"
