"""bpe.py — the demo model's tokenizer: byte-level BPE (GPT-2's scheme) trained on the corpus.

    python3 scripts/demo/bpe.py train CORPUS_DIR TOKENIZER_DIR [--vocab 4096]
        reads CORPUS_DIR/text.jsonl and chat.jsonl (corpus.py), writes TOKENIZER_DIR/tokenizer.json
        and tokenizer_config.json, as Hugging Face tokenizers reads them (a ByteLevel
        pre-tokenizer with GPT-2's regex, a BPE model, three special tokens).

    import bpe; tok = bpe.Tokenizer("TOKENIZER_DIR/tokenizer.json"); tok.encode("Hi there")

What is chosen, and why:
  * byte-level BPE with GPT-2's pre-tokenizer ("gpt-2" in lean and llama.cpp): every byte is a
    token, so nothing is unknown; lean implements it (src/text/tokenizer_bpe.c).
  * The corpus is ASCII (corpus.py makes it so), so GPT-2's regex (\\p{L}, \\p{N}) is the
    ASCII regex below with Python's re: encoding here agrees with lean's and HF's.
  * Specials first (ids 0-2): <|endoftext|> ends every document, <|im_start|> / <|im_end|>
    frame chat turns (ChatML). Then the 256 byte characters, then the merges in rank order.
  * Merge selection: the most frequent adjacent pair over the word counts, ties broken by the
    pair's strings (smallest first), so a run is deterministic. Incremental pair counts and a
    heap: O(words holding the pair x log pairs) per merge.

Plain python3 (stdlib only), so the same file runs here and on the GPU machine.
"""
import argparse
import collections
import heapq
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gguf  # noqa: E402  (scripts/gguf.py)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# GPT-2's pre-tokenizer regex, ASCII classes ('s|'t|... ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)
PRE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")

# ChatML without a default system turn: the template the chat data is written in (train.py).
CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
                 "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (openai/gpt-2 encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_CHAR = bytes_to_unicode()
ASCII_CHAR = str.maketrans({b: BYTE_CHAR[b] for b in range(128)})  # the same map, fast for ASCII


def words(text):
    """The pre-tokenized words of text, each as its byte characters."""
    return [w.translate(ASCII_CHAR) if w.isascii() else "".join(BYTE_CHAR[b] for b in w.encode("utf-8"))
            for w in PRE.findall(text)]


def train(texts, vocab_size):
    """Merges (list of (a, b)) learned from an iterable of strings, up to vocab_size tokens."""
    counts = collections.Counter()
    for t in texts:
        counts.update(words(t))
    syms = [list(w) for w in counts]              # each unique word as its current symbols
    freq = list(counts.values())
    pairs = collections.Counter()                  # pair -> count over all words
    where = collections.defaultdict(set)           # pair -> indices of words holding it
    for i, s in enumerate(syms):
        for p in zip(s, s[1:]):
            pairs[p] += freq[i]
            where[p].add(i)
    heap = [(-n, p) for p, n in pairs.items()]     # stale entries are skipped when popped
    heapq.heapify(heap)
    merges = []
    n_merges = vocab_size - len(SPECIALS) - 256
    while len(merges) < n_merges and heap:
        n, best = heapq.heappop(heap)
        if pairs.get(best, 0) != -n:
            continue
        if -n < 2:
            break
        merges.append(best)
        a, b = best
        for i in list(where[best]):
            s, f = syms[i], freq[i]
            for p in zip(s, s[1:]):                # drop this word's pairs, re-add after merging
                pairs[p] -= f
                if pairs[p] <= 0:
                    del pairs[p]
                where[p].discard(i)
            out, k = [], 0
            while k < len(s):
                if k + 1 < len(s) and s[k] == a and s[k + 1] == b:
                    out.append(a + b)
                    k += 2
                else:
                    out.append(s[k])
                    k += 1
            syms[i] = out
            for p in zip(out, out[1:]):
                pairs[p] += f
                where[p].add(i)
            for p in set(zip(s, s[1:])) | set(zip(out, out[1:])):
                if p in pairs:
                    heapq.heappush(heap, (-pairs[p], p))
        where.pop(best, None)
    return merges


def tokenizer_json(merges):
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    for b in range(256):
        vocab[BYTE_CHAR[b]] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    return {
        "version": "1.0",
        "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(SPECIALS)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }


def tokenizer_config():
    return {"add_bos_token": False, "add_eos_token": False, "bos_token": "<|endoftext|>",
            "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
            "chat_template": CHAT_TEMPLATE, "model_max_length": 512,
            "tokenizer_class": "PreTrainedTokenizerFast"}


class Tokenizer:
    """Encodes text with a tokenizer.json written by train(), or with the tokenizer a GGUF
    carries (path ending in .gguf); specials are given as ids by the caller (train.py),
    never parsed out of text."""

    def __init__(self, path):
        if path.endswith(".gguf"):
            kv, _, _ = gguf.read_gguf(path)
            self.vocab = {t: i for i, t in enumerate(kv["tokenizer.ggml.tokens"])}
            merges = [m.split(" ", 1) for m in kv["tokenizer.ggml.merges"]]
        else:
            with open(path, encoding="utf-8") as f:
                tj = json.load(f)
            self.vocab = tj["model"]["vocab"]
            merges = tj["model"]["merges"]
        self.rank = {tuple(m): r for r, m in enumerate(merges)}
        self.special = {t: self.vocab[t] for t in SPECIALS}
        self.cache = {}

    def render_chat(self, messages):
        """ids of messages as CHAT_TEMPLATE renders them, specials as ids (as lean tokenizes)."""
        s = self.special
        ids = []
        for m in messages:
            ids += [s["<|im_start|>"]] + self.encode(m["role"] + "\n" + m["content"]) + [s["<|im_end|>"]]
            ids += self.encode("\n")
        return ids

    def _word(self, w):
        s = list(w)
        while len(s) > 1:
            best = min(range(len(s) - 1), key=lambda k: self.rank.get((s[k], s[k + 1]), 1 << 30))
            if (s[best], s[best + 1]) not in self.rank:
                break
            s[best:best + 2] = [s[best] + s[best + 1]]
        return [self.vocab[t] for t in s]

    def encode(self, text):
        ids = []
        for w in words(text):
            got = self.cache.get(w)
            if got is None:
                got = self.cache[w] = self._word(w)
            ids.extend(got)
        return ids


def read_corpus(corpus_dir):
    """The strings the tokenizer is trained on: every document and every chat turn."""
    with open(os.path.join(corpus_dir, "text.jsonl"), encoding="ascii") as f:
        docs = [json.loads(line) for line in f]
    with open(os.path.join(corpus_dir, "chat.jsonl"), encoding="ascii") as f:
        for line in f:
            docs.extend(m["content"] for m in json.loads(line))
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["train"])
    ap.add_argument("corpus_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--vocab", type=int, default=4096)
    a = ap.parse_args()
    docs = read_corpus(a.corpus_dir)
    merges = train(docs, a.vocab)
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(merges), f, ensure_ascii=False)
    with open(os.path.join(a.out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(), f, indent=1)
    n_bytes = sum(len(d) for d in docs)
    tok = Tokenizer(os.path.join(a.out_dir, "tokenizer.json"))
    n_tok = sum(len(tok.encode(d)) for d in docs)
    print(f"{a.out_dir}: {len(SPECIALS) + 256 + len(merges)} tokens, {len(merges)} merges; "
          f"{n_bytes} bytes -> {n_tok} tokens ({n_bytes / max(n_tok, 1):.2f} bytes/token)")


if __name__ == "__main__":
    main()
