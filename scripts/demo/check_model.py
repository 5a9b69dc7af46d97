"""check_model.py — holds lean's greedy ids on the demo GGUF to train.py's torch model carrying
the same weights (the file's Q8_0 dequantized, attn_q / attn_k un-permuted), in float32.

    python3 scripts/demo/check_model.py MODEL.gguf [-n 32] [--backend cpu-ref]

For each prompt below: torch's greedy continuation of n ids against `lean run --exact
--greedy --ids`. A difference passes only where torch's top two logits are within 1e-3 (a
near-tie float32 summation order may decide either way: counted and printed); anything else
exits 1. This checks the export (tensor names, shapes, the RoPE permutation, tied output,
norms, the hyperparameter keys) as well as lean. Needs build/lean, torch, numpy.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import bpe  # noqa: E402
import gguf  # noqa: E402
import make_fixtures  # noqa: E402
import quants  # noqa: E402
import train  # noqa: E402

LEAN = os.path.join(HERE, "..", "..", "build", "lean")
PROMPTS = ["A dog is", "The meaning of life is", "To run is to", "Once upon a time, there was"]


def load(path):
    """train.Model holding the GGUF's weights as lean reads them."""
    kv, tensors, _ = gguf.read_gguf(path)
    c = dict(n_embd=kv["llama.embedding_length"], n_layer=kv["llama.block_count"],
             n_head=kv["llama.attention.head_count"], n_ff=kv["llama.feed_forward_length"],
             n_ctx=kv["llama.context_length"], n_vocab=len(kv["tokenizer.ggml.tokens"]),
             eps=kv["llama.attention.layer_norm_rms_epsilon"], rope_base=kv["llama.rope.freq_base"])
    model = train.Model(c)
    w = {}
    for t in tensors:
        raw = gguf.read_tensor_bytes(path, t)
        n = int(np.prod(t["ne"]))
        x = quants.dequantize(gguf.TYPE_NAMES[t["type"]], raw, n) if t["type"] != gguf.F32 else \
            np.frombuffer(raw, dtype="<f4")
        w[t["name"]] = np.asarray(x, dtype=np.float32).reshape(list(reversed(t["ne"])))
    names = {"embed.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}
    for i in range(c["n_layer"]):
        for ours, theirs in (("attn_norm", "attn_norm"), ("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"),
                             ("o", "attn_output"), ("ffn_norm", "ffn_norm"), ("gate", "ffn_gate"),
                             ("up", "ffn_up"), ("down", "ffn_down")):
            names[f"blocks.{i}.{ours}.weight"] = f"blk.{i}.{theirs}.weight"
    state = {}
    for ours, theirs in names.items():
        x = w[theirs]
        if theirs.endswith(("attn_q.weight", "attn_k.weight")):
            x = make_fixtures.unpermute(x, c["n_head"])
        state[ours] = torch.from_numpy(np.array(x))  # a writable copy
    model.load_state_dict(state)
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--backend", default="cpu-ref")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model = load(a.model)
    tok = bpe.Tokenizer(a.model)
    waived = 0
    for p in PROMPTS:
        ids = tok.encode(p)
        out = subprocess.run([LEAN, "run", "-q", "-m", a.model, "--backend", a.backend, "--exact", "--greedy",
                              "--ids", ",".join(map(str, ids)), "-n", str(a.n)],
                             capture_output=True, check=True, text=True).stdout
        got = [int(x) for x in out.split()]
        seq = list(ids)
        with torch.no_grad():
            for k, g in enumerate(got):
                logits = model(torch.tensor([seq]))[0, -1].double()
                top2 = torch.topk(logits, 2)
                want = int(top2.indices[0])
                if g != want:
                    margin = float(top2.values[0] - logits[g])
                    if margin > 1e-3:
                        print(f"check_model: {p!r} step {k}: lean {g}, torch {want} "
                              f"(torch's logit margin {margin:.4g})")
                        sys.exit(1)
                    waived += 1
                seq.append(g)                      # go on along lean's path
        print(f"{p!r} -> {len(got)} ids agree: {bytes(tok_bytes(tok, got)).decode('utf-8', 'replace')!r}")
    print(f"check_model: lean ({a.backend}, exact) and torch agree on {len(PROMPTS)} prompts x {a.n} greedy "
          f"ids ({waived} near-ties waived)")


def tok_bytes(tok, ids):
    inv = {i: t for t, i in tok.vocab.items()}
    char_byte = {ch: b for b, ch in bpe.BYTE_CHAR.items()}
    return [char_byte[ch] for i in ids for ch in inv[i] if ch in char_byte]


if __name__ == "__main__":
    main()
