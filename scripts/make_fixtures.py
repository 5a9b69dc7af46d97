#!/usr/bin/env python3
"""make_fixtures.py — the transformers reference fixtures for lean's parity tests.

Two commands:
    python3 scripts/make_fixtures.py models DIR      numpy only; the test suite runs it
    python3 scripts/make_fixtures.py reference DIR   needs torch + transformers (the H200
                                                     machine; CPU is enough, ~20 s)

For each architecture (llama, qwen2, qwen3) it makes the weights of a tiny random HF model
from numpy's frozen legacy RandomState stream (the same numbers on every numpy version),
writes them as GGUF in every fixture format the way real converters do, and (reference)
records what transformers computes from the weights each file actually holds:

  * llama files store attn_q / attn_k rows permuted for interleaved RoPE
    (convert_hf_to_gguf.py's LlamaModel.permute); qwen2/qwen3 keep HF's order (neox).
  * llama uses llama3 rope scaling, written as rope_freqs.weight like the converter.
  * For a quantized file, transformers gets the dequantized weights (dequantized by the
    independent numpy code in scripts/quants.py, never by lean's C).

The GGUF files are not committed (they would be 51 MB): `models` rebuilds them
bit-identically and checks each file's SHA-256 against the one `reference` recorded in
tests/data/fixtures/<arch>.txt, so the tests run on exactly the bytes transformers saw.

Output per arch: <arch>-<fmt>.gguf and <arch>.json with, per format, the file's sha256, the
prompt ids,
the top-20 (id, logit) at the last prompt position, a 32-token greedy continuation and
the top-20 after decoding all 32 of them (which checks the KV-cache path), the
smallest top-1/top-2 logit gap met on the way (and <arch>.txt, the same in a
line format for the C test) (a tie would make a greedy fixture
meaningless, so the script fails if that gap is below 1e-3).

transformers runs in float32 on the CPU with eager attention (no TF32, no fused
kernels), so its logits are plain float32 arithmetic like lean's reference.
"""
import hashlib
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402  (scripts/gguf.py: our pure-python GGUF writer)
import quants  # noqa: E402  (scripts/quants.py: independent numpy (de)quantizers)

FORMATS = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q4_k", "q6_k"]
N_PROMPT, N_GEN, TOPK = 16, 32, 20
MIN_GAP = 1e-3

# Tiny shapes: rows of 256/512 so every K-quant applies; qwen3 uses head_dim 128 with
# n_head * head_dim != n_embd, as the real Qwen3 does.
ARCHS = {
    "llama": dict(hidden=256, ff=512, layers=2, heads=4, kv=2, head_dim=64, vocab=256,
                  theta=500000.0, eps=1e-5, tied=False,
                  rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                    high_freq_factor=4.0,
                                    original_max_position_embeddings=8192)),
    "qwen2": dict(hidden=256, ff=512, layers=2, heads=4, kv=2, head_dim=64, vocab=256,
                  theta=1000000.0, eps=1e-6, tied=True, rope_scaling=None),
    "qwen3": dict(hidden=256, ff=512, layers=2, heads=4, kv=2, head_dim=128, vocab=256,
                  theta=1000000.0, eps=1e-6, tied=False, rope_scaling=None),
}


def build_hf(arch, a, weights):
    """The transformers model of arch with weights {HF name: float32 array}."""
    import torch
    import transformers as tf
    common = dict(vocab_size=a["vocab"], hidden_size=a["hidden"], intermediate_size=a["ff"],
                  num_hidden_layers=a["layers"], num_attention_heads=a["heads"],
                  num_key_value_heads=a["kv"], head_dim=a["head_dim"],
                  max_position_embeddings=131072, rms_norm_eps=a["eps"],
                  tie_word_embeddings=a["tied"], attn_implementation="eager")
    rope = dict(rope_type="default", rope_theta=a["theta"])
    if a["rope_scaling"]:
        rope.update(a["rope_scaling"])
    cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
           "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
           "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM)}[arch]
    try:  # transformers >= 5: rope settings live in rope_parameters
        cfg = cls[0](rope_parameters=rope, **common)
    except TypeError:
        cfg = cls[0](rope_theta=a["theta"], rope_scaling=a["rope_scaling"], **common)
    model = cls[1](cfg).float().eval()
    w = dict(weights)
    if a["tied"]:
        w["lm_head.weight"] = w["model.embed_tokens.weight"]
    keys = list(model.state_dict().keys())
    missing = [k for k in keys if k not in w and "rotary" not in k]
    assert not missing, f"{arch}: weights missing: {missing}"
    model.load_state_dict({k: torch.from_numpy(np.array(w[k], dtype=np.float32)) for k in keys
                           if k in w}, strict=False)
    check_rope(model, arch, a)
    return model


def tensor_map(arch, a):
    """(gguf name, HF name, HF shape, heads to permute for or None), in file order."""
    H, V, F, hd = a["hidden"], a["vocab"], a["ff"], a["head_dim"]
    q, kv = a["heads"] * hd, a["kv"] * hd
    out = [("token_embd.weight", "model.embed_tokens.weight", (V, H), None),
           ("output_norm.weight", "model.norm.weight", (H,), None)]
    if not a["tied"]:
        out.append(("output.weight", "lm_head.weight", (V, H), None))
    for i in range(a["layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        perm_q = a["heads"] if arch == "llama" else None
        perm_k = a["kv"] if arch == "llama" else None
        out += [(b + "attn_norm.weight", p + "input_layernorm.weight", (H,), None),
                (b + "attn_q.weight", p + "self_attn.q_proj.weight", (q, H), perm_q),
                (b + "attn_k.weight", p + "self_attn.k_proj.weight", (kv, H), perm_k),
                (b + "attn_v.weight", p + "self_attn.v_proj.weight", (kv, H), None),
                (b + "attn_output.weight", p + "self_attn.o_proj.weight", (H, q), None),
                (b + "ffn_norm.weight", p + "post_attention_layernorm.weight", (H,), None),
                (b + "ffn_gate.weight", p + "mlp.gate_proj.weight", (F, H), None),
                (b + "ffn_up.weight", p + "mlp.up_proj.weight", (F, H), None),
                (b + "ffn_down.weight", p + "mlp.down_proj.weight", (H, F), None)]
        if arch == "qwen2":
            out += [(b + "attn_q.bias", p + "self_attn.q_proj.bias", (q,), perm_q),
                    (b + "attn_k.bias", p + "self_attn.k_proj.bias", (kv,), perm_k),
                    (b + "attn_v.bias", p + "self_attn.v_proj.bias", (kv,), None)]
        if arch == "qwen3":
            out += [(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight", (hd,), None),
                    (b + "attn_k_norm.weight", p + "self_attn.k_norm.weight", (hd,), None)]
    return out


def fixture_weights(arch, a, seed):
    """HF-named float32 weights with enough spread that logits are not flat and norms are
    not 1. RandomState's stream and standard_normal are frozen by numpy (NEP 19), and the
    scaling is float64 then one rounding to float32, so every platform gets the same bits."""
    rs = np.random.RandomState(seed)
    out = {}
    for _, hname, shape, _ in tensor_map(arch, a):
        z = rs.standard_normal(shape)
        if hname.endswith("norm.weight"):
            w = 1.0 + 0.2 * z
        elif hname.endswith(".bias"):
            w = 0.2 * z
        elif "embed_tokens" in hname or "lm_head" in hname:
            w = 0.25 * z
        else:
            w = z / math.sqrt(shape[1])
        out[hname] = w.astype(np.float32)
    return out


def check_rope(model, arch, a):
    """Our GGUF encodes rope as theta / rope_freqs; make sure HF agrees with that."""
    inv = model.model.rotary_emb.inv_freq.double().numpy()
    d = a["head_dim"]
    base = a["theta"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    f = rope_factors(a)
    want = base / (f if f is not None else 1.0)
    assert np.allclose(inv, want, rtol=1e-5), (arch, inv[:4], want[:4])


def rope_factors(a):
    """convert_hf_to_gguf.py's llama3 rope_freqs, by its formula (in float64 here, so that
    the file does not depend on a float32 pow; the factors differ from the converter's
    by at most an ulp of float32, and transformers is checked against them)."""
    rs = a["rope_scaling"]
    if not rs:
        return None
    d = a["head_dim"]
    freqs = 1.0 / (a["theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    old = rs["original_max_position_embeddings"]
    low_wl, high_wl = old / rs["low_freq_factor"], old / rs["high_freq_factor"]
    out = []
    for fr in freqs.tolist():
        wl = 2 * math.pi / fr
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(rs["factor"])
        else:
            s = (old / wl - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
            out.append(1 / ((1 - s) / rs["factor"] + s))
    return np.array(out, dtype=np.float32)


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF rotate_half rows -> interleaved pairs."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
             .swapaxes(1, 2).reshape(w.shape))


def unpermute(w, n_head):
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
             .swapaxes(1, 2).reshape(w.shape))


def write_gguf(path, arch, a, fmt, weights):
    """Writes the file; returns ({HF name: float32 weights as the file holds them}, sha256)."""
    w = gguf.GGUFWriter()
    w.add_string("general.architecture", arch)
    w.add_string("general.name", f"lean fixture {arch} {fmt}")
    w.add_uint32(f"{arch}.context_length", 4096)
    w.add_uint32(f"{arch}.embedding_length", a["hidden"])
    w.add_uint32(f"{arch}.block_count", a["layers"])
    w.add_uint32(f"{arch}.feed_forward_length", a["ff"])
    w.add_uint32(f"{arch}.attention.head_count", a["heads"])
    w.add_uint32(f"{arch}.attention.head_count_kv", a["kv"])
    w.add_uint32(f"{arch}.attention.key_length", a["head_dim"])
    w.add_uint32(f"{arch}.attention.value_length", a["head_dim"])
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", a["eps"])
    w.add_float32(f"{arch}.rope.freq_base", a["theta"])
    w.add_uint32(f"{arch}.rope.dimension_count", a["head_dim"])
    w.add_uint32(f"{arch}.vocab_size", a["vocab"])
    seen = {}
    f = rope_factors(a)
    if f is not None:
        w.add_tensor("rope_freqs.weight", quants.TYPES["f32"][0], [len(f)], f.tobytes())
    for gname, hname, _, perm in tensor_map(arch, a):
        arr = weights[hname]
        x = permute(arr, perm) if perm is not None else arr
        x = np.ascontiguousarray(x, dtype=np.float32)
        t = fmt if x.ndim == 2 else "f32"  # norms and biases stay F32, as converters do
        data = quants.quantize(t, x.reshape(-1))
        back = quants.dequantize(t, data, x.size).reshape(x.shape)
        w.add_tensor(gname, quants.TYPES[t][0], list(reversed(x.shape)), data)
        seen[hname] = unpermute(back, perm) if perm is not None else back
    w.write(path)
    with open(path, "rb") as fh:
        return seen, hashlib.sha256(fh.read()).hexdigest()


def reference(model, prompt):
    import torch
    with torch.no_grad():
        return _reference(model, prompt, torch)


def _reference(model, prompt, torch):
    ids = torch.tensor([prompt])
    out = model(ids, use_cache=True)
    last = out.logits[0, -1].float()
    top = torch.topk(last, TOPK)
    gen, gaps, past = [], [], out.past_key_values
    logits = last
    for _ in range(N_GEN):
        s = torch.sort(logits, descending=True).values
        gaps.append(float(s[0] - s[1]))
        nxt = int(torch.argmax(logits))
        gen.append(nxt)
        out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1].float()
    # Recompute the whole sequence without the cache: the continuation must agree.
    full = model(torch.tensor([prompt + gen[:-1]])).logits[0, len(prompt) - 1:]
    assert torch.argmax(full, -1).tolist() == gen, "cached and uncached greedy differ"
    end = torch.topk(logits, TOPK)  # after decoding all N_GEN ids: checks the KV path
    return dict(top_ids=top.indices.tolist(), top_logits=[float(v) for v in top.values],
                continuation=gen, min_gap=min(gaps),
                end_top_ids=end.indices.tolist(), end_top_logits=[float(v) for v in end.values])


ARCH_SEEDS = {arch: 1234 + k for k, arch in enumerate(ARCHS)}


def write_models(outdir):
    """Every fixture file; returns {(arch, fmt): (held weights, sha256)}."""
    os.makedirs(outdir, exist_ok=True)
    out = {}
    for arch, a in ARCHS.items():
        weights = fixture_weights(arch, a, ARCH_SEEDS[arch])
        for fmt in FORMATS:
            out[arch, fmt] = write_gguf(os.path.join(outdir, f"{arch}-{fmt}.gguf"), arch, a, fmt, weights)
    return out


def recorded_sha256(path):
    """{fmt: sha256} from a committed <arch>.txt."""
    out, fmt = {}, None
    with open(path) as fh:
        for line in fh:
            w = line.split()
            if w and w[0] == "format":
                fmt = w[1]
            elif w and w[0] == "sha256":
                out[fmt] = w[1]
    return out


def main_models(outdir):
    """Rebuilds the files and fails unless each is the one the reference was made from."""
    made = write_models(outdir)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fixtures")
    bad = []
    for arch in ARCHS:
        want = recorded_sha256(os.path.join(here, f"{arch}.txt"))
        for fmt in FORMATS:
            if want.get(fmt) != made[arch, fmt][1]:
                bad.append(f"{arch}-{fmt}.gguf: sha256 {made[arch, fmt][1]}, reference made from {want.get(fmt)}")
    if bad:
        sys.exit("make_fixtures.py: rebuilt fixture files differ from the reference's:\n  " + "\n  ".join(bad))
    print(f"make_fixtures.py: {len(made)} fixture models in {outdir}, sha256 as recorded")


def main_reference(outdir):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(4)
    made = write_models(outdir)
    for arch, a in ARCHS.items():
        seed = ARCH_SEEDS[arch]
        result = dict(arch=arch, n_gen=N_GEN, topk=TOPK,
                      shapes={kk: vv for kk, vv in a.items() if kk != "rope_scaling"},
                      rope_scaling=a["rope_scaling"], formats={})
        for fmt in FORMATS:
            held, sha = made[arch, fmt]
            model = build_hf(arch, a, held)
            # The first seeded prompt whose greedy path has no near-tie (see MIN_GAP).
            for attempt in range(100):
                rng = np.random.RandomState([seed, attempt])
                prompt = [int(v) for v in rng.randint(0, a["vocab"], N_PROMPT)]
                r = reference(model, prompt)
                if r["min_gap"] >= MIN_GAP:
                    break
            assert r["min_gap"] >= MIN_GAP, f"{arch} {fmt}: no prompt without a near-tie"
            r["prompt"], r["sha256"] = prompt, sha
            result["formats"][fmt] = r
            print(f"{arch:6s} {fmt:5s} top1 {r['top_ids'][0]:4d} {r['top_logits'][0]:+.5f} "
                  f"gap {r['min_gap']:.4f} gen {r['continuation'][:8]}", flush=True)
        with open(os.path.join(outdir, f"{arch}.json"), "w") as fh:
            json.dump(result, fh, indent=1)
        write_text(os.path.join(outdir, f"{arch}.txt"), result)


def write_text(path, r):
    """The same facts in a line format tests/test_parity.c reads without a JSON parser.
    Logits are written with 9 significant digits: float32 round-trips exactly."""
    with open(path, "w") as fh:
        fh.write(f"# transformers reference for tiny {r['arch']}; made by scripts/make_fixtures.py\n")
        for fmt, f in r["formats"].items():
            fh.write(f"format {fmt}\n")
            fh.write(f"sha256 {f['sha256']}\n")
            fh.write("prompt %d %s\n" % (len(f["prompt"]), " ".join(map(str, f["prompt"]))))
            fh.write("top %d %s\n" % (len(f["top_ids"]), " ".join(
                f"{i}:{v:.9g}" for i, v in zip(f["top_ids"], f["top_logits"]))))
            fh.write("continuation %d %s\n" % (len(f["continuation"]),
                                                " ".join(map(str, f["continuation"]))))
            fh.write("end_top %d %s\n" % (len(f["end_top_ids"]), " ".join(
                f"{i}:{v:.9g}" for i, v in zip(f["end_top_ids"], f["end_top_logits"]))))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("models", "reference"):
        sys.exit("usage: make_fixtures.py models|reference DIR")
    (main_models if sys.argv[1] == "models" else main_reference)(sys.argv[2])
