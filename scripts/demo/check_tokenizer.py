"""check_tokenizer.py — holds lean's tokenizer and chat template, as the demo GGUF carries them,
to the ids the model was trained on (bpe.py's encoder, its chat rendering), bpe.py reading
the vocabulary and merges from the GGUF itself.

    python3 scripts/demo/check_tokenizer.py MODEL.gguf CORPUS_DIR [--docs 200]

For the first --docs documents of CORPUS_DIR/text.jsonl: `lean tokenize --no-bos` must give
bpe.Tokenizer's ids. For the first --docs chats of chat.jsonl: `lean template
--add-generation-prompt` on the user turn, tokenized with --parse-special, must give
bpe.py's render_chat ids plus <|im_start|> "assistant\\n" (what the model saw before every
answer). Exits 1 on the first difference, printing both. Needs build/lean.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402

LEAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "lean")


def lean_ids(model, text, special):
    cmd = [LEAN, "tokenize", "-m", model, "--no-bos", "-f", "-"] + (["--parse-special"] if special else [])
    out = subprocess.run(cmd, input=text.encode(), capture_output=True, check=True).stdout
    return [int(x) for x in out.split()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("corpus_dir")
    ap.add_argument("--docs", type=int, default=200)
    a = ap.parse_args()
    tok = bpe.Tokenizer(a.model)
    with open(os.path.join(a.corpus_dir, "text.jsonl")) as f:
        docs = [json.loads(next(f)) for _ in range(a.docs)]
    with open(os.path.join(a.corpus_dir, "chat.jsonl")) as f:
        chats = [json.loads(next(f)) for _ in range(a.docs)]
    # one lean call for all documents, each ended by <|endoftext|> as in training
    eot = tok.special["<|endoftext|>"]
    want = [i for d in docs for i in tok.encode(d) + [eot]]
    got = lean_ids(a.model, "".join(d + "<|endoftext|>" for d in docs), True)
    check("text", want, got)
    for c in chats:
        user = c[:1]
        text = subprocess.run([LEAN, "template", "-m", a.model, "--add-generation-prompt"],
                              input=json.dumps(user).encode(), capture_output=True, check=True).stdout.decode()
        want = tok.render_chat(user) + [tok.special["<|im_start|>"]] + tok.encode("assistant\n")
        check(f"chat {user[0]['content']!r}", want, lean_ids(a.model, text, True))
    print(f"check_tokenizer: lean agrees with bpe.py on {len(docs)} documents and {len(chats)} chat prompts")


def check(what, want, got):
    if want != got:
        k = next((i for i, (x, y) in enumerate(zip(want, got)) if x != y), min(len(want), len(got)))
        print(f"check_tokenizer: {what}: lean differs at id {k}: bpe.py {want[k:k + 8]}, lean {got[k:k + 8]}")
        sys.exit(1)


if __name__ == "__main__":
    main()
