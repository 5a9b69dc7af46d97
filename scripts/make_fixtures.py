#!/usr/bin/env python3
"""make_fixtures.py — the transformers reference fixtures for lean's parity tests.

Two commands:
    python3 scripts/make_fixtures.py models DIR      numpy only; the test suite runs it
    python3 scripts/make_fixtures.py reference DIR [FMT...]
                                                     needs torch + transformers (the H200
                                                     machine; CPU is enough, ~100 s); with
                                                     FMTs, only those formats' references
                                                     are made, the others' cases copied from
                                                     tests/data/fixtures/<name>.txt as they are

The Q2_K and Q3_K references were added after the others, by
    python3 scripts/make_fixtures.py reference /tmp/fx q2_k q3_k && cp /tmp/fx/*.txt $OUT/
on the GPU machine (the models stay in /tmp/fx: ~0.3 GB), which makes only those formats' cases
and keeps the committed others unchanged; a new format is added the same way, with
tests/fixture.h's FIXTURE_N_FORMATS set to len(FORMATS).

For each model (VARIANTS: llama, qwen2 and qwen3, each with an untied output matrix and
with the output tied to the embedding) it makes the weights of a small random HF model
(4 layers, a vocabulary of 4096) from numpy's frozen legacy RandomState stream (the same
numbers on every numpy version), writes them as GGUF in every format lean reads (FORMATS,
the 13 of src/core/formats.c) the way real converters do, and (reference) records what
transformers computes from the weights each file actually holds:

  * llama files store attn_q / attn_k rows permuted for interleaved RoPE
    (convert_hf_to_gguf.py's LlamaModel.permute); qwen2/qwen3 keep HF's order (neox).
  * llama uses llama3 rope scaling, written as rope_freqs.weight like the converter.
  * For a quantized file, transformers gets the dequantized weights (dequantized by the
    independent numpy code in scripts/quants.py, never by lean's C).

The GGUF files are not committed (they would be ~0.5 GB): `models` rebuilds them
bit-identically and checks each file's SHA-256 against the one `reference` recorded in
tests/data/fixtures/<name>.txt (tests/fixture.h checks it again before a test loads one),
so the tests run on exactly the bytes transformers saw.

Per model and format the reference holds: the file's sha256, a 16-id prompt, a 32-token
greedy continuation, and transformers' top-21 (id, logit) at every prompt position and
after decoding 1, 2, 3, 4, 8, 16, 24 and 32 ids of the continuation (the KV-cache path;
the 21st logit tells the reader where the top-20 set has a near-tie at its edge). The
prompt is the first seeded one that gives
  * no near-tie on the greedy path (top-1 minus top-2 >= MIN_GAP at every step: a tie
    would make a greedy fixture meaningless), and
  * a continuation that is not one repeated token (>= MIN_DISTINCT distinct ids, no run
    of one id longer than MAX_RUN);
the script fails when no prompt of 100 does.

transformers runs in float32 on the CPU with eager attention (no TF32, no fused
kernels), so its logits are plain float32 arithmetic like lean's reference.
"""
import hashlib
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402  (scripts/gguf.py: our pure-python GGUF writer)
import quants  # noqa: E402  (scripts/quants.py: independent numpy (de)quantizers)

FORMATS = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q2_k", "q3_k"]
N_PROMPT, N_GEN, TOPK = 16, 32, 20
DECODE_STEPS = [1, 2, 3, 4, 8, 16, 24, 32]  # ids of the continuation decoded at a recorded point
MIN_GAP = 1e-3
MIN_DISTINCT, MAX_RUN = 8, 4

# Small shapes: rows of 256/512 so every K-quant applies; qwen3 uses head_dim 128 with
# n_head * head_dim != n_embd, as the real Qwen3 does.
ARCHS = {
    "llama": dict(hidden=256, ff=512, layers=4, heads=4, kv=2, head_dim=64, vocab=4096,
                  theta=500000.0, eps=1e-5,
                  rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                    high_freq_factor=4.0,
                                    original_max_position_embeddings=8192)),
    "qwen2": dict(hidden=256, ff=512, layers=4, heads=4, kv=2, head_dim=64, vocab=4096,
                  theta=1000000.0, eps=1e-6, rope_scaling=None),
    "qwen3": dict(hidden=256, ff=512, layers=4, heads=4, kv=2, head_dim=128, vocab=4096,
                  theta=1000000.0, eps=1e-6, rope_scaling=None),
}
# name -> (arch, tied output): each architecture both ways (Llama 3.2 1B and Qwen2.5 0.5B
# tie, Llama 3 8B and Qwen3 8B do not). The plain name keeps the arch's usual choice.
VARIANTS = {
    "llama": ("llama", False), "llama-tied": ("llama", True),
    "qwen2": ("qwen2", True), "qwen2-untied": ("qwen2", False),
    "qwen3": ("qwen3", False), "qwen3-tied": ("qwen3", True),
}
EMBED_SCALE, EMBED_TIED_GAIN = 0.05, 5.0  # see fixture_weights
SEEDS = {name: 1234 + k for k, name in enumerate(VARIANTS)}


def shapes(name):
    """The ARCHS entry of a variant with its "tied" flag."""
    arch, tied = VARIANTS[name]
    return arch, dict(ARCHS[arch], tied=tied)


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
    scaling is float64 then one rounding to float32, so every platform gets the same bits.
    The embedding is small next to what the layers add (as in trained models): a tied
    output scores a token against the residual that still holds it, and a large embedding
    makes every greedy continuation repeat its last id. The final norm's larger gain
    gives a tied output logits as spread as an untied one's."""
    rs = np.random.RandomState(seed)
    out = {}
    for _, hname, shape, _ in tensor_map(arch, a):
        z = rs.standard_normal(shape)
        if hname == "model.norm.weight" and a["tied"]:
            w = EMBED_TIED_GAIN * (1.0 + 0.2 * z)
        elif hname.endswith("norm.weight"):
            w = 1.0 + 0.2 * z
        elif hname.endswith(".bias"):
            w = 0.2 * z
        elif "embed_tokens" in hname:
            w = EMBED_SCALE * z
        elif "lm_head" in hname:
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


def write_gguf(path, name, arch, a, fmt, weights):
    """Writes the file; returns ({HF name: float32 weights as the file holds them}, sha256)."""
    w = gguf.GGUFWriter()
    w.add_string("general.architecture", arch)
    w.add_string("general.name", f"lean fixture {name} {fmt}")
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


def top(logits):
    """[(id, logit)] of the TOPK + 1 largest, ties to the lower id (torch.topk's order on CPU
    is not specified for ties, so sort explicitly)."""
    v = logits.double().numpy().astype(np.float32)
    order = np.lexsort((np.arange(len(v)), -v))[:TOPK + 1]
    return [(int(i), float(v[i])) for i in order]


def _reference(model, prompt, torch):
    """The prompt's facts, or None (with the reason) when it has a near-tie or a repetitive
    continuation."""
    out = model(torch.tensor([prompt]), use_cache=True)
    logits, past = out.logits[0, -1].float(), out.past_key_values
    gen, gaps, steps = [], [], {}
    for k in range(1, N_GEN + 1):
        s = torch.sort(logits, descending=True).values
        gaps.append(float(s[0] - s[1]))
        nxt = int(torch.argmax(logits))
        gen.append(nxt)
        out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1].float()
        if k in DECODE_STEPS:
            steps[len(prompt) + k] = logits
    # The whole sequence without the cache: its greedy ids must agree, and it gives every
    # prompt position's logits (position p: after prompt[:p + 1]).
    full = model(torch.tensor([prompt + gen])).logits[0].float()
    assert torch.argmax(full[len(prompt) - 1:-1], -1).tolist() == gen, "cached and uncached greedy differ"
    for n, lg in steps.items():
        assert float((full[n - 1] - lg).abs().max()) < 1e-3, "cached and uncached logits differ"
    points = [(p + 1, top(full[p])) for p in range(len(prompt))]
    points += [(n, top(lg)) for n, lg in sorted(steps.items())]
    run = longest = 1
    for a, b in zip(gen, gen[1:]):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    why = None
    if min(gaps) < MIN_GAP:
        why = f"near-tie on the greedy path (gap {min(gaps):.2g})"
    elif len(set(gen)) < MIN_DISTINCT or longest > MAX_RUN:
        why = f"repetitive continuation ({len(set(gen))} distinct ids, a run of {longest})"
    return dict(continuation=gen, min_gap=min(gaps), points=points), why


def write_models(outdir):
    """Every fixture file; returns {(name, fmt): (held weights, sha256)}."""
    os.makedirs(outdir, exist_ok=True)
    out = {}
    for name in VARIANTS:
        arch, a = shapes(name)
        weights = fixture_weights(arch, a, SEEDS[name])
        for fmt in FORMATS:
            out[name, fmt] = write_gguf(os.path.join(outdir, f"{name}-{fmt}.gguf"), name, arch, a, fmt, weights)
    return out


def main_models(outdir):
    """Rebuilds the files and fails unless each is the one the reference was made from."""
    made = write_models(outdir)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fixtures")
    bad, unreferenced = [], set()
    for name in VARIANTS:
        want = recorded_sha256(os.path.join(here, f"{name}.txt"))
        for fmt in FORMATS:
            if fmt not in want:
                unreferenced.add(fmt)
            elif want[fmt] != made[name, fmt][1]:
                bad.append(f"{name}-{fmt}.gguf: sha256 {made[name, fmt][1]}, reference made from {want[fmt]}")
    if bad:
        sys.exit("make_fixtures.py: rebuilt fixture files differ from the reference's:\n  " + "\n  ".join(bad))
    print(f"make_fixtures.py: {len(made)} fixture models in {outdir}, sha256 as recorded" +
          (f" (no reference yet for {', '.join(sorted(unreferenced))}: see the header)" if unreferenced else ""))


def recorded_cases(path):
    """{fmt: the lines of its case, "format" to "end"} from a committed <name>.txt."""
    out, fmt = {}, None
    with open(path) as fh:
        for line in fh:
            w = line.split()
            if w and w[0] == "format":
                fmt = w[1]
                out[fmt] = []
            if fmt is not None:
                out[fmt].append(line)
            if w and w[0] == "end":
                fmt = None
    return out


def recorded_sha256(path):
    """{fmt: sha256} from a committed <name>.txt."""
    return {fmt: next(line.split()[1] for line in lines if line.startswith("sha256 "))
            for fmt, lines in recorded_cases(path).items()}


def main_reference(outdir, only):
    import torch
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(4)
    unknown = [f for f in only if f not in FORMATS]
    assert not unknown, f"unknown formats {unknown}: {FORMATS}"
    made = write_models(outdir)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fixtures")
    for name in VARIANTS:
        arch, a = shapes(name)
        result = dict(name=name, arch=arch, tied=a["tied"], formats={},
                      made_with=f"transformers {transformers.__version__}, torch {torch.__version__}")
        kept = recorded_cases(os.path.join(here, f"{name}.txt")) if only else {}
        for fmt in FORMATS:
            held, sha = made[name, fmt]
            if only and fmt not in only:
                assert fmt in kept and kept[fmt][1].split() == ["sha256", sha], f"{name} {fmt}: no reference to keep"
                result["formats"][fmt] = dict(lines=kept[fmt])
                continue
            model = build_hf(arch, a, held)
            # The first seeded prompt that passes (see the docstring).
            for attempt in range(100):
                rng = np.random.RandomState([SEEDS[name], attempt])
                prompt = [int(v) for v in rng.randint(0, a["vocab"], N_PROMPT)]
                r, why = reference(model, prompt)
                if why is None:
                    break
                print(f"{name:12s} {fmt:5s} prompt {attempt}: {why}", flush=True)
            assert why is None, f"{name} {fmt}: no prompt of 100 passes"
            r["prompt"], r["sha256"] = prompt, sha
            result["formats"][fmt] = r
            print(f"{name:12s} {fmt:5s} prompt {attempt} gap {r['min_gap']:.4f} "
                  f"distinct {len(set(r['continuation']))} gen {r['continuation'][:8]}", flush=True)
        write_text(os.path.join(outdir, f"{name}.txt"), result)


def write_text(path, r, penalty=None):
    """The reference in a line format tests/fixture.h reads with fscanf (format described in
    that header). Logits are written with 9 significant digits: float32 round-trips exactly.
    A case with a "model" (the demo's) names its file and is the file's only case; penalty,
    (value, ids), adds its greedy ids under that repetition penalty."""
    with open(path, "w") as fh:
        fh.write(f"# transformers reference for {r['name']} ({r['arch']}, output "
                 f"{'tied to the embedding' if r['tied'] else 'untied'}); made by "
                 f"scripts/{'demo/make_fixture.py' if penalty else 'make_fixtures.py'} with {r['made_with']}\n")
        fh.write(f"arch {r['arch']}\ntied {int(r['tied'])}\n")
        if len(r["formats"]) != len(FORMATS):
            fh.write(f"cases {len(r['formats'])}\n")
        for fmt, f in r["formats"].items():
            if "lines" in f:  # a case kept from the committed file
                fh.writelines(f["lines"])
                continue
            fh.write(f"format {fmt}\n")
            if "model" in f:
                fh.write(f"model {f['model']}\n")
            fh.write(f"sha256 {f['sha256']}\n")
            fh.write("prompt %d %s\n" % (len(f["prompt"]), " ".join(map(str, f["prompt"]))))
            fh.write("continuation %d %s\n" % (len(f["continuation"]),
                                                " ".join(map(str, f["continuation"]))))
            for n, t in f["points"]:
                fh.write("logits %d %d %s\n" % (n, len(t), " ".join(f"{i}:{v:.9g}" for i, v in t)))
            if penalty:
                fh.write("penalty %.9g %d %s\n" % (penalty[0], len(penalty[1]), " ".join(map(str, penalty[1]))))
            fh.write("end\n")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("models", "reference") or (sys.argv[1] == "models" and len(sys.argv) > 3):
        sys.exit("usage: make_fixtures.py models DIR | reference DIR [FMT...]")
    if sys.argv[1] == "models":
        main_models(sys.argv[2])
    else:
        main_reference(sys.argv[2], sys.argv[3:])
