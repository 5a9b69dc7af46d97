#!/usr/bin/env python3
"""make_sampler_fixtures.py — transformers' logits processors on real logits, for tests/test_sampler.c.

Run where torch + transformers (5.x) exist; the CPU is enough and it takes seconds:
    python3 scripts/make_sampler_fixtures.py tests/data/sampler

What it does:
  * For the fixture models llama, qwen2 and qwen3 (MODELS) it builds the HF model of
    scripts/make_fixtures.py with the weights of its <name>-f32.gguf (make_fixtures'
    functions are imported, not copied), and checks that the prompt's top-21 logits match
    tests/data/fixtures/<name>.txt (so these are the fixture models' logits).
  * History = the fixture prompt + the first 8, and all 32, ids of its greedy continuation
    (the continuation repeats ids, which the repetition penalty must count once). Logits =
    the model's next-token logits after the history (float32, CPU, eager attention).
  * For several (penalty, temperature, top_k, top_p) settings it runs transformers' own
    RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper and
    TopPLogitsWarper, in generate()'s order, with input_ids = the history, on the CPU
    (on CUDA torch divides by a scalar by multiplying with its reciprocal: other bits), and
    records every stage and softmax(processed).
  * Settings with top_k 0 or above 64 (top-p < 1, top-k 100 and 200, temperatures 8 and 20
    that make the distribution nearly flat) keep more than 64 ids: the wide draw's cases.
  * A synthetic point with ties at the k-th logit shows what TopKLogitsWarper keeps there.

Output: argv[1]/sampler.txt, a line format the C test reads with fscanf (no JSON):

  # comments
  point NAME ARCH N_VOCAB          a logits vector; the cases below apply to it
  history N ID ...                 transformers' input_ids (for the penalty)
  logits N RUN ...                 the model's next-token logits
  case PENALTY TEMPERATURE TOP_K TOP_P   decimals as given to the Python processors;
                                   1.0 / 1.0 / 0 / 1.0 = that processor is not applied
  penalized N RUN ...              after RepetitionPenaltyLogitsProcessor
  tempered N RUN ...               after TemperatureLogitsWarper
  topk N RUN ...                   after TopKLogitsWarper
  processed N RUN ...              after TopPLogitsWarper: the final scores
  probs N RUN ...                  torch.softmax(processed, -1)
  margin X                         smallest |cumsum - (1 - top_p)| TopP compared (decimal;
                                   0 when top-p is off): how close a kept set was to changing
  end

A vector's N values are written as RUNs, which together give exactly N (the encoding is
lossless: each stage changes few values of the one before it, and masks many to one value):
  HEX      one value: the IEEE-754 binary32 bit pattern of a float32, 8 lowercase hex digits
           (3f800000 = 1.0, ff800000 = -inf)
  HEX*K    K values, each HEX (the masked -inf of topk and processed, the zeros of probs)
  =K       K values equal to those at the same places of the vector before it: a case's
           penalized continues from its point's logits, each other stage from the stage above
           it (logits itself has none before it)
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (scripts/make_fixtures.py: the fixture models)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fixtures")
CONTINUATION_PREFIXES = [8, 32]
# One fixture model per architecture (make_fixtures.VARIANTS has a tied and an untied one of
# each; the sampler sees only logits, so one each is enough).
MODELS = ["llama", "qwen2", "qwen3"]
# (repetition_penalty, temperature, top_k, top_p)
SETTINGS = [
    (1.1, 1.0, 0, 1.0),
    (1.3, 1.0, 0, 1.0),
    (1.1, 0.7, 40, 0.9),
    (1.3, 1.5, 20, 0.95),
    (1.1, 2.0, 0, 0.8),
    (1.3, 0.5, 5, 1.0),
    (1.0, 1.2, 50, 0.5),
    (1.1, 3.0, 10, 0.99),
    (1.3, 4.0, 64, 0.9),
    # The whole vocabulary (top_k 0 or above 64): sample_reference's wide draw, no cap.
    (1.0, 1.0, 0, 0.9),
    (1.1, 1.5, 0, 0.97),
    (1.0, 1.0, 100, 1.0),
    (1.1, 1.3, 200, 0.98),
    (1.0, 8.0, 0, 1.0),
    (1.3, 20.0, 0, 0.95),
]
# Ties at the k-th logit: TopKLogitsWarper keeps every id equal to the k-th value.
SYNTHETIC = [1.0, 3.0, 2.0, 3.0, 2.0, 2.0, 0.5, -1.0, 2.0, -0.5, 1.5, 0.25, 0.0, -2.0, 1.0, 2.5]
SYNTHETIC_SETTINGS = [(1.0, 1.0, 3, 1.0), (1.0, 1.0, 4, 1.0), (1.0, 0.8, 3, 0.9)]


def runs(bits, base=None):
    """bits (uint32, a float32 vector's bit patterns) as the docstring's RUNs, against base
    (the vector before it; None: no =K)."""
    out, i, n = [], 0, len(bits)
    while i < n:
        j = i
        if base is not None:
            while j < n and bits[j] == base[j]:
                j += 1
            if j - i >= 2:
                out.append("=%d" % (j - i))
                i = j
                continue
        j = i
        while j < n and bits[j] == bits[i]:
            j += 1
        out.append("%08x*%d" % (bits[i], j - i) if j - i >= 3 else "%08x" % bits[i])
        i = i + 1 if j - i < 3 else j
    return " ".join(out)


def bits_of(t):
    return t.detach().cpu().contiguous().to(torch.float32).numpy().reshape(-1).view(np.uint32)


def read_fixture_f32(name):
    """The f32 block of tests/data/fixtures/<name>.txt: prompt, continuation, and the top
    (id, logit) after the whole prompt."""
    out, fmt = {}, None
    with open(os.path.join(FIXTURES, f"{name}.txt")) as fh:
        for line in fh:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "format":
                fmt = w[1]
            elif fmt == "f32" and w[0] in ("prompt", "continuation"):
                out[w[0]] = [int(x) for x in w[2:]]
            elif fmt == "f32" and w[0] == "logits" and int(w[1]) == len(out["prompt"]):
                out["top"] = [(int(p.split(":")[0]), float(p.split(":")[1])) for p in w[3:]]
    return out


def load_model(name):
    """make_fixtures' HF model with the weights of <name>-f32.gguf (F32 holds them exactly)."""
    arch, a = mf.shapes(name)
    return mf.build_hf(arch, a, mf.fixture_weights(arch, a, mf.SEEDS[name]))


def run_case(f, ids, scores, penalty, temperature, top_k, top_p):
    from transformers import (RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
                              TopKLogitsWarper, TopPLogitsWarper)
    s = scores.clone().unsqueeze(0)
    stages = []
    if penalty != 1.0:
        s = RepetitionPenaltyLogitsProcessor(penalty=float(penalty))(ids, s.clone())
    stages.append(("penalized", s))
    if temperature != 1.0:
        s = TemperatureLogitsWarper(float(temperature))(ids, s.clone())
    stages.append(("tempered", s))
    if top_k > 0:
        s = TopKLogitsWarper(top_k=int(top_k))(ids, s.clone())
    stages.append(("topk", s))
    margin = 0.0
    if top_p < 1.0:
        srt = torch.sort(s, descending=False).values
        cum = srt.softmax(dim=-1).cumsum(dim=-1)
        gap = (cum - (1 - top_p)).abs()
        margin = float(gap[cum > 0].min()) if bool((cum > 0).any()) else 0.0
        s = TopPLogitsWarper(top_p=float(top_p))(ids, s.clone())
    stages.append(("processed", s))
    stages.append(("probs", torch.softmax(s, dim=-1)))
    f.write(f"case {penalty!r} {temperature!r} {top_k} {top_p!r}\n")
    base = bits_of(scores)
    for name, t in stages:
        f.write(f"{name} {t.numel()} {runs(bits_of(t), base)}\n")
        base = bits_of(t)
    f.write(f"margin {margin:.9g}\nend\n")
    kept = int(torch.isfinite(s).sum())
    return kept, margin


@torch.no_grad()
def main(outdir):
    import transformers
    torch.set_num_threads(4)
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "sampler.txt")
    with open(path, "w") as f:
        f.write(f"# lean sampler fixtures: transformers {transformers.__version__}, torch {torch.__version__} "
                "(CPU, float32); made by scripts/make_sampler_fixtures.py\n")
        f.write("# format: see that script's docstring; floats are float32 bit patterns in hex, in runs\n")
        for arch in MODELS:
            model = load_model(arch)
            fx = read_fixture_f32(arch)
            prompt, cont = fx["prompt"], fx["continuation"]
            first = model(torch.tensor([prompt])).logits[0, -1].float()
            for i, v in fx["top"]:
                assert abs(float(first[i]) - v) < 1e-4, f"{arch}: logit {i} {float(first[i])} vs fixture {v}"
            for n in CONTINUATION_PREFIXES:
                history = prompt + cont[:n]
                logits = model(torch.tensor([history])).logits[0, -1].float().contiguous()
                ids = torch.tensor([history])
                name = f"{arch}-{len(history)}"
                f.write(f"point {name} {arch} {logits.numel()}\n")
                f.write("history %d %s\n" % (len(history), " ".join(map(str, history))))
                f.write(f"logits {logits.numel()} {runs(bits_of(logits))}\n")
                for setting in SETTINGS:
                    kept, margin = run_case(f, ids, logits, *setting)
                    print(f"{name:10s} {setting} kept {kept:3d} margin {margin:.3g}", flush=True)
        logits = torch.tensor(SYNTHETIC, dtype=torch.float32)
        f.write(f"point ties synthetic {logits.numel()}\nhistory 0\nlogits {logits.numel()} {runs(bits_of(logits))}\n")
        for setting in SYNTHETIC_SETTINGS:
            kept, margin = run_case(f, torch.zeros((1, 0), dtype=torch.long), logits, *setting)
            print(f"ties       {setting} kept {kept:3d} margin {margin:.3g}", flush=True)
    print("wrote", path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_sampler_fixtures.py OUTDIR")
    main(sys.argv[1])
