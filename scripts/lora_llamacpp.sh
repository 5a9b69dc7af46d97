#!/usr/bin/env bash
# lora_llamacpp.sh — lean's greedy replies with LoRA adapters against llama.cpp's (issue 28
# item 2; docs/lora.md). For a generated llama (tiny-llama, llama2 vocabulary) and qwen2
# (tiny-qwen2, qwen vocabulary), in F32 (TYPE: another format) it makes two adapters with scripts/make_lora.py (a: rank 8,
# alpha 16, every weight, F32; b: rank 4, no alpha, q/v/down, F16), then runs the same prompt
# greedily, 32 tokens, without adapters, with a, and with a + b at 0.5, through lean (cpu-ref,
# cpu --exact, cpu) and llama.cpp's llama-completion (--temp 0), and compares the text bytes
# (leading spaces dropped: llama.cpp prints the first piece's SentencePiece space, lean's text
# stream does not). Random weights give flat logits with near-ties, where two correct engines
# may part: the runs without adapters show how often that happens by itself.
#
#   bash /work/shared/peers/build_llama.sh /tmp/llama      (llama-completion among the tools)
#   bash scripts/lora_llamacpp.sh /tmp/llama/build/bin [WORKDIR]
# Prints one line per case and backend: "same" or "DIFFERENT" and both replies; exit status 1
# when any cpu-ref reply differs from llama.cpp's.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: lora_llamacpp.sh LLAMA_BIN_DIR [WORKDIR]}
dir=${2:-/tmp/lora-llamacpp}
py=python3; [ ! -x /usr/bin/python3 ] || py=/usr/bin/python3
mkdir -p "$dir"
prompt="The quick brown fox"
n=32
bad=0
type=${TYPE:-f32}
for spec in "llama tiny-llama $type llama2" "qwen2 tiny-qwen2 $type qwen"; do
    set -- $spec
    name=$1 preset=$2 type=$3 vocab=$4
    m=$dir/$name.gguf
    build/lean gen --preset "$preset" --type "$type" --vocab "build/vocab/$vocab.gguf" -o "$m" >/dev/null
    "$py" scripts/make_lora.py adapter "$m" "$dir/$name-a.gguf" --rank 8 --alpha 16 --seed 3 >/dev/null
    "$py" scripts/make_lora.py adapter "$m" "$dir/$name-b.gguf" --rank 4 --alpha 0 --seed 4 --type f16 \
        --targets q,v,down >/dev/null
    for case in none a a+b; do
        case $case in
        none) lean_args=() llama_args=() ;;
        a) lean_args=(--lora "$dir/$name-a.gguf") llama_args=(--lora "$dir/$name-a.gguf") ;;
        a+b) lean_args=(--lora "$dir/$name-a.gguf" --lora-scaled "$dir/$name-b.gguf" 0.5)
             llama_args=(--lora "$dir/$name-a.gguf" --lora-scaled "$dir/$name-b.gguf:0.5") ;;
        esac
        theirs=$("$bin/llama-completion" -m "$m" -p "$prompt" -n $n --temp 0 -t 2 --no-display-prompt \
                 --no-warmup -no-cnv "${llama_args[@]}" 2>/dev/null </dev/null | sed 's/ \[end of text\]$//')
        theirs=${theirs#"${theirs%%[! ]*}"}
        for be in cpu-ref "cpu --exact" cpu; do
            ours=$(build/lean run -q -m "$m" -p "$prompt" -n $n --backend $be "${lean_args[@]}" 2>/dev/null)
            ours=${ours#"${ours%%[! ]*}"}
            if [ "$ours" == "$theirs" ]; then verdict=same; else verdict=DIFFERENT; fi
            [ "$verdict" == same ] || [ "$be" != cpu-ref ] || bad=1
            printf '%-6s %-4s %-12s %-9s lean: %q\n' "$name" "$case" "$be" "$verdict" "$ours"
            [ "$verdict" == same ] || printf '%36s llama.cpp: %q\n' "" "$theirs"
        done
    done
done
exit $bad
