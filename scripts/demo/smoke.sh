#!/bin/bash
# smoke.sh — the demo pipeline end to end at a tiny scale on the CPU: a corpus sample, a
# 512-token tokenizer, a 2-layer model trained for 30 steps, its GGUF loaded by `lean run` and
# `lean chat`, and lean's tokenizer held to bpe.py's on the corpus sample. About a minute.
#
#   bash scripts/demo/smoke.sh                   (needs build/lean, Debian's python3-torch, the
#                                                 fortunes and wordnet-base packages)
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-/usr/bin/python3}
d=build/demo/smoke
rm -rf $d && mkdir -p $d/corpus
[ -f build/demo/corpus/chat.jsonl ] || $py scripts/demo/corpus.py build/demo/corpus
head -300 build/demo/corpus/text.jsonl > $d/corpus/text.jsonl
head -300 build/demo/corpus/chat.jsonl > $d/corpus/chat.jsonl
$py scripts/demo/bpe.py train $d/corpus $d/tokenizer --vocab 512
$py scripts/demo/train.py --tiny --steps 30 --eval-every 15 --corpus $d/corpus --tokenizer $d/tokenizer \
    --out $d/out > $d/train.txt
m=$d/out/lean-demo.gguf
build/lean info $m | grep -E 'architecture|tensors|tokenizer|chat template'
build/lean run -q -m $m -p "A dog is" -n 8 > /dev/null
echo "What does ocean mean?" | build/lean chat -q -m $m -n 8 > /dev/null
$py scripts/demo/check_tokenizer.py $m $d/corpus
echo "smoke.sh: corpus -> tokenizer -> training -> GGUF -> lean run / chat: ok"
