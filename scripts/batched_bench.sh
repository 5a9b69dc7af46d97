#!/usr/bin/env bash
# batched_bench.sh — aggregate decode against the number of streams, lean and llama.cpp side by
# side on one GGUF file (issue 27 item 5): llama.cpp's llama-batched-bench and `lean bench
# --streams`, the same streams, decode lengths and threads.
#
#   scripts/batched_bench.sh MODEL [STREAMS] [THREADS]     (defaults: 1,2,4,8,16,32 and 1)
#
# Two measurements:
#   wall  each tool's own table: llama-batched-bench's S_TG (aggregate decode tokens/s of B
#         sequences) and lean bench's 'tg32 xS' rows. Wall clock: meaningless on a loaded
#         machine (and llama.cpp's threads spin when -t > 1), shown for the form of the rows.
#   cpu   with perf: CPU time per decoded token, each stream count run with 8 and 40 decode
#         steps and the two runs subtracted (load, prefill and start-up cancel), the way
#         docs/runs/2026-12-05-batch-cpu.md measures; far steadier under load than wall clock.
# llama.cpp: LLAMA_DIR (default /tmp/llama-peer) holding build/bin/llama-batched-bench; when it
# is missing, /work/shared/peers/build_llama.sh builds it there (about 10 minutes on 2 cores,
# under nice). lean: build/lean of this tree (`make`).
set -euo pipefail
model=${1:?usage: scripts/batched_bench.sh MODEL [STREAMS] [THREADS]}
streams=${2:-1,2,4,8,16,32}
threads=${3:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
lean=$here/build/lean
llama_dir=${LLAMA_DIR:-/tmp/llama-peer}
peers=${PEERS_DIR:-/work/shared/peers}
bb=$llama_dir/build/bin/llama-batched-bench

[ -x "$lean" ] || { echo "no $lean: run make first" >&2; exit 2; }
if [ ! -x "$bb" ]; then
    echo "building llama-batched-bench in $llama_dir (nice -n 10)" >&2
    nice -n 10 bash "$peers/build_llama.sh" "$llama_dir" >&2
fi
max_s=$(tr ',' '\n' <<<"$streams" | sort -n | tail -1)
ctx=$(((8 + 40) * max_s + 64)) # every sequence's prompt and decode in llama.cpp's one KV cache

echo "# $(date -u '+%F %T') UTC, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model $model, streams $streams, threads $threads"
echo "## wall: llama-batched-bench (8-token prompts, 32 steps)"
nice -n 10 "$bb" -m "$model" -c "$ctx" -b 512 -ub 512 -npp 8 -ntg 32 -npl "$streams" -t "$threads" 2>/dev/null | grep '^|'
echo "## wall: lean bench (8-token prompt, 32 steps)"
nice -n 10 "$lean" bench -m "$model" -p 0 --suffix none -n 32 --streams "$streams" -r 3 --backend cpu -t "$threads" -q |
    grep -E '^\| (model|---|.*tg)'

command -v perf >/dev/null || { echo "## cpu: perf not installed (apt-get install linux-perf)"; exit 0; }
# task-clock ms of one command
tc() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
llama() { tc nice -n 10 "$bb" -m "$model" -c "$ctx" -b 512 -ub 512 -npp 8 -ntg "$1" -npl "$2" -t "$threads"; }
leanb() { # $2 = 0: the one-sequence tg row alone
    local s=(--streams "$2")
    [ "$2" = 0 ] && s=()
    tc nice -n 10 "$lean" bench -m "$model" -p 0 --suffix none -r 1 --backend cpu -t "$threads" -q -n "$1" "${s[@]}"
}
echo "## cpu: CPU ms per decoded token ((40-step run - 8-step run) / 32 / streams)"
echo "| streams | llama.cpp ms | vs its 1 stream | lean ms | vs its 1 stream |"
echo "|---:|---:|---:|---:|---:|"
l1=; n1=
for s in ${streams//,/ }; do
    l=$(awk -v a="$(llama 8 "$s")" -v b="$(llama 40 "$s")" -v s="$s" 'BEGIN { print (b - a) / 32 / s }')
    # lean bench also runs the one-sequence tg row each time: take it out (a run without --streams)
    n=$(awk -v a="$(leanb 8 "$s")" -v b="$(leanb 40 "$s")" -v c="$(leanb 8 0)" -v d="$(leanb 40 0)" -v s="$s" \
        'BEGIN { print ((b - a) - (d - c)) / 32 / s }')
    l1=${l1:-$l}
    n1=${n1:-$n}
    awk -v s="$s" -v l="$l" -v n="$n" -v l1="$l1" -v n1="$n1" \
        'BEGIN { printf "| %d | %.3f | %.2fx | %.3f | %.2fx |\n", s, l, l1 / l, n, n1 / n }'
done
