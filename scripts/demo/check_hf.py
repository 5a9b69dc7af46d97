"""check_hf.py — holds the demo model's pieces to Hugging Face's libraries:
  1. train.py's model math to transformers' LlamaForCausalLM on the GGUF's weights (Q8_0
     dequantized, attn_q / attn_k un-permuted: scripts/demo/check_model.py's loader), both in
     float32 on the same 2 x 256 ids: the largest logit difference must be within 1e-3 (the
     parity bound lean's fixtures use);
  2. bpe.py's encoder (what the model was trained on, and what lean agrees with:
     check_tokenizer.py) to HF tokenizers running the tokenizer.json, on texts with
     contractions, digits, runs of spaces and newlines, and a ChatML conversation.

    python3 scripts/demo/check_hf.py MODEL.gguf TOKENIZER.json

Exits 1 on a failure. Needs torch, transformers and tokenizers (the GPU machine has them;
this machine has neither of the last two).
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import check_model  # noqa: E402


def hf_model(path):
    """(train.py's model, transformers' LlamaForCausalLM) on the GGUF's weights, both float32."""
    from transformers import LlamaConfig, LlamaForCausalLM
    ours = check_model.load(path)
    c = ours.c
    cfg = LlamaConfig(vocab_size=c["n_vocab"], hidden_size=c["n_embd"], intermediate_size=c["n_ff"],
                      num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
                      num_key_value_heads=c["n_head"], max_position_embeddings=c["n_ctx"],
                      rms_norm_eps=c["eps"], tie_word_embeddings=True, attention_bias=False, mlp_bias=False)
    # RoPE base: transformers' default, 10000, is the demo's; a different one fails the comparison
    hf = LlamaForCausalLM(cfg).float().eval()
    sd = {"model.embed_tokens.weight": ours.embed.weight, "model.norm.weight": ours.norm.weight,
          "lm_head.weight": ours.embed.weight}
    for i, b in enumerate(ours.blocks):
        p = f"model.layers.{i}."
        sd.update({p + "input_layernorm.weight": b.attn_norm.weight, p + "self_attn.q_proj.weight": b.q.weight,
                   p + "self_attn.k_proj.weight": b.k.weight, p + "self_attn.v_proj.weight": b.v.weight,
                   p + "self_attn.o_proj.weight": b.o.weight, p + "post_attention_layernorm.weight": b.ffn_norm.weight,
                   p + "mlp.gate_proj.weight": b.gate.weight, p + "mlp.up_proj.weight": b.up.weight,
                   p + "mlp.down_proj.weight": b.down.weight})
    missing, unexpected = hf.load_state_dict({k: v.detach().clone() for k, v in sd.items()}, strict=False)
    missing = [k for k in missing if "rotary" not in k]
    if missing or unexpected:
        sys.exit(f"check_hf: missing {missing}, unexpected {unexpected}")
    return ours, hf


def main():
    path = sys.argv[1]
    ours, hf = hf_model(path)
    tok = bpe.Tokenizer(path)
    text = ("A dog is a member of the genus Canis that has been domesticated by man since prehistoric times. "
            "Tell me a fortune. You will be married within a year. ") * 16
    ids = torch.tensor(tok.encode(text)[:512]).view(2, 256)
    with torch.no_grad():
        a = ours(ids)
        b = hf(ids).logits
    diff = float((a - b).abs().max())
    agree = float((a.argmax(-1) == b.argmax(-1)).float().mean())
    print(f"check_hf: train.py's model vs transformers {__import__('transformers').__version__} "
          f"LlamaForCausalLM: max |logit diff| {diff:.2e}, argmax agreement {agree:.4f}")
    ok = diff <= 1e-3
    from tokenizers import Tokenizer as HFTokenizer
    hft = HFTokenizer.from_file(sys.argv[2])
    texts = ["It's 1984, and they'll say we've won 12,345 games!", "  two  spaces\n\n\tand a tab\n",
             "A dog is a member of the genus Canis.", "What does the word ocean mean?", "x" * 40 + " ...?!"]
    for t in texts:
        want, got = tok.encode(t), hft.encode(t, add_special_tokens=False).ids
        if want != got:
            print(f"check_hf: tokenizers differs on {t!r}: bpe.py {want}, tokenizers {got}")
            ok = False
    conv = [{"role": "user", "content": "Tell me a fortune."}, {"role": "assistant", "content": "You will see."}]
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conv)
    if tok.render_chat(conv) != hft.encode(text, add_special_tokens=False).ids:
        print(f"check_hf: tokenizers differs on the conversation {text!r}")
        ok = False
    print(f"check_hf: bpe.py and tokenizers {__import__('tokenizers').__version__}: "
          f"{'the same ids' if ok else 'DIFFERENT'} on {len(texts)} texts and a conversation")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
