#!/usr/bin/env python3
"""tokenizer_to_gguf.py — a tokenizer as a "vocab GGUF": a GGUF file holding only the
tokenizer.* keys, written as llama.cpp's convert_hf_to_gguf.py writes them for byte-level
BPE ("gpt2") tokenizers. lean's generator copies these keys into the models it makes
(lean_gen_params.vocab_path), so random-weight models carry a real vocabulary.

Two sources:

  A Hugging Face tokenizer.json (+ tokenizer_config.json):
    tokenizer_to_gguf.py --tokenizer-json T.json [--tokenizer-config C.json] --pre qwen2 OUT.gguf

  A SentencePiece-style tokenizer.json (BPE with byte_fallback and a "\u2581" Prepend/Metaspace
  normalizer, as transformers writes Llama 2's) becomes a "llama" vocabulary; --pre is not used:
    tokenizer_to_gguf.py --tokenizer-json T.json [--tokenizer-config C.json] OUT.gguf

  GPT-2's own files (encoder.json + vocab.bpe), optionally cut to n tokens and with
  special tokens put first (the way SmolLM2 lays its vocabulary out):
    tokenizer_to_gguf.py --gpt2-encoder encoder.json --gpt2-merges vocab.bpe \\
        --specials "<|endoftext|>,<|im_start|>,<|im_end|>" --n-tokens 49152 --pre smollm OUT.gguf

What is written, following convert_hf_to_gguf.py (TextModel.get_vocab_base, _set_vocab_gpt2)
and gguf-py's SpecialVocab:
  tokenizer.ggml.model       "gpt2"
  tokenizer.ggml.pre         --pre (llama.cpp picks its pre-tokenizer regex by this name:
                             "qwen2", "llama-bpe", "smollm", "gpt-2", ...; the converter
                             finds it by hashing a test tokenization, which needs the
                             tokenizer library, so it is given here)
  tokenizer.ggml.tokens      string[n]: the vocabulary by id; ids without a token
                             (or beyond the tokenizer, up to --n-tokens) are "[PAD<id>]"
  tokenizer.ggml.token_type  i32[n]: 1 normal, 3 control (added tokens marked special, or
                             that look special: <|...|>), 4 user-defined (other added
                             tokens), 5 unused ([PAD<id>])
  tokenizer.ggml.merges      string[]: "left right", in rank order
  tokenizer.ggml.{bos,eos,padding,unknown}_token_id  u32, from tokenizer_config.json's
                             bos_token / eos_token / pad_token / unk_token (or --bos ...)
  tokenizer.ggml.add_bos_token / add_eos_token  bool: tokenizer_config.json's add_bos_token
                             / add_eos_token, else whether tokenizer.json's TemplateProcessing
                             post-processor puts the bos (eos) token around a sequence
  tokenizer.chat_template    tokenizer_config.json's chat_template (named templates: the
                             "default" one here, the others as tokenizer.chat_template.<name>)
  tokenizer.lean.source      where the vocabulary came from (--source), for the record

For a "llama" (SentencePiece) vocabulary, as convert_hf_to_gguf.py's _set_vocab_sentencepiece
writes it, there are no merges and no pre; instead:
  tokenizer.ggml.scores      f32[n]: the merge priority SentencePiece's BPE uses (the highest
                             score merges first). tokenizer.json has no scores, only the merge
                             list, so a token made by merges gets -(rank of its first merge):
                             merging by score then merges in HF's rank order. Control, unknown
                             and byte tokens get 0 (as in SentencePiece models), tokens no merge
                             makes (single characters) -(n_merges + id).
  tokenizer.ggml.token_type  1 normal, 2 unknown (the unk token), 3 control (special added
                             tokens), 4 user-defined, 6 byte (<0x00>..<0xFF>)
  tokenizer.ggml.add_space_prefix  bool: true when the normalizer prepends "\u2581"

Plain python3, stdlib only (json, argparse; scripts/gguf.py writes the file).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def looks_special(tok):
    """convert_hf_to_gguf.py's does_token_look_special, for the byte-level vocabularies."""
    return (tok in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (tok.startswith("<|") and tok.endswith("|>"))
            or (tok.startswith("<\uff5c") and tok.endswith("\uff5c>"))
            or tok.startswith("<start_of_") or tok.startswith("<end_of_"))


def token_text(entry):
    """tokenizer_config.json's bos_token etc.: a string, an AddedToken dict, or null."""
    if isinstance(entry, dict):
        return entry.get("content")
    return entry


def is_sentencepiece(tj):
    """transformers' Llama 2 style: BPE with byte_fallback over "\u2581"-escaped text."""
    model = tj.get("model", {})
    if model.get("type") != "BPE" or not model.get("byte_fallback"):
        return False
    text = json.dumps([tj.get("normalizer"), tj.get("pre_tokenizer")])
    return "Prepend" in text or "Metaspace" in text


def from_sentencepiece_json(tj):
    """tokens, types, scores and add_space_prefix of a SentencePiece-style tokenizer.json."""
    model = tj["model"]
    id_to_tok = {i: t for t, i in model["vocab"].items()}
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    for i, a in added.items():
        id_to_tok[i] = a["content"]
    n = max(id_to_tok) + 1
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    first_rank = {}
    for rank, m in enumerate(merges):
        a, b = m.split(" ", 1)
        first_rank.setdefault(a + b, rank)
    unk = model.get("unk_token")
    tokens, types, scores = [], [], []
    for i in range(n):
        if i not in id_to_tok:
            tokens.append(f"[PAD{i}]"), types.append(UNUSED), scores.append(0.0)
            continue
        tok = id_to_tok[i]
        tokens.append(tok)
        if tok == unk:
            types.append(UNKNOWN), scores.append(0.0)
        elif i in added:
            types.append(CONTROL if added[i].get("special") else USER_DEFINED), scores.append(0.0)
        elif len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
            types.append(BYTE), scores.append(0.0)
        else:
            types.append(NORMAL)
            scores.append(-float(first_rank[tok]) if tok in first_rank else -float(len(merges) + i))
    norm = json.dumps(tj.get("normalizer"))
    pre = tj.get("pre_tokenizer") or {}
    add_space_prefix = "Prepend" in norm or (pre.get("type") == "Metaspace" and
                                             pre.get("prepend_scheme", "always") != "never")
    return tokens, types, scores, add_space_prefix


def from_tokenizer_json(tj, n_tokens):
    model = tj.get("model", {})
    if model.get("type") != "BPE":
        raise SystemExit(f"tokenizer.json model type {model.get('type')!r}: only byte-level BPE is supported")
    id_to_tok = {i: t for t, i in model["vocab"].items()}
    added = {}
    for a in tj.get("added_tokens", []):
        id_to_tok[a["id"]] = a["content"]
        added[a["id"]] = a
    n = max(id_to_tok) + 1
    if n_tokens:
        if n_tokens < n:
            raise SystemExit(f"--n-tokens {n_tokens} is below the tokenizer's {n} ids")
        n = n_tokens
    tokens, types = [], []
    for i in range(n):
        if i not in id_to_tok:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
            continue
        tok = id_to_tok[i]
        if i in added:
            types.append(CONTROL if added[i].get("special") or looks_special(tok) else USER_DEFINED)
        else:
            types.append(NORMAL)
        tokens.append(tok)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return tokens, types, merges


def template_adds(tj, which):
    """Whether tokenizer.json's TemplateProcessing puts a special token first (which='bos')
    or last (which='eos') in a single sequence; None when there is no such processor."""
    post = tj.get("post_processor") or {}
    procs = post.get("processors", [post]) if post.get("type") == "Sequence" else [post]
    for p in procs:
        if p.get("type") != "TemplateProcessing":
            continue
        single = p.get("single", [])
        if not single:
            return False
        item = single[0] if which == "bos" else single[-1]
        return "SpecialToken" in item
    return None


def from_gpt2(encoder_path, merges_path, specials, n_tokens):
    with open(encoder_path, encoding="utf-8") as f:
        enc = json.load(f)
    with open(merges_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    all_merges = [ln for ln in lines if ln and not ln.startswith("#version")]
    by_id = [t for t, _ in sorted(enc.items(), key=lambda kv: kv[1])]
    tokens = list(specials) + [t for t in by_id if t not in specials]
    if n_tokens:
        if n_tokens > len(tokens):
            raise SystemExit(f"--n-tokens {n_tokens} is more than the {len(tokens)} tokens there are")
        tokens = tokens[:n_tokens]
    kept = set(tokens)
    merges = []
    for m in all_merges:
        a, b = m.split(" ")
        if a in kept and b in kept and a + b in kept:
            merges.append(m)
    types = [CONTROL if i < len(specials) else NORMAL for i in range(len(tokens))]
    # every kept token longer than one byte-character must come from a kept merge
    made = {m.replace(" ", "", 1) for m in merges}
    orphans = [t for t in tokens[len(specials):] if len(t) > 1 and t not in made and t not in specials]
    if orphans:
        raise SystemExit(f"{len(orphans)} tokens have no merge, e.g. {orphans[:3]}")
    return tokens, types, merges


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokenizer-json")
    ap.add_argument("--tokenizer-config")
    ap.add_argument("--gpt2-encoder")
    ap.add_argument("--gpt2-merges")
    ap.add_argument("--specials", default="", help="gpt2 mode: comma-separated special tokens, given the first ids")
    ap.add_argument("--n-tokens", type=int, default=0, help="gpt2 mode: keep this many tokens (merges in rank "
                    "order); tokenizer.json mode: pad with [PAD<id>] up to this many")
    ap.add_argument("--pre", help="tokenizer.ggml.pre (llama.cpp's pre-tokenizer name); required for gpt2 vocabularies")
    ap.add_argument("--bos"), ap.add_argument("--eos"), ap.add_argument("--pad"), ap.add_argument("--unk")
    ap.add_argument("--add-bos", choices=["true", "false"])
    ap.add_argument("--add-eos", choices=["true", "false"])
    ap.add_argument("--chat-template-file")
    ap.add_argument("--source", default="", help="tokenizer.lean.source: where this vocabulary came from")
    a = ap.parse_args()

    cfg, tj = {}, {}
    spm = None  # (scores, add_space_prefix) for a "llama" vocabulary
    if a.tokenizer_json:
        with open(a.tokenizer_json, encoding="utf-8") as f:
            tj = json.load(f)
        if a.tokenizer_config:
            with open(a.tokenizer_config, encoding="utf-8") as f:
                cfg = json.load(f)
        if is_sentencepiece(tj):
            tokens, types, scores, add_space_prefix = from_sentencepiece_json(tj)
            merges, spm = [], (scores, add_space_prefix)
        else:
            tokens, types, merges = from_tokenizer_json(tj, a.n_tokens)
    elif a.gpt2_encoder and a.gpt2_merges:
        specials = [s for s in a.specials.split(",") if s]
        tokens, types, merges = from_gpt2(a.gpt2_encoder, a.gpt2_merges, specials, a.n_tokens)
    else:
        ap.error("give --tokenizer-json, or --gpt2-encoder and --gpt2-merges")

    index = {}
    for i, t in enumerate(tokens):
        if t in index:
            raise SystemExit(f"duplicate token {t!r} at ids {index[t]} and {i}")
        index[t] = i

    w = gguf.GGUFWriter()
    if spm:
        w.add_string("tokenizer.ggml.model", "llama")
        w.add_array("tokenizer.ggml.tokens", tokens, gguf.STRING)
        w.add_array("tokenizer.ggml.scores", spm[0], gguf.FLOAT32)
        w.add_array("tokenizer.ggml.token_type", types, gguf.INT32)
        w.add_bool("tokenizer.ggml.add_space_prefix", spm[1])
    else:
        if not a.pre:
            ap.error("--pre is required for a byte-level BPE (gpt2) vocabulary")
        w.add_string("tokenizer.ggml.model", "gpt2")
        w.add_string("tokenizer.ggml.pre", a.pre)
        w.add_array("tokenizer.ggml.tokens", tokens, gguf.STRING)
        w.add_array("tokenizer.ggml.token_type", types, gguf.INT32)
        w.add_array("tokenizer.ggml.merges", merges, gguf.STRING)
    for role, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("unk", "unknown_token_id"),
                      ("pad", "padding_token_id")):
        text = getattr(a, role) or token_text(cfg.get(f"{role}_token"))
        if text is None:
            continue
        if text not in index:
            raise SystemExit(f"{role} token {text!r} is not in the vocabulary")
        w.add_uint32(f"tokenizer.ggml.{key}", index[text])
    for role in ("bos", "eos"):
        flag = getattr(a, f"add_{role}")
        value = (flag == "true") if flag else cfg.get(f"add_{role}_token")
        if value is None and tj:
            value = template_adds(tj, role)
        if value is not None:
            w.add_bool(f"tokenizer.ggml.add_{role}_token", bool(value))
    template = cfg.get("chat_template")
    if a.chat_template_file:
        with open(a.chat_template_file, encoding="utf-8") as f:
            template = f.read()
    if isinstance(template, list):
        for t in template:
            name = t.get("name", "default")
            w.add_string("tokenizer.chat_template" if name == "default" else f"tokenizer.chat_template.{name}",
                         t["template"])
    elif template:
        w.add_string("tokenizer.chat_template", template)
    if a.source:
        w.add_string("tokenizer.lean.source", a.source)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    w.write(a.out)
    n_ctl = sum(1 for t in types if t == CONTROL)
    if spm:
        print(f"{a.out}: {len(tokens)} tokens ({n_ctl} control), model llama, add_space_prefix {spm[1]}")
    else:
        print(f"{a.out}: {len(tokens)} tokens ({n_ctl} control), {len(merges)} merges, pre {a.pre}")


if __name__ == "__main__":
    main()
