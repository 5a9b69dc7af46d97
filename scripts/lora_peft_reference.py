#!/usr/bin/env python3
"""lora_peft_reference.py — transformers + PEFT references for LoRA on the parity models
(issue 28 item 2: logits within 1e-3 of transformers + PEFT). Needs torch, transformers and
peft (the H200 machine; the CPU is enough, a minute or two); NOT run on the CI machine.

    python3 scripts/lora_peft_reference.py tests/data/lora/peft     (after `make test-data`)

For each fixture model (scripts/make_fixtures.py's VARIANTS, weights from its fixture_weights:
the F32 file's exact values) it
  1. builds the HF model (make_fixtures.build_hf) and wraps it with PEFT's LoraConfig(r=8,
     lora_alpha=16, dropout 0) on q/k/v/o/gate/up/down (and lm_head when the output is untied),
  2. sets every lora_A (r, in) and lora_B (out, r) from numpy's RandomState (seeded; B is not
     zero, or the adapter would do nothing),
  3. writes the adapter as llama.cpp's convert_lora_to_gguf.py does: general.type "adapter",
     adapter.type "lora", adapter.lora.alpha 16, NAME.lora_a = lora_A (ne [in, r]) and
     NAME.lora_b = lora_B (ne [r, out]) in F32, where for llama the rows of q/k's lora_B are
     permuted as the converter permutes q/k's weight rows (LlamaModel.permute), since B's rows
     are W's output rows; into OUTDIR/NAME-peft.gguf,
  4. records PEFT's top-21 (id, logit) at prompt positions 4, 8 and 16 of the fixture's f32
     prompt in tests/data/lora/peft/peft-NAME.txt, in make_lora.py's format (one case, "peft",
     the adapter at scale 1).
Both are committed in tests/data/lora/peft/ (run with transformers 5.17.0 + peft 0.21.0 on
2026-12-05): the CI machine has no torch to remake them. lean's side: test_lora and
test_gpu_lora (tests/lora_ref.h's LORA_PEFT) hold cpu-ref, the CPU's exact kernels and the GPU's
exact path to them within 1e-3, with build/fixtures/NAME-f32.gguf.
"""
import hashlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf  # noqa: E402
import make_fixtures as mf  # noqa: E402
from make_lora import POSITIONS, TOPK, fixture_prompt  # noqa: E402

RANK, ALPHA, STRENGTH = 8, 16.0, 0.5
MODULES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
           "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}


def main(outdir):
    import torch
    from peft import LoraConfig, get_peft_model
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(outdir, exist_ok=True)
    data = os.path.join(HERE, "..", "tests", "data", "lora", "peft")
    for k, name in enumerate(mf.VARIANTS):
        arch, a = mf.shapes(name)
        model = mf.build_hf(arch, a, mf.fixture_weights(arch, a, mf.SEEDS[name]))
        targets = list(MODULES) + ([] if a["tied"] else ["lm_head"])
        pm = get_peft_model(model, LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=targets,
                                              bias="none", init_lora_weights=True)).eval()
        rng = np.random.RandomState(4242 + k)
        s = ALPHA / RANK
        w = gguf.GGUFWriter()
        w.add_string("general.architecture", arch)
        w.add_string("general.type", "adapter")
        w.add_string("general.name", f"lean PEFT reference {name}")
        w.add_string("adapter.type", "lora")
        w.add_float32("adapter.lora.alpha", ALPHA)
        for mname, mod in sorted(pm.named_modules()):
            if not hasattr(mod, "lora_A") or "default" not in mod.lora_A:
                continue
            la, lb = mod.lora_A["default"].weight, mod.lora_B["default"].weight  # (r, in), (out, r)
            A = (rng.standard_normal(tuple(la.shape)) / np.sqrt(la.shape[1])).astype(np.float32)
            B = (rng.standard_normal(tuple(lb.shape)) * STRENGTH / (s * np.sqrt(RANK))).astype(np.float32)
            with torch.no_grad():
                la.copy_(torch.from_numpy(A))
                lb.copy_(torch.from_numpy(B))
            short = mname.split(".")[-1]
            if short == "lm_head":
                gname = "output.weight"
            else:
                layer = int(mname.split("layers.")[1].split(".")[0])
                gname = f"blk.{layer}.{MODULES[short]}.weight"
                if arch == "llama" and short in ("q_proj", "k_proj"):
                    B = np.ascontiguousarray(mf.permute(B, a["heads"] if short == "q_proj" else a["kv"]))
            w.add_tensor(gname + ".lora_a", gguf.F32, [A.shape[1], A.shape[0]], A.tobytes())
            w.add_tensor(gname + ".lora_b", gguf.F32, [B.shape[1], B.shape[0]], B.tobytes())
        path = os.path.join(outdir, f"{name}-peft.gguf")
        w.write(path)
        with open(path, "rb") as fh:
            sha = hashlib.sha256(fh.read()).hexdigest()
        ids = fixture_prompt(name)
        with torch.no_grad():
            logits = pm(torch.tensor([ids])).logits[0].double().numpy()
        import peft
        import transformers
        lines = [f"# transformers {transformers.__version__} + peft {peft.__version__} reference of {name}-f32.gguf "
                 f"with a random LoRA; made by scripts/lora_peft_reference.py",
                 f"model {name}-f32.gguf", f"adapter peft {sha}",
                 "prompt %d %s" % (len(ids), " ".join(map(str, ids))), "case peft 1 peft:1.0"]
        for pos in POSITIONS:
            row = logits[pos - 1]
            top = np.lexsort((np.arange(len(row)), -row))[:TOPK]
            lines.append("logits %d %d %s" % (pos, TOPK, " ".join(f"{i}:{row[i]:.9g}" for i in top)))
        lines.append("end")
        with open(os.path.join(data, f"peft-{name}.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"{name}: {path} {sha[:12]}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
