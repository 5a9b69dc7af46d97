#!/bin/bash
# prepare.sh — everything the demo model's GPU run needs, made on the CPU machine:
#   1. the corpus from Debian's fortunes and wordnet-base (scripts/demo/corpus.py)
#   2. the tokenizer (scripts/demo/bpe.py; vocabulary 4096) and the tokenized corpus
#      (build/demo/tokenizer/tokens.npz, written by train.py's loader)
#
#   bash scripts/demo/prepare.sh                  (a few minutes; steps already done are kept)
#
# Needs: apt-get install -y fortunes fortunes-min wordnet-base python3-numpy. Tokenizing imports train.py,
# hence torch: Debian's python3-torch (1.13) is enough.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-/usr/bin/python3}
d=build/demo
[ -f $d/corpus/chat.jsonl ] || $py scripts/demo/corpus.py $d/corpus
[ -f $d/tokenizer/tokenizer.json ] || $py scripts/demo/bpe.py train $d/corpus $d/tokenizer --vocab 4096
[ -f $d/tokenizer/tokens.npz ] || $py -c "
import sys; sys.path.insert(0, 'scripts/demo')
import bpe, train
tr, va = train.load_stream('$d/corpus', '$d/tokenizer', bpe.Tokenizer('$d/tokenizer/tokenizer.json'))
print(f'$d/tokenizer/tokens.npz: {len(tr)} training tokens, {len(va)} held out')"
ls -la $d/tokenizer
