"""corpus.py — the demo model's training text, extracted from two Debian packages.

    apt-get install -y fortunes fortunes-min wordnet-base
    python3 scripts/demo/corpus.py OUT_DIR [--seed 1]

Writes OUT_DIR/text.jsonl (one JSON string per line: a document for plain pretraining) and
OUT_DIR/chat.jsonl (one JSON list of {"role", "content"} messages per line), ASCII only.

Sources and licences (both permit redistribution of derived works with their notice kept;
docs/demo_model.md repeats the notices):
  fortunes      /usr/share/games/fortunes: the BSD fortune files, BSD licence (The Regents of
                the University of California; /usr/share/doc/fortunes/copyright), those named
                in FORTUNE_FILES (what is left out, and why, is said there).
  WordNet 3.0   /usr/share/wordnet/{data,index}.{noun,verb,adj,adv}: Princeton's WordNet 3.0
                licence (/usr/share/doc/wordnet-base/copyright): glosses and their examples.

What is made of them:
  text   each fortune as a document; WordNet synsets as dictionary prose ("A dog is a member
         of the genus Canis ...", "To run is to move fast by using one's feet.") followed by
         the synset's example sentences, 8 synsets to a document.
  chat   questions the model is tuned to answer, each answered from the data: "What does WORD
         mean?" (and rephrasings) from the first two senses in WordNet's sense order, "Use
         WORD in a sentence." from the examples, "What is another word for WORD?" from the
         synset, "Tell me a fortune." (and rephrasings) with a short fortune, and greetings
         that say what the model is.

Seeded (random.Random(seed)): the same packages give the same files.
"""
import argparse
import json
import os
import random
import re
import unicodedata

FORTUNE_DIR = "/usr/share/games/fortunes"
WORDNET_DIR = "/usr/share/wordnet"
# The files of Debian's fortunes and fortunes-min packages that are used, named so that other
# fortune packages on a machine change nothing. Left out: pratchett, startrek, zippy,
# songs-poems, tao (quoting copyrighted fiction, comics, songs), translate-me (not English),
# ascii-art (pictures), ethnic, men-women, drugs (the likeliest to offend).
FORTUNE_FILES = ["art", "computers", "cookie", "debian", "definitions", "disclaimer", "education", "food",
                 "fortunes", "goedel", "humorists", "kids", "knghtbrd", "law", "linux", "linuxcookie",
                 "literature", "love", "magic", "medicine", "miscellaneous", "news", "paradoxum", "people",
                 "perl", "pets", "platitudes", "politics", "riddles", "science", "sports", "wisdom", "work"]
N_DEFINE = 60000  # lemmas asked about: keeps chat at about half of the plain text's bytes
POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
POS_WORD = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}


def ascii_text(s):
    """s as ASCII: overstrikes ("_\\bX") resolved, accents dropped, other characters removed."""
    while "\b" in s:
        s = re.sub(r".\x08", "", s)
        s = s.replace("\b", "")
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode("ascii")
    s = s.replace("\t", "    ").replace("\r", "")
    return "".join(c for c in s if c == "\n" or 32 <= ord(c) < 127)


def read_fortunes():
    out = []
    for name in FORTUNE_FILES:
        with open(os.path.join(FORTUNE_DIR, name), encoding="utf-8", errors="replace") as f:
            for entry in re.split(r"\n%\n", f.read()):
                entry = ascii_text(entry).strip("\n")
                entry = re.sub(r"\n{3,}", "\n\n", entry)
                if len(entry.strip()) >= 8:
                    out.append(entry)
    return out


def read_wordnet():
    """{offset+pos: (pos, words, definition, examples)} and {(lemma, pos): [synset keys]}."""
    synsets, senses = {}, {}
    for pos_name, pos in POS.items():
        with open(os.path.join(WORDNET_DIR, "data." + pos_name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue                             # the licence header
                head, _, gloss = line.partition(" | ")
                fields = head.split()
                n_words = int(fields[3], 16)
                words = [re.sub(r"\(.*\)$", "", w).replace("_", " ") for w in fields[4:4 + 2 * n_words:2]]
                gloss = ascii_text(gloss.strip())
                examples = re.findall(r'"([^"]+)"', gloss)
                definition = gloss.split('; "')[0].split(';"')[0].strip().rstrip(";").strip()
                synsets[fields[0] + pos] = (fields[2], words, definition, examples)
        with open(os.path.join(WORDNET_DIR, "index." + pos_name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                fields = line.split()
                n_synsets = int(fields[2])
                senses[(fields[0].replace("_", " "), pos)] = [o + pos for o in fields[-n_synsets:]]
    return synsets, senses


def article(phrase):
    return "An" if phrase[:1].lower() in "aeiou" else "A"


def synset_prose(pos, words, definition):
    """One sentence saying what the synset's first word means, in plain English."""
    w = words[0]
    d = definition.rstrip(".")
    if pos == "n":
        return f"{article(w)} {w} is {d}."
    if pos == "v":
        return f"To {w} is to {d}."
    return f"{w[:1].upper() + w[1:]} means {d}."


def sentence(s):
    s = s.strip()
    s = s[:1].upper() + s[1:]
    return s if s[-1:] in ".!?" else s + "."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    fortunes = read_fortunes()
    synsets, senses = read_wordnet()

    texts = list(fortunes)
    keys = sorted(synsets)
    rng.shuffle(keys)
    for i in range(0, len(keys), 8):
        lines = []
        for k in keys[i:i + 8]:
            pos, words, definition, examples = synsets[k]
            if not definition:
                continue
            lines.append(" ".join([synset_prose(pos, words, definition)] + [sentence(e) for e in examples]))
        texts.append("\n".join(lines))

    chats = []

    def chat(q, ans):
        chats.append([{"role": "user", "content": q}, {"role": "assistant", "content": ans}])

    define_q = ["What does {w} mean?", "What is the meaning of {w}?", "Define {w}.",
                "What does the word {w} mean?", "Can you tell me what {w} means?"]
    lemmas = sorted(senses)
    rng.shuffle(lemmas)
    for lemma, pos in lemmas[:N_DEFINE]:
        keys = senses[(lemma, pos)]
        first = synsets[keys[0]]
        if not first[2]:
            continue
        lemma = next((w for w in first[1] if w.lower() == lemma), lemma)  # the index is lower case
        parts = [f"{lemma[:1].upper() + lemma[1:]} is {article(POS_WORD[first[0]]).lower()} "
                 f"{POS_WORD[first[0]]}: {first[2].rstrip('.')}."]
        if len(keys) > 1 and synsets[keys[1]][2]:
            parts.append(f"It can also mean {synsets[keys[1]][2].rstrip('.')}.")
        if first[3]:
            parts.append(f"For example: \"{first[3][0]}\".")
        chat(rng.choice(define_q).format(w=lemma), " ".join(parts))
        if first[3] and rng.random() < 0.3:
            chat(f"Use {lemma} in a sentence.", sentence(rng.choice(first[3])))
        others = [w for w in first[1] if w.lower() != lemma.lower()]
        if others and rng.random() < 0.3:
            chat(f"What is another word for {lemma}?",
                 f"Another word for {lemma} is {others[0]}." +
                 (f" You could also say {', '.join(others[1:3])}." if len(others) > 1 else ""))

    fortune_q = ["Tell me a fortune.", "Give me a fortune.", "Tell me something wise.",
                 "Say something funny.", "I need a fortune cookie.", "Tell me a quote."]
    short = [f for f in fortunes if len(f) <= 400]
    for f in short:
        chat(rng.choice(fortune_q), f)
    about = ("I am a small demonstration model trained by the lean project on fortune cookies and "
             "WordNet. Ask me what a word means, or ask me for a fortune.")
    for q in ["Hello!", "Hi.", "Who are you?", "What are you?", "What can you do?", "Hello, who are you?",
              "Good morning.", "What can I ask you?"]:
        for _ in range(40):
            chat(q, about)
    rng.shuffle(chats)

    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "text.jsonl"), "w", encoding="ascii") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
    with open(os.path.join(a.out_dir, "chat.jsonl"), "w", encoding="ascii") as f:
        for c in chats:
            f.write(json.dumps(c) + "\n")
    n_text = sum(len(t) for t in texts)
    n_chat = sum(len(m["content"]) for c in chats for m in c)
    print(f"{a.out_dir}: {len(fortunes)} fortunes, {len(synsets)} synsets -> {len(texts)} documents "
          f"({n_text} bytes); {len(chats)} chats ({n_chat} bytes)")


if __name__ == "__main__":
    main()
