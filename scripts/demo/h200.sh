#!/bin/bash
# h200.sh — the demo model's training run on one GPU machine (the H200 here), from the data that
# prepare.sh made on the CPU machine (carried: build/demo/tokenizer, which holds the tokenizer
# and the tokenized corpus, tokens.npz).
#
#   bash scripts/demo/h200.sh [MINUTES]          (default 8.5: the run tool's limit is 10 minutes;
#                                                 20 epochs take less, about 3-5 minutes)
#
# Writes to $OUT (build/demo/out without one): lean-demo.gguf split in parts of 15 MiB
# (lean-demo.gguf.part00, part01: files coming back from the device are at most 16 MiB),
# train_log.tsv, run.json (with the GGUF's sha256), samples.txt, train.txt (this console:
# the training, the export check, transformers' check). Then, on the CPU machine:
#   bash scripts/demo/land.sh DIR                (joins, checks the model with lean, installs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
minutes=${1:-8.5}
out=${OUT:-build/demo/out}
mkdir -p "$out"
if [ ! -f build/demo/tokenizer/tokens.npz ]; then
    echo "h200.sh: build/demo/tokenizer/tokens.npz is missing: run scripts/demo/prepare.sh and carry build/demo/tokenizer" >&2
    exit 2
fi
{
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
    python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'
    python3 scripts/demo/train.py --corpus build/demo/corpus --tokenizer build/demo/tokenizer \
        --out "$out" --minutes "$minutes"
    python3 scripts/demo/check_hf.py "$out/lean-demo.gguf" build/demo/tokenizer/tokenizer.json ||
        echo "h200.sh: check_hf.py failed (the model is kept)"
} 2>&1 | tee "$out/train.txt"
split -b 15M -d "$out/lean-demo.gguf" "$out/lean-demo.gguf.part"
rm "$out/lean-demo.gguf"
ls -la "$out"
