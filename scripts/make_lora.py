#!/usr/bin/env python3
"""make_lora.py — random LoRA adapters in llama.cpp's GGUF format, and a numpy reference of
the forward pass with them, for lean's LoRA tests (docs/lora.md).

    python3 scripts/make_lora.py adapter MODEL.gguf OUT.gguf [--rank R] [--alpha A] [--seed S]
                                 [--type f32|f16] [--targets q,k,v,o,gate,up,down,output,embd]
        a random adapter for any model lean reads (its header names the weights and shapes)
    python3 scripts/make_lora.py adapters DIR        numpy only; `make test-data` runs it
        the test adapters of the parity fixtures (build/fixtures/NAME-f32.gguf) into DIR,
        checked against the SHA-256 that tests/data/lora/NAME.txt records
    python3 scripts/make_lora.py reference DIR       numpy only; writes tests/data/lora/NAME.txt
        the same adapters, and what numpy computes with them (float64): for each case the
        top-21 (id, logit) at prompt positions 4, 8 and 16 of the fixture's f32 prompt

The adapter file is what llama.cpp's convert_lora_to_gguf.py writes: general.type "adapter",
general.architecture the model's, adapter.type "lora", adapter.lora.alpha, and for each
adapted weight W (GGUF ne [cols, rows]) W.lora_a with ne [cols, rank] and W.lora_b with ne
[rank, rows]; the layer computes W x + s B (A x), s = scale * alpha / rank (scale when alpha
is 0). A is drawn with std 1 / sqrt(cols), B with std strength / (s sqrt(rank)) so that s B A
has entries of about strength / sqrt(cols), the size of the fixtures' own weights: an adapter
that moves the logits well past any tolerance (PEFT starts B at zero; a test adapter must not).
The embedding (target embd) is llama.cpp's flipped pair: token_embd.weight.lora_a with ne
[rank, n_vocab] (PEFT's lora_embedding_A transposed, as convert_lora_to_gguf.py writes it) and
lora_b with ne [rank, n_embd]; token t's embedding gets s B A[t] (llama.cpp's build_inp_embd,
PEFT's Embedding: lora_B @ lora_A[:, t] * scaling), and a tied output is not adapted by it. A
is drawn with std 1, B so that s B A[t] has entries of about strength / sqrt(n_embd).

The numpy forward is written from the math (forward_ref.c's header states it), not from lean's
code: RMSNorm, q/k/v (+ qwen2 biases, qwen3 per-head q/k norms), RoPE (llama: pairs (2i, 2i+1)
on the file's permuted rows, with rope_freqs; qwen: pairs (i, i + d/2)), causal grouped-query
attention, Wo, SwiGLU FFN, the final norm and the output (tied: token_embd).
"""
import argparse
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402

SLOTS = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output", "gate": "ffn_gate",
         "up": "ffn_up", "down": "ffn_down"}
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "lora")
FIXTURES = ["llama", "llama-tied", "qwen2", "qwen2-untied", "qwen3", "qwen3-tied"]
# The test cases: (adapter label, rank, alpha, type, targets, seed offset); CASES: (name, [(label, scale)])
ADAPTERS = [("a", 8, 16.0, "f32", "q,k,v,o,gate,up,down,output", 0),
            ("b", 4, 0.0, "f16", "q,v,down,output,embd", 1),
            ("e", 8, 4.0, "f16", "embd,k,up", 2)]
CASES = [("a", [("a", 1.0)]), ("ab", [("a", 0.75), ("b", -0.5)]), ("eb", [("e", 1.0), ("b", 0.5)])]
POSITIONS = [4, 8, 16]
TOPK = 21


def read_model(path):
    kv, tensors, _ = gguf.read_gguf(path)
    return kv, {t["name"]: t for t in tensors}


def weight_names(kv, tensors, targets):
    arch = kv["general.architecture"]
    n_layer = kv[f"{arch}.block_count"]
    names = []
    for il in range(n_layer):
        for t in targets:
            if t in SLOTS:
                names.append(f"blk.{il}.{SLOTS[t]}.weight")
    if "output" in targets and "output.weight" in tensors:
        names.append("output.weight")
    return names


def make_adapter(model_path, out_path, rank, alpha, seed, ttype, targets, strength=0.5):
    kv, tensors = read_model(model_path)
    rng = np.random.RandomState(seed)
    w = gguf.GGUFWriter()
    w.add_string("general.architecture", kv["general.architecture"])
    w.add_string("general.type", "adapter")
    w.add_string("general.name", f"lean test LoRA rank {rank}")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", alpha)
    s = alpha / rank if alpha else 1.0
    dt, tid = (np.float32, gguf.F32) if ttype == "f32" else (np.float16, gguf.F16)
    if "embd" in targets.split(","):
        d, n_vocab = tensors["token_embd.weight"]["ne"][:2]
        a = rng.standard_normal((n_vocab, rank)).astype(dt)
        b = (rng.standard_normal((d, rank)) * strength / (s * np.sqrt(rank) * np.sqrt(d))).astype(dt)
        w.add_tensor("token_embd.weight.lora_a", tid, [rank, n_vocab], a.tobytes())
        w.add_tensor("token_embd.weight.lora_b", tid, [rank, d], b.tobytes())
    for name in weight_names(kv, tensors, targets.split(",")):
        cols, rows = tensors[name]["ne"][:2]
        a = (rng.standard_normal((rank, cols)) / np.sqrt(cols)).astype(dt)
        b = (rng.standard_normal((rows, rank)) * strength / (s * np.sqrt(rank))).astype(dt)
        w.add_tensor(name + ".lora_a", tid, [cols, rank], a.tobytes())
        w.add_tensor(name + ".lora_b", tid, [rank, rows], b.tobytes())
    w.write(out_path)
    with open(out_path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def load_f(path, t):
    raw = gguf.read_tensor_bytes(path, t)
    dt = {gguf.F32: np.float32, gguf.F16: np.float16}[t["type"]]
    return np.frombuffer(raw, dtype=dt).astype(np.float64).reshape(list(reversed(t["ne"][:t["n_dims"]])))


def load_adapter(path):
    kv, tensors = read_model(path)
    alpha = kv.get("adapter.lora.alpha", 0.0)
    pairs = {}
    for name, t in tensors.items():
        base, part = name.rsplit(".", 1)
        pairs.setdefault(base, {})[part] = load_f(path, t)
    return alpha, pairs


def forward(model_path, ids, loras):
    """Logits (len(ids), n_vocab) in float64; loras: [(alpha, pairs, scale)]."""
    kv, tensors = read_model(model_path)
    arch = kv["general.architecture"]
    W = {n: load_f(model_path, t) for n, t in tensors.items()}
    g = lambda k, d=None: kv.get(f"{arch}.{k}", d)  # noqa: E731
    n_layer, n_head, n_kv = g("block_count"), g("attention.head_count"), g("attention.head_count_kv")
    d = g("embedding_length")
    hd = g("attention.key_length", d // n_head)
    eps, base = g("attention.layer_norm_rms_epsilon"), g("rope.freq_base")

    def mm(x, name):
        y = x @ W[name].T
        for alpha, pairs, scale in loras:
            p = pairs.get(name)
            if p is not None:
                rank = p["lora_a"].shape[0]
                s = scale * alpha / rank if alpha else scale
                y = y + s * ((x @ p["lora_a"].T) @ p["lora_b"].T)
        return y

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

    n = len(ids)
    half = hd // 2
    theta = np.arange(n)[:, None] * base ** (-2.0 * np.arange(half) / hd)[None, :]
    if "rope_freqs.weight" in W:
        theta = theta / W["rope_freqs.weight"][None, :]
    cos, sin = np.cos(theta), np.sin(theta)

    def rope(x):  # x (n, heads, hd)
        if arch == "llama":
            x0, x1 = x[..., 0::2], x[..., 1::2]
        else:
            x0, x1 = x[..., :half], x[..., half:]
        c, s_ = cos[:, None, :], sin[:, None, :]
        r0, r1 = x0 * c - x1 * s_, x0 * s_ + x1 * c
        out = np.empty_like(x)
        if arch == "llama":
            out[..., 0::2], out[..., 1::2] = r0, r1
        else:
            out[..., :half], out[..., half:] = r0, r1
        return out

    x = W["token_embd.weight"][ids]
    for alpha, pairs, scale in loras:  # the embedding's flipped pair: A (n_vocab, rank), B (n_embd, rank)
        p = pairs.get("token_embd.weight")
        if p is not None:
            rank = p["lora_a"].shape[1]
            s = scale * alpha / rank if alpha else scale
            x = x + s * (p["lora_a"][ids] @ p["lora_b"].T)
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for il in range(n_layer):
        p = f"blk.{il}."
        xn = rms(x, W[p + "attn_norm.weight"])
        q, k, v = mm(xn, p + "attn_q.weight"), mm(xn, p + "attn_k.weight"), mm(xn, p + "attn_v.weight")
        if p + "attn_q.bias" in W and arch == "qwen2":
            q, k, v = q + W[p + "attn_q.bias"], k + W[p + "attn_k.bias"], v + W[p + "attn_v.bias"]
        q, k, v = q.reshape(n, n_head, hd), k.reshape(n, n_kv, hd), v.reshape(n, n_kv, hd)
        if arch == "qwen3":
            q, k = rms(q, W[p + "attn_q_norm.weight"]), rms(k, W[p + "attn_k_norm.weight"])
        q, k = rope(q), rope(k)
        att = np.empty((n, n_head, hd))
        for h in range(n_head):
            kh = h // (n_head // n_kv)
            sc = q[:, h, :] @ k[:, kh, :].T / np.sqrt(hd) + mask
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            sc /= sc.sum(axis=1, keepdims=True)
            att[:, h, :] = sc @ v[:, kh, :]
        x = x + mm(att.reshape(n, n_head * hd), p + "attn_output.weight")
        xn = rms(x, W[p + "ffn_norm.weight"])
        gt, up = mm(xn, p + "ffn_gate.weight"), mm(xn, p + "ffn_up.weight")
        x = x + mm(gt / (1.0 + np.exp(-gt)) * up, p + "ffn_down.weight")
    xn = rms(x, W["output_norm.weight"])
    return mm(xn, "output.weight") if "output.weight" in W else xn @ W["token_embd.weight"].T


def fixture_prompt(name):
    with open(os.path.join(HERE, "..", "tests", "data", "fixtures", f"{name}.txt")) as fh:
        fmt = None
        for line in fh:
            f = line.split()
            if f and f[0] == "format":
                fmt = f[1]
            if f and f[0] == "prompt" and fmt == "f32":
                return [int(i) for i in f[2:]]
    raise SystemExit(f"{name}: no f32 prompt in tests/data/fixtures/{name}.txt")


def make_adapters(outdir, fixtures_dir):
    os.makedirs(outdir, exist_ok=True)
    made = {}
    for k, name in enumerate(FIXTURES):
        model = os.path.join(fixtures_dir, f"{name}-f32.gguf")
        for label, rank, alpha, ttype, targets, off in ADAPTERS:
            path = os.path.join(outdir, f"{name}-{label}.gguf")
            made[name, label] = make_adapter(model, path, rank, alpha, 777 + 10 * k + off, ttype, targets)
    return made


def recorded(name):
    out = {}
    with open(os.path.join(DATA, f"{name}.txt")) as fh:
        for line in fh:
            f = line.split()
            if f and f[0] == "adapter":
                out[f[1]] = f[2]
    return out


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("adapter")
    a.add_argument("model")
    a.add_argument("out")
    a.add_argument("--rank", type=int, default=8)
    a.add_argument("--alpha", type=float, default=16.0)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--type", choices=["f32", "f16"], default="f32")
    a.add_argument("--targets", default="q,k,v,o,gate,up,down,output")
    a.add_argument("--strength", type=float, default=0.5)
    for c in ("adapters", "reference"):
        s = sub.add_parser(c)
        s.add_argument("dir")
        s.add_argument("--fixtures", default="build/fixtures")
    args = ap.parse_args()
    if args.cmd == "adapter":
        print(make_adapter(args.model, args.out, args.rank, args.alpha, args.seed, args.type, args.targets,
                           args.strength))
        return
    made = make_adapters(args.dir, args.fixtures)
    if args.cmd == "adapters":
        bad = [f"{n}-{lb}.gguf: sha256 {h}, reference made from {recorded(n).get(lb)}"
               for (n, lb), h in made.items() if recorded(n).get(lb) != h]
        if bad:
            raise SystemExit("make_lora.py: adapters differ from the reference's:\n  " + "\n  ".join(bad))
        return
    os.makedirs(DATA, exist_ok=True)
    for name in FIXTURES:
        model = os.path.join(args.fixtures, f"{name}-f32.gguf")
        ids = fixture_prompt(name)
        ad = {lb: load_adapter(os.path.join(args.dir, f"{name}-{lb}.gguf")) for lb, *_ in ADAPTERS}
        lines = [f"# numpy (float64) reference of {name}-f32.gguf with LoRA; made by scripts/make_lora.py "
                 f"with numpy {np.__version__}",
                 f"model {name}-f32.gguf"]
        for lb, *_ in ADAPTERS:
            lines.append(f"adapter {lb} {made[name, lb]}")
        lines.append("prompt %d %s" % (len(ids), " ".join(map(str, ids))))
        for cname, terms in CASES:
            loras = [(ad[lb][0], ad[lb][1], sc) for lb, sc in terms]
            logits = forward(model, ids, loras)
            lines.append("case %s %d %s" % (cname, len(terms), " ".join(f"{lb}:{sc!r}" for lb, sc in terms)))
            for pos in POSITIONS:
                row = logits[pos - 1]
                top = np.argsort(-row, kind="stable")[:TOPK]
                lines.append("logits %d %d %s" % (pos, TOPK, " ".join(f"{i}:{row[i]:.9g}" for i in top)))
        lines.append("end")
        with open(os.path.join(DATA, f"{name}.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"{name}: written")


if __name__ == "__main__":
    main()
