#!/bin/bash
# h200.sh — the demo model's training run on one GPU machine (the H200 here), from the data that
# prepare.sh made on the CPU machine (carried: build/demo/tokenizer, which holds the tokenizer
# and the tokenized corpus, tokens.npz).
#
#   bash scripts/demo/h200.sh [MINUTES]          (default 8.5: the run tool's limit is 10 minutes)
#
# Writes to $OUT (build/demo/out without one): lean-demo.gguf, train_log.tsv, run.json,
# samples.txt, train.txt (this run's console). Then, on the CPU machine:
#   bash scripts/demo/land.sh DIR                (checks the model with lean and installs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:-8.5}
out=${OUT:-build/demo/out}
mkdir -p "$out"
if [ ! -f build/demo/tokenizer/tokens.npz ]; then
    echo "h200.sh: build/demo/tokenizer/tokens.npz is missing: run scripts/demo/prepare.sh and carry build/demo/tokenizer" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | tee "$out/train.txt" || true
python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)' 2>&1 | tee -a "$out/train.txt"
python3 scripts/demo/train.py --corpus build/demo/corpus --tokenizer build/demo/tokenizer \
    --out "$out" --minutes "$minutes" 2>&1 | tee -a "$out/train.txt"
