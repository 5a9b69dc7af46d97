"""train.py — trains the demo model (llama architecture) and writes it as a GGUF.

    python3 scripts/demo/train.py --corpus build/demo/corpus --tokenizer build/demo/tokenizer \\
        --out OUT_DIR [--minutes 9] [--steps N] [--seed 1] [--tiny]

Reads corpus.py's text.jsonl / chat.jsonl and bpe.py's tokenizer.json; writes to OUT_DIR:
  lean-demo.gguf   the model: Q8_0 matrices, F32 norms, the tokenizer and chat template
  train_log.tsv    step, tokens seen, learning rate, train loss, validation loss, seconds
  run.json         the shape, the step count actually run, the best validation loss, timings

The model (why this shape: docs/demo_model.md): d_model 384, 10 layers, 6 heads of 64, SwiGLU
1024, vocabulary 4096, tied embeddings, context 512, RMSNorm eps 1e-5, RoPE base 10000: 19.3 M
parameters, ~21 MB as Q8_0. The math is Hugging Face's LlamaForCausalLM (rotate_half RoPE);
the export permutes attn_q / attn_k rows for GGUF's interleaved RoPE as llama.cpp does.

Training: AdamW (0.9, 0.95), weight decay 0.1 on matrices, peak lr 1e-3, 200 warm-up steps,
cosine to 10%; batches of 128 x 512 tokens drawn at seeded random offsets of one token stream
(every document ends with <|endoftext|>; chats are rendered with the ChatML template); bf16
autocast and torch.compile on CUDA. Steps: --epochs passes over the data (default 20: the
corpus is small, so more would only memorize it), fewer if --minutes runs out first (the count
is fixed from the speed of steps 20-60 and printed: --steps N repeats a run exactly). 1% of the
documents are held out; the weights with the lowest validation loss are the ones exported.
--tiny: a 2-layer d_model 64 model for a CPU smoke test of the whole pipeline.
"""
import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import bpe  # noqa: E402
import gguf  # noqa: E402
import make_fixtures  # noqa: E402  (permute: HF rotate_half rows -> GGUF's interleaved pairs)
import quants  # noqa: E402

SHAPES = {
    "demo": dict(n_embd=384, n_layer=10, n_head=6, n_ff=1024, n_ctx=512, batch=128),
    "tiny": dict(n_embd=64, n_layer=2, n_head=2, n_ff=128, n_ctx=64, batch=8),
}


# ---------------------------------------------------------------- data

def load_stream(corpus_dir, tokenizer_dir, tok):
    """(train ids, validation ids) as uint16 arrays: every document followed by <|endoftext|>.
    A document is held out when crc32 of its index falls in the lowest 1%. Cached in
    TOKENIZER_DIR/tokens.npz with the sha256 of the tokenizer.json it was made with, so the GPU
    run needs no corpus and a retrained tokenizer is never paired with stale ids."""
    cache = os.path.join(tokenizer_dir, "tokens.npz")
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb") as f:
        tok_sha = hashlib.sha256(f.read()).hexdigest()
    if os.path.exists(cache):
        z = np.load(cache)
        if str(z["tokenizer_sha256"]) != tok_sha:
            raise SystemExit(f"{cache} was made with another tokenizer.json: delete it and run prepare.sh")
        return z["train"], z["val"]
    eot = tok.special["<|endoftext|>"]
    train, val = [], []
    n = 0
    with open(os.path.join(corpus_dir, "text.jsonl"), encoding="ascii") as ft, \
            open(os.path.join(corpus_dir, "chat.jsonl"), encoding="ascii") as fc:
        for f, is_chat in ((ft, False), (fc, True)):
            for line in f:
                doc = json.loads(line)
                ids = (tok.render_chat(doc) if is_chat else tok.encode(doc)) + [eot]
                (val if zlib.crc32(str(n).encode()) % 100 == 0 else train).extend(ids)
                n += 1
    train, val = np.array(train, dtype=np.uint16), np.array(val, dtype=np.uint16)
    np.savez(cache, train=train, val=val, tokenizer_sha256=np.array(tok_sha))
    return train, val


# ---------------------------------------------------------------- model

def rope_tables(n_ctx, head_dim, base, device):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    ang = torch.outer(torch.arange(n_ctx, device=device).float(), inv)
    emb = torch.cat([ang, ang], dim=-1)             # (n_ctx, head_dim), HF's layout
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def attention(q, k, v):
    # q, k, v: (batch, n_head, seq, head_dim); causal. torch >= 2 has the fused kernel; 1.13
    # (Debian's, for the CPU smoke test) takes the plain formula.
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool, device=q.device), 1), float("-inf"))
    return att.softmax(-1) @ v


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d, ff = c["n_embd"], c["n_ff"]
        self.n_head = c["n_head"]
        self.attn_norm = RMSNorm(d, c["eps"])
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d, bias=False) for _ in range(4))
        self.ffn_norm = RMSNorm(d, c["eps"])
        self.gate = torch.nn.Linear(d, ff, bias=False)
        self.up = torch.nn.Linear(d, ff, bias=False)
        self.down = torch.nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (m(h).view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for m in (self.q, self.k, self.v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        x = x + self.o(attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = torch.nn.Embedding(c["n_vocab"], c["n_embd"])
        self.blocks = torch.nn.ModuleList(Block(c) for _ in range(c["n_layer"]))
        self.norm = RMSNorm(c["n_embd"], c["eps"])
        cos, sin = rope_tables(c["n_ctx"], c["n_embd"] // c["n_head"], c["rope_base"], "cpu")
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():       # GPT-2's init; residual outputs scaled down
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * c["n_layer"]) if name.endswith(("o.weight", "down.weight")) else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed(ids)
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return F.linear(self.norm(x), self.embed.weight)   # tied output


# ---------------------------------------------------------------- export

def q8(t):
    """Q8_0 bytes of a (rows, cols) tensor, ggml's reference quantizer (scripts/quants.py)."""
    return quants.quantize("q8_0", t.detach().float().cpu().numpy().reshape(-1))


def f32(t):
    return t.detach().float().cpu().numpy().astype("<f4").tobytes()


def export(model, tokenizer_dir, path):
    """The GGUF: llama.* keys, the tokenizer's keys (scripts/tokenizer_to_gguf.py), tensors."""
    c = model.c
    vocab_path = path + ".vocab"
    subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "tokenizer_to_gguf.py"),
                    "--tokenizer-json", os.path.join(tokenizer_dir, "tokenizer.json"),
                    "--tokenizer-config", os.path.join(tokenizer_dir, "tokenizer_config.json"),
                    "--pre", "gpt-2", "--source", "scripts/demo/bpe.py on scripts/demo/corpus.py's text",
                    vocab_path], check=True, stdout=subprocess.DEVNULL)
    kv, _, _ = gguf.read_gguf(vocab_path)
    types = gguf.read_gguf_types(vocab_path)
    os.remove(vocab_path)
    w = gguf.GGUFWriter()
    w.add_string("general.architecture", "llama")
    w.add_string("general.name", "lean-demo")
    w.add_string("general.license", "BSD-3-Clause AND WordNet-3.0 (training data); see docs/demo_model.md")
    w.add_uint32("general.file_type", 7)             # LLAMA_FTYPE_MOSTLY_Q8_0
    w.add_uint32("llama.context_length", c["n_ctx"])
    w.add_uint32("llama.embedding_length", c["n_embd"])
    w.add_uint32("llama.block_count", c["n_layer"])
    w.add_uint32("llama.feed_forward_length", c["n_ff"])
    w.add_uint32("llama.attention.head_count", c["n_head"])
    w.add_uint32("llama.attention.head_count_kv", c["n_head"])
    w.add_uint32("llama.rope.dimension_count", c["n_embd"] // c["n_head"])
    w.add_float32("llama.rope.freq_base", c["rope_base"])
    w.add_float32("llama.attention.layer_norm_rms_epsilon", c["eps"])
    w.add_uint32("llama.vocab_size", c["n_vocab"])
    for key, value in kv.items():
        t = types[key]
        w.add_key_value(key, value, *(t if isinstance(t, tuple) else (t,)))
    d, nh = c["n_embd"], c["n_head"]
    w.add_tensor("token_embd.weight", gguf.Q8_0, [d, c["n_vocab"]], q8(model.embed.weight))
    for i, b in enumerate(model.blocks):
        perm = lambda m: torch.from_numpy(make_fixtures.permute(m.weight.detach().float().cpu().numpy(), nh))  # noqa: E731
        w.add_tensor(f"blk.{i}.attn_norm.weight", gguf.F32, [d], f32(b.attn_norm.weight))
        w.add_tensor(f"blk.{i}.attn_q.weight", gguf.Q8_0, [d, d], q8(perm(b.q)))
        w.add_tensor(f"blk.{i}.attn_k.weight", gguf.Q8_0, [d, d], q8(perm(b.k)))
        w.add_tensor(f"blk.{i}.attn_v.weight", gguf.Q8_0, [d, d], q8(b.v.weight))
        w.add_tensor(f"blk.{i}.attn_output.weight", gguf.Q8_0, [d, d], q8(b.o.weight))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", gguf.F32, [d], f32(b.ffn_norm.weight))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", gguf.Q8_0, [d, c["n_ff"]], q8(b.gate.weight))
        w.add_tensor(f"blk.{i}.ffn_up.weight", gguf.Q8_0, [d, c["n_ff"]], q8(b.up.weight))
        w.add_tensor(f"blk.{i}.ffn_down.weight", gguf.Q8_0, [c["n_ff"], d], q8(b.down.weight))
    w.add_tensor("output_norm.weight", gguf.F32, [d], f32(model.norm.weight))
    w.write(path)


def check_export(model, path, val_ids, c):
    """The GGUF read back (scripts/demo/check_model.py's loader: Q8_0 dequantized, attn_q/k
    un-permuted) against the trained weights in float32 on held-out text: the largest logit
    difference and how often the argmax agrees. A wrong name, shape or RoPE layout makes the
    argmax agree at chance level; Q8_0's rounding leaves it above 90%: below that, fail."""
    import check_model  # here: it imports this file
    back = check_model.load(path)
    ref = Model(c)
    ref.load_state_dict({k: v.float().cpu() for k, v in model.state_dict().items()})
    x = torch.from_numpy(val_ids[:4 * c["n_ctx"]].astype(np.int64)).view(4, c["n_ctx"])
    with torch.no_grad():
        a, b = ref.eval()(x), back(x)
    agree = float((a.argmax(-1) == b.argmax(-1)).float().mean())
    out = dict(max_logit_diff=round(float((a - b).abs().max()), 4), argmax_agreement=round(agree, 4))
    print(f"export check: {out}", flush=True)
    if agree < 0.9:
        raise SystemExit(f"export check failed: {out}")
    return out


# ---------------------------------------------------------------- samples

SAMPLE_TEXTS = ["The meaning of life is", "A dog is", "To run is to", "Once upon a time"]
SAMPLE_CHATS = ["What does ocean mean?", "Tell me a fortune.", "Use happy in a sentence.", "Who are you?"]


@torch.no_grad()
def generate(model, ids, n, temp, gen, stop, device):
    """n more ids after ids: greedy when temp is 0, else drawn at temperature temp."""
    model.eval()
    out = list(ids)
    for _ in range(n):
        logits = model(torch.tensor([out[-model.c["n_ctx"]:]], device=device))[0, -1].float()
        nxt = int(logits.argmax()) if temp == 0 else \
            int(torch.multinomial((logits / temp).softmax(-1).cpu(), 1, generator=gen))
        if nxt in stop:
            break
        out.append(nxt)
    model.train()
    return out[len(ids):]


def write_samples(model, tok, c, device, seed, path):
    """A few completions and chat replies of the exported weights (greedy and T=0.8)."""
    inv = {i: t for t, i in tok.vocab.items()}
    char_byte = {ch: b for b, ch in bpe.BYTE_CHAR.items()}
    text = lambda ids: bytes(char_byte[ch] for i in ids for ch in inv[i] if ch in char_byte).decode("utf-8", "replace")  # noqa: E731
    stop = set(tok.special.values())
    gen = torch.Generator().manual_seed(seed)
    with open(path, "w") as f:
        for temp in (0.0, 0.8):
            for p in SAMPLE_TEXTS:
                f.write(f"[run T={temp}] {p}|{text(generate(model, tok.encode(p), 60, temp, gen, stop, device))}\n")
            for q in SAMPLE_CHATS:
                ids = tok.render_chat([{"role": "user", "content": q}]) + [tok.special["<|im_start|>"]] + \
                    tok.encode("assistant\n")
                f.write(f"[chat T={temp}] {q}|{text(generate(model, ids, 80, temp, gen, stop, device))}\n")
    print(open(path).read(), flush=True)


# ---------------------------------------------------------------- training

def batch(data, n, t, gen, device):
    ix = torch.randint(0, len(data) - t - 1, (n,), generator=gen)
    x = torch.stack([torch.from_numpy(data[i:i + t + 1].astype(np.int64)) for i in ix.tolist()])
    return x[:, :-1].to(device, non_blocking=True), x[:, 1:].to(device, non_blocking=True)


def compiled(model, c, device, autocast):
    """torch.compile'd model, compiled here by one training-shaped call; the model itself where
    that fails (torch < 2, no compiler for Triton): slower, the same arithmetic."""
    try:
        f = torch.compile(model)
        x = torch.zeros(c["batch"], c["n_ctx"], dtype=torch.long, device=device)
        with autocast:
            f(x).float().mean().backward()
        model.zero_grad(set_to_none=True)
        return f
    except Exception as e:  # noqa: BLE001  (any failure: train uncompiled)
        print(f"torch.compile failed ({type(e).__name__}: {str(e)[:200]}): training uncompiled", flush=True)
        model.zero_grad(set_to_none=True)
        return model


def lr_at(step, n_steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, n_steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=9.0, help="training time budget (sets --steps)")
    ap.add_argument("--steps", type=int, default=0, help="steps to run; 0: --epochs' worth, fewer if --minutes runs out")
    ap.add_argument("--epochs", type=float, default=20, help="at most this many passes over the data")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--batch", type=int, default=0, help="sequences per step (default: the shape's, 128)")
    ap.add_argument("--tiny", action="store_true", help="a tiny model: the CPU smoke test")
    a = ap.parse_args()
    t_start = time.time()
    torch.manual_seed(a.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tok = bpe.Tokenizer(os.path.join(a.tokenizer, "tokenizer.json"))
    c = dict(SHAPES["tiny" if a.tiny else "demo"], n_vocab=len(tok.vocab), eps=1e-5, rope_base=10000.0)
    c["batch"] = a.batch or c["batch"]
    train_ids, val_ids = load_stream(a.corpus, a.tokenizer, tok)
    print(f"data: {len(train_ids)} training tokens, {len(val_ids)} held out "
          f"({time.time() - t_start:.0f} s to tokenize)", flush=True)

    model = Model(c).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f} M parameters, {c}", flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if device == "cuda" else {}))
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda")
    step_fn = compiled(model, c, device, autocast) if device == "cuda" else model
    gen = torch.Generator().manual_seed(a.seed)
    val_gen_seed = a.seed + 1000

    def evaluate(n_batches=20):
        model.eval()
        g = torch.Generator().manual_seed(val_gen_seed)       # the same validation batches every time
        total = 0.0
        with torch.no_grad(), autocast:
            for _ in range(n_batches):
                x, y = batch(val_ids, c["batch"], c["n_ctx"], g, device)
                total += F.cross_entropy(model(x).float().view(-1, c["n_vocab"]), y.reshape(-1)).item()
        model.train()
        return total / n_batches

    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "train_log.tsv"), "w")
    log.write("step\ttokens\tlr\ttrain_loss\tval_loss\tseconds\n")
    epoch_steps = len(train_ids) // (c["batch"] * c["n_ctx"]) + 1
    n_steps = a.steps or int(a.epochs * epoch_steps)
    warmup = 200 if not a.tiny else 5              # > 60: the step count is fixed inside warm-up
    best = (float("inf"), -1, None)
    t_train = time.time()
    step, loss_sum, loss_n = 0, 0.0, 0
    while step < n_steps:
        lr = lr_at(step, n_steps, a.lr, warmup)      # steps < 60 are warm-up, whatever n_steps is
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(train_ids, c["batch"], c["n_ctx"], gen, device)
        with autocast:
            loss = F.cross_entropy(step_fn(x).float().view(-1, c["n_vocab"]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_sum = loss_sum + loss.detach()         # a tensor: no wait for the GPU until evaluation
        loss_n += 1
        if step in (20, 60) and device == "cuda":
            torch.cuda.synchronize()                  # time the GPU's work, not the queueing of it
        if step == 20:
            t20 = time.time()                         # compiled and warm from here
        if not a.steps and step == 60:
            # fix the step count from steps 20-60; 5% and 30 s kept for evaluation and export
            per_step = (time.time() - t20) / 40
            budget = a.minutes * 60 - (time.time() - t_start) - 30
            n_steps = max(step + 1, min(n_steps, int(step + 0.95 * budget / per_step)))
            print(f"speed: {per_step * 1000:.0f} ms/step -> {n_steps} steps, {n_steps / epoch_steps:.1f} epochs "
                  f"(repeat with --steps {n_steps})",
                  flush=True)
        if step % a.eval_every == 0 or step == n_steps:
            val = evaluate(4 if a.tiny else 20)
            tr = float(loss_sum) / loss_n
            loss_sum, loss_n = 0.0, 0
            el = time.time() - t_start
            log.write(f"{step}\t{step * c['batch'] * c['n_ctx']}\t{lr:.6f}\t{tr:.4f}\t{val:.4f}\t{el:.1f}\n")
            log.flush()
            print(f"step {step}/{n_steps}: train {tr:.3f} val {val:.3f} lr {lr:.2e} {el:.0f} s", flush=True)
            if val < best[0]:
                best = (val, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
    model.load_state_dict(best[2])
    path = os.path.join(a.out, "lean-demo.gguf")
    export(model, a.tokenizer, path)
    export_error = check_export(model, path, val_ids, c)
    write_samples(model, tok, c, device, a.seed, os.path.join(a.out, "samples.txt"))
    info = dict(shape=c, n_params=n_params, steps=n_steps, best_step=best[1], best_val_loss=best[0],
                seed=a.seed, lr=a.lr, train_tokens=int(len(train_ids)), val_tokens=int(len(val_ids)),
                seconds_total=round(time.time() - t_start, 1), seconds_training=round(time.time() - t_train, 1),
                torch=torch.__version__, device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
                gguf_bytes=os.path.getsize(path), gguf_sha256=hashlib.sha256(open(path, "rb").read()).hexdigest(),
                export_check=export_error)
    with open(os.path.join(a.out, "run.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"{path}: {info['gguf_bytes']} bytes, best validation loss {best[0]:.3f} at step {best[1]}", flush=True)


if __name__ == "__main__":
    main()
