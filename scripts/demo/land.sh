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
        echo "\$ echo \"$q\" | build/lean chat -m models/lean-demo.gguf --temp 0"
        echo "$q" | build/lean chat -q -m models/lean-demo.gguf --temp 0 2>/dev/null; echo
    done
} | tee "$rec"/lean_samples.txt
python3 - "$rec" <<'PY'
import json, sys
rec = sys.argv[1]
r = json.load(open(f"{rec}/run.json"))
c = r["shape"]
open(f"{rec}/README.md", "w").write(f"""# The demo model's training run

`bash scripts/demo/h200.sh` on {r['device']} (torch {r['torch']}), landed by
`bash scripts/demo/land.sh`. The model: docs/demo_model.md.

| | |
| --- | --- |
| shape | d_model {c['n_embd']}, {c['n_layer']} layers, {c['n_head']} heads, SwiGLU {c['n_ff']}, vocabulary {c['n_vocab']}, context {c['n_ctx']}: {r['n_params'] / 1e6:.2f} M parameters |
| data | {r['train_tokens']} training tokens, {r['val_tokens']} held out |
| steps | {r['steps']} of {c['batch']} x {c['n_ctx']} tokens (repeat with `--steps {r['steps']}`), seed {r['seed']}, peak lr {r['lr']} |
| time | {r['seconds_training']} s training, {r['seconds_total']} s in all |
| kept | step {r['best_step']}: held-out loss {r['best_val_loss']:.4f} nats/token |
| file | models/lean-demo.gguf, {r['gguf_bytes']} bytes, sha256 {r['gguf_sha256']} |
| export check | {r['export_check']} |

Loss curve: ../../images/demo-loss.svg (train_log.tsv). Samples of the torch model:
samples.txt; of lean on the file: lean_samples.txt; the run's console: train.txt.
""")
PY
echo "land.sh: now read $rec/lean_samples.txt, then commit models/lean-demo.gguf $rec docs/images/demo-loss.svg"
