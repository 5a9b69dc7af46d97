#!/bin/bash
# land.sh — takes a finished GPU run's files (h200.sh's $OUT) into the tree: checks the model
# with lean, then puts it where the project keeps it and its record in docs/.
#
#   bash scripts/demo/land.sh RUN_DIR
#
# RUN_DIR holds lean-demo.gguf.part*, train_log.tsv, run.json, samples.txt, train.txt. Writes
# models/lean-demo.gguf, docs/runs/2026-12-05-demo-model/{train_log.tsv,run.json,
# samples.txt,train.txt,lean_samples.txt} and docs/images/demo-loss.svg; commit them after
# reading lean_samples.txt. Needs build/lean, build/demo/corpus (prepare.sh) and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:?usage: land.sh RUN_DIR}
mkdir -p build/demo
m=build/demo/lean-demo.gguf
cat "$run"/lean-demo.gguf.part* > $m             # h200.sh splits it: files from the device are <= 16 MiB
want=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['gguf_sha256'])" "$run"/run.json)
[ "$(sha256sum $m | cut -d' ' -f1)" = "$want" ] || { echo "land.sh: sha256 differs from run.json's" >&2; exit 1; }
size=$(stat -c %s "$m")
echo "land.sh: $m is $size bytes"
[ "$size" -le $((25 * 1024 * 1024)) ] || { echo "land.sh: over 25 MiB: not for git" >&2; exit 1; }
python3 scripts/demo/check_tokenizer.py "$m" build/demo/corpus --docs 500
/usr/bin/python3 scripts/demo/check_model.py "$m" -n 32            # Debian's python3-torch
/usr/bin/python3 scripts/demo/check_model.py "$m" -n 32 --backend cpu
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
