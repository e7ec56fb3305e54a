#!/usr/bin/env bash
# The GPU checks in one prepared run of at most 8 minutes (issue 57), from the repository root:
#
#   OUT=/path/to/results bash benchmarks/device_check.sh          # a CUDA machine: ~7 min
#   OUT=/tmp/device-smoke bash benchmarks/device_check.sh --smoke # any machine, tiny sizes on the CPU: ~3-8 min on 2 busy cores
#
# 1. benchmarks/torch_flat.py: 3,000,000 random unit vectors x 768 (e5-base's dimension) on
#    the GPU in float16, then in bfloat16, batches of 512 queries, k=10, against the card's
#    memory-bandwidth bound measured in the same run (faiss left out: none on that machine).
# 2. benchmarks/train_step.py: GRPO steps of searchgym's trainer on CUDA with a random-weight
#    model of SmolLM2-135M's shape (no download): update tokens/s and peak GPU memory.
#
# Each part runs under `timeout` (so the whole stays under 8 minutes even if one hangs) and
# writes its markdown to $OUT (default ./device-check): gpu.txt (nvidia-smi, torch, CUDA),
# torch_flat_<dtype>.md, train_step.md and train_step.json, and summary.md, the lines
# benchmarks/RESULTS.md takes. A part that fails or times out is said so in summary.md; the
# others still run. Exit status: the number of parts that failed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-check}
PY=${PYTHON:-python}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [ "${1:-}" = "--smoke" ]; then
    # The same commands at sizes a 2-core CPU runs in minutes: proves the script and its
    # outputs, measures nothing worth keeping.
    FLAT_ARGS=(--vectors 20000 --dim 64 --batch 64 --repeats 2 --devices cpu --no-faiss)
    DTYPES=(float32 bfloat16)
    # The tiny model: SmolLM2's shape takes minutes a step on 2 CPU cores (its prompts' prefill
    # through 30 layers); --shape smollm2 builds, saves and loads the same way at any size.
    TRAIN_ARGS=(--shape tiny --device cpu --steps 2 --questions 1 --n 2 --max-new-tokens 4 --threads 2)
    FLAT_LIMIT=120 TRAIN_LIMIT=600
else
    FLAT_ARGS=(--vectors 3000000 --dim 768 --batch 512 --repeats 5 --devices cuda --no-faiss)
    DTYPES=(float16 bfloat16)
    TRAIN_ARGS=(--shape smollm2 --device cuda --steps 3 --questions 4 --n 4 --max-new-tokens 32)
    FLAT_LIMIT=140 TRAIN_LIMIT=170
fi

failed=0
{
    date -u +"%Y-%m-%d %H:%M UTC"
    nvidia-smi -L 2>/dev/null || echo "no nvidia-smi: no GPU here"
    "$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPU:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')"
} > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
echo "# device check, $(head -1 "$OUT/gpu.txt")" > "$OUT/summary.md"
sed -n '2,$p' "$OUT/gpu.txt" | sed 's/^/    /' >> "$OUT/summary.md"

# One part: run "$@" under `timeout LIMIT`, its markdown to $OUT/NAME.md, its log to
# $OUT/NAME.log; its figures (the lines PATTERN matches) and exit status into summary.md.
run_part() {
    local name=$1 limit=$2 title=$3 pattern=$4 status
    shift 4
    echo "== $title (at most ${limit} s)"
    timeout "$limit" "$@" > "$OUT/$name.md" 2> "$OUT/$name.log"
    status=$?
    cat "$OUT/$name.md"
    {
        echo "## $title: exit $status$([ $status = 124 ] && echo ' (timed out)')"
        grep -E "$pattern" "$OUT/$name.md"
    } >> "$OUT/summary.md"
    [ $status = 0 ] || { failed=$((failed + 1)); tail -5 "$OUT/$name.log"; }
}

for dtype in "${DTYPES[@]}"; do
    run_part "torch_flat_$dtype" "$FLAT_LIMIT" "torch_flat.py --dtype $dtype" \
        "^\| torch-flat|bandwidth bound|compute bound|copy bandwidth|^index:" \
        "$PY" benchmarks/torch_flat.py "${FLAT_ARGS[@]}" --dtype "$dtype"
done
run_part train_step "$TRAIN_LIMIT" "train_step.py ${TRAIN_ARGS[*]}" \
    "^model |^\| (update throughput|step time|peak memory|rollout share|update share) " \
    "$PY" benchmarks/train_step.py "${TRAIN_ARGS[@]}" --json "$OUT/train_step.json"

echo "== summary ($OUT/summary.md), $failed part(s) failed"
cat "$OUT/summary.md"
exit $failed
