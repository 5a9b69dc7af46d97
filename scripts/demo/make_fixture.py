"""make_fixture.py — the transformers reference for the demo model (tests/data/fixtures/demo.txt),
in tests/fixture.h's format, so every backend's parity test holds lean to transformers on
trained weights as it does on the random fixture models.

    python3 scripts/demo/make_fixture.py models/lean-demo.gguf tests/data/fixtures/demo.txt

Needs torch, transformers and tokenizers (the GPU machine; CPU float32 is used, ~10 s).
transformers' LlamaForCausalLM gets the file's own weights (Q8_0 dequantized by scripts/quants.py,
attn_q / attn_k un-permuted: check_hf.hf_model). The prompt is the first 16 ids of the first text
below that passes make_fixtures.py's rules (no near-tie on the greedy path, a continuation that is
not one token repeated); the case records the greedy continuation, the top-21 logits at every
prompt position and after 1..32 decoded ids, and a second greedy run with transformers'
repetition penalty 1.3 (generate(repetition_penalty=1.3, do_sample=False)).
"""
import hashlib
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import bpe  # noqa: E402
import check_hf  # noqa: E402
import make_fixtures  # noqa: E402

PROMPTS = [
    "The meaning of life is not a question that can be answered by a dog, a cat or a man",
    "A dog is a member of the genus Canis that has been domesticated by man since prehistoric times",
    "Once upon a time there was a little girl who lived in a village near the forest",
    "You will be married within a year, and you will find that your life is full of surprises",
]
PENALTY = 1.3


def decode(tok, ids):
    """ids as text, for the console (byte-level BPE: each vocabulary string's chars are bytes)."""
    inv, char_byte = {i: t for t, i in tok.vocab.items()}, {c: b for b, c in bpe.BYTE_CHAR.items()}
    return bytes(char_byte[c] for i in ids for c in inv[i]).decode("utf-8", "replace")


def main():
    path, out = sys.argv[1], sys.argv[2]
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(4)
    _, hf = check_hf.hf_model(path)
    tok = bpe.Tokenizer(path)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    for text in PROMPTS:
        prompt = tok.encode(text)[:make_fixtures.N_PROMPT]
        assert len(prompt) == make_fixtures.N_PROMPT, f"{text!r} is under {make_fixtures.N_PROMPT} tokens"
        r, why = make_fixtures.reference(hf, prompt)
        if why is None:
            break
        print(f"make_fixture: {text!r}: {why}", flush=True)
    assert why is None, "no prompt passes"
    with torch.no_grad():
        gen = hf.generate(torch.tensor([prompt]), max_new_tokens=make_fixtures.N_GEN, do_sample=False,
                          repetition_penalty=PENALTY, eos_token_id=None, pad_token_id=0)
    penalized = [int(v) for v in gen[0, len(prompt):]]
    r["prompt"], r["sha256"], r["model"] = prompt, sha, os.path.relpath(path)
    result = dict(name="demo", arch="llama", tied=1, formats={"q8_0": r},
                  made_with=f"transformers {transformers.__version__}, torch {torch.__version__}")
    make_fixtures.write_text(out, result, penalty=(PENALTY, penalized))
    print(f"make_fixture: prompt {decode(tok, prompt)!r}\n  greedy    {decode(tok, r['continuation'])!r}\n"
          f"  penalized {decode(tok, penalized)!r}\n  min gap {r['min_gap']:.4f}; wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_fixture.py MODEL.gguf OUT.txt")
    np.random.seed(0)
    main()
