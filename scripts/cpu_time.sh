#!/bin/bash
# CPU time per token (perf's task-clock: time on a CPU, not waiting for one, so a loaded
# machine still gives steady numbers) of decode and prefill, as the difference of two runs so
# load, the tokenizer and the first prompt cancel (docs/runs/2026-12-05-exact-cpu.md, "How").
#   scripts/cpu_time.sh MODEL BACKEND...   e.g. cpu-avx2 cpu-avx2+exact (one thread)
# The backends of one model run interleaved, decode then prefill, so drift hits them alike.
set -e
m=$1; shift
c() { perf stat -x, -e task-clock ./build/lean bench -m "$m" "$@" --suffix none -r 1 -t 1 -q 2>&1 >/dev/null |
          grep task-clock | cut -d, -f1; }
for be in "$@"; do
    d1=$(c --backend "$be" -p 0 -n 8); d2=$(c --backend "$be" -p 0 -n 136)
    p1=$(c --backend "$be" -p 8 -n 0); p2=$(c --backend "$be" -p 264 -n 0)
    awk -v m="$(basename "$m")" -v be="$be" -v d1="$d1" -v d2="$d2" -v p1="$p1" -v p2="$p2" \
        'BEGIN { printf "%s %s decode %.2f ms/token prefill %.3f ms/token\n", m, be, (d2-d1)/128, (p2-p1)/256 }'
done
