#!/usr/bin/env bash
# streams_cpu_ab.sh — CPU time per decoded token against the number of streams (lean bench
# --streams, lean_gen_next_batch's steps), two lean binaries A/B interleaved: the batched CPU
# decode before and after a change, on a machine too loaded for wall clock to mean anything.
#
#   scripts/streams_cpu_ab.sh BASE NEW MODEL [STREAMS] [N] [R]   (defaults: 1,2,4,8,16,32, 40, 1)
#
# perf's task-clock (time on a CPU, not waiting for one), one thread. For each stream count S,
# each binary runs `lean bench --streams S` with 8 and N decode steps; the one-sequence tg row
# that bench runs first is measured the same way (no --streams) and taken off, so load,
# prefill and start-up cancel: ms/token = ((tN,S - t8,S) - (tN - t8)) / (N - 8) / S. Each t is
# the least of R runs (the binaries alternating), the run other processes disturbed least.
# Prints a Markdown row per S: each binary's ms per token and its 1-stream ms over it.
set -euo pipefail
base=${1:?usage: scripts/streams_cpu_ab.sh BASE NEW MODEL [STREAMS] [N] [R]}
new=${2:?}
model=${3:?}
streams=${4:-1,2,4,8,16,32}
n=${5:-40}
reps=${6:-1}
tc() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
once() { # binary, steps, streams (0: the one-sequence row alone)
    local s=(--streams "$3")
    [ "$3" = 0 ] && s=()
    tc "$1" bench -m "$model" -p 0 --suffix none -r 1 --backend cpu -t 1 -q -n "$2" "${s[@]}"
}
declare -A best
measure() { # steps, streams: the least of reps runs of each binary, into best[binary:steps:streams]
    local r b t k
    for ((r = 0; r < reps; r++)); do
        for b in "$base" "$new"; do
            t=$(once "$b" "$1" "$2")
            k="$b:$1:$2"
            best[$k]=$(awk -v a="${best[$k]:-$t}" -v t="$t" 'BEGIN { print t < a ? t : a }')
        done
    done
}
run() { echo "${best[$1:$2:$3]}"; }
echo "# $(date -u '+%F %T') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg); $(basename "$model"), 8 and $n steps, least of $reps"
measure 8 0
measure "$n" 0
alone_b=$(awk -v a="$(run "$base" 8 0)" -v b="$(run "$base" "$n" 0)" 'BEGIN { print b - a }')
alone_n=$(awk -v a="$(run "$new" 8 0)" -v b="$(run "$new" "$n" 0)" 'BEGIN { print b - a }')
echo "| streams | before ms/token | before x1/xS | after ms/token | after x1/xS | after vs before |"
echo "|---:|---:|---:|---:|---:|---:|"
b1=; n1=
for s in ${streams//,/ }; do
    measure 8 "$s"
    measure "$n" "$s"
    b=$(awk -v a="$(run "$base" 8 "$s")" -v b="$(run "$base" "$n" "$s")" -v c="$alone_b" -v s="$s" -v n="$n" \
        'BEGIN { print ((b - a) - c) / (n - 8) / s }')
    m=$(awk -v a="$(run "$new" 8 "$s")" -v b="$(run "$new" "$n" "$s")" -v c="$alone_n" -v s="$s" -v n="$n" \
        'BEGIN { print ((b - a) - c) / (n - 8) / s }')
    b1=${b1:-$b}
    n1=${n1:-$m}
    awk -v s="$s" -v b="$b" -v m="$m" -v b1="$b1" -v n1="$n1" \
        'BEGIN { printf "| %d | %.3f | %.2fx | %.3f | %.2fx | %.2fx |\n", s, b, b1 / b, m, n1 / m, b / m }'
done
echo "# end: load average $(cut -d' ' -f1-3 /proc/loadavg)"
