#!/usr/bin/env bash
# Everything docs/results.md and its log report for a finished 3-hour TED pt->en run, in one go:
#   bash benchmarks/ted_3h_finish.sh RUN        (RUN: the --out of `nmt train configs/ted_hrlr_pt_en_3h.yaml`)
# 1. the best 5 checkpoints averaged; the length penalty chosen on TED dev for those weights;
# 2. TED test: averaged and best weights, greedy and beam 5, alpha 0.6 and the chosen one;
# 3. real text (issue 63): a copy of RUN whose model.safetensors are the averaged weights, given a
#    truecaser from Multi30k's English captions, then TICO-19 through benchmarks/cased_text.py three
#    ways (sentence starts only; the source's capitals; and the truecaser).
# Needs NMT_MIRROR pointing at the data mirror (../shared/data); TICO_LIMIT=N reads its first N lines
# only. Prints as it goes; nothing is timed, so it may share the machine.
set -euo pipefail
RUN="${1:?usage: bash benchmarks/ted_3h_finish.sh RUN}"
[ -f "$RUN/config.yaml" ] || { echo "$RUN: no config.yaml there (not a model directory)" >&2; exit 1; }
AVG="$RUN/model.averaged.safetensors"

nmt average --model "$RUN" --best 5
nmt tune-length-penalty --model "$RUN" --weights "$AVG" --test ted_hrlr:dev:pt-en --alphas 0.6,1.0,1.5,2.0 \
  | tee "$RUN/length_penalty.txt"
ALPHA="$(awk '/^best alpha/ {print $3}' "$RUN/length_penalty.txt")"
echo "alpha chosen on dev: $ALPHA"

for weights in "$AVG" "$RUN/model.safetensors"; do
  for decode in "--beam 1" "--beam 5 --length-penalty 0.6" "--beam 5 --length-penalty $ALPHA"; do
    echo "== $(basename "$weights") $decode"
    # shellcheck disable=SC2086  # $decode is meant to split into options
    nmt evaluate --model "$RUN" --weights "$weights" --test ted_hrlr:test:pt-en $decode --json
  done
done

REAL="${RUN%/}_avg"
rm -rf "$REAL" && mkdir -p "$REAL"
find "$RUN" -maxdepth 1 -type f ! -name '*.safetensors' ! -name '*.pt' -exec cp {} "$REAL" \;
cp "$AVG" "$REAL/model.safetensors"
nmt truecaser "$REAL" --corpus multi30k
n=0
for way in "--no-source-case --no-truecase" "--no-truecase" ""; do
  n=$((n + 1))
  echo "== TICO-19 ${way:-(default)} (translations: $REAL/tico19.$n.en)"
  # shellcheck disable=SC2086
  python benchmarks/cased_text.py --model "$REAL" $way ${TICO_LIMIT:+--limit "$TICO_LIMIT"} --out "$REAL/tico19.$n.en"
done
