"""plot.py — the demo model's loss curve as an SVG image, from train.py's train_log.tsv.

    python3 scripts/demo/plot.py train_log.tsv OUT.svg [--title TEXT]

Training and held-out loss (nats per token) against tokens seen. Plain python3: the SVG is
written by hand (no plotting library on these machines).
"""
import argparse

W, H, L, R, T, B = 640, 400, 60, 20, 40, 50   # size and margins in pixels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--title", default="lean-demo: loss per token")
    a = ap.parse_args()
    with open(a.log) as f:
        head = f.readline().split()
        rows = [dict(zip(head, map(float, line.split()))) for line in f if line.strip()]
    xs = [r["tokens"] / 1e6 for r in rows]
    series = [("train", "#1f77b4", [r["train_loss"] for r in rows]), ("held out", "#d62728", [r["val_loss"] for r in rows])]
    y_lo = min(min(s[2]) for s in series)
    y_hi = max(max(s[2]) for s in series)
    y_lo, y_hi = int(y_lo * 2) / 2, int(y_hi * 2 + 1) / 2
    x_hi = max(xs) or 1
    px = lambda x: L + (W - L - R) * x / x_hi  # noqa: E731
    py = lambda y: T + (H - T - B) * (y_hi - y) / (y_hi - y_lo)  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{a.title}</text>']
    y = y_lo
    while y <= y_hi + 1e-9:
        o.append(f'<line x1="{L}" x2="{W - R}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>'
                 f'<text x="{L - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
        y += 0.5
    for i in range(6):
        x = x_hi * i / 5
        o.append(f'<text x="{px(x):.1f}" y="{H - B + 18}" text-anchor="middle">{x:.0f}</text>')
    o.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">tokens seen (millions)</text>')
    o.append(f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="black"/>'
             f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="black"/>')
    for k, (name, color, ys) in enumerate(series):
        pts = " ".join(f"{px(x):.1f},{py(v):.1f}" for x, v in zip(xs, ys))
        o.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>')
        o.append(f'<text x="{W - R - 90}" y="{T + 16 + 16 * k}" fill="{color}">{name}</text>')
    o.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
