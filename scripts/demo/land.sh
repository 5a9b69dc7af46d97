#!/bin/bash
# land.sh — takes a finished GPU run's files (h200.sh's $OUT) into the tree: checks the model
# with lean, then puts it where the project keeps it and its record in docs/.
#
#   bash scripts/demo/land.sh RUN_DIR
#
# RUN_DIR holds lean-demo.gguf, train_log.tsv, run.json, samples.txt, train.txt. Writes
# models/lean-demo.gguf, docs/runs/2026-12-05-demo-model/{train_log.tsv,run.json,
# samples.txt,train.txt,lean_samples.txt} and docs/images/demo-loss.svg; commit them after
# reading lean_samples.txt. Needs build/lean, build/demo/corpus (prepare.sh) and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:?usage: land.sh RUN_DIR}
m=$run/lean-demo.gguf
size=$(stat -c %s "$m")
echo "land.sh: $m is $size bytes"
[ "$size" -le $((25 * 1024 * 1024)) ] || { echo "land.sh: over 25 MiB: not for git" >&2; exit 1; }
python3 scripts/demo/check_tokenizer.py "$m" build/demo/corpus --docs 500
rec=docs/runs/2026-12-05-demo-model
mkdir -p models "$rec" docs/images
cp "$m" models/lean-demo.gguf
cp "$run"/train_log.tsv "$run"/run.json "$run"/samples.txt "$run"/train.txt "$rec"/
python3 scripts/demo/plot.py "$run"/train_log.tsv docs/images/demo-loss.svg
{
    for p in "The meaning of life is" "A dog is" "Once upon a time" "To run is to"; do
        echo "\$ build/lean run -m models/lean-demo.gguf -p \"$p\" -n 48"
        build/lean run -q -m models/lean-demo.gguf -p "$p" -n 48 2>/dev/null; echo; echo
    done
    for q in "What does ocean mean?" "Tell me a fortune." "Use happy in a sentence." "Who are you?"; do
        echo "\$ echo \"$q\" | build/lean chat -m models/lean-demo.gguf --temp 0 -n 96"
        echo "$q" | build/lean chat -q -m models/lean-demo.gguf --temp 0 -n 96 2>/dev/null; echo
    done
} | tee "$rec"/lean_samples.txt
