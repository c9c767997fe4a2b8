#!/usr/bin/env python3
"""Scaling curves from a bench/run.sh results file, as a standalone SVG (stdlib only).

    python3 bench/plot.py [RESULTS.json] [OUT.svg]
    (defaults: target/bench/results.json, bench/scaling.svg)

Three panels against the number of supervised children (log x): the supervisor's own memory
(PSS, MiB, log y), its idle CPU (s/min, linear y) and the start-up time (s, log y).
"""
import json
import math
import sys
from pathlib import Path
from xml.sax.saxutils import escape

COLORS = {"vigil": "#d62728", "supervisord": "#1f77b4", "runit": "#2ca02c", "s6": "#9467bd",
          "horust": "#ff7f0e"}
PW, PH = 300, 220  # plot area of one panel
ML, MR, MT, MB = 62, 18, 34, 44  # margins of one panel


def nice_linear(hi):
    if hi <= 0:
        return [0, 1]
    step = 10 ** math.floor(math.log10(hi / 4))
    for m in (1, 2, 2.5, 5, 10):
        if hi / (step * m) <= 5:
            step *= m
            break
    n = math.ceil(hi / step)
    return [round(i * step, 10) for i in range(n + 1)]


def log_ticks(lo, hi):
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** e for e in range(a, b + 1)]


def label(v):
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 1:
        return f"{v:g}"
    return f"{v:.3g}"


def panel(x0, title, series, xs_all, ylog, ylabel):
    """series: name -> [(x, y)]. Returns SVG elements for one panel at offset x0."""
    out = []
    ys = [y for pts in series.values() for _, y in pts if y is not None and (y > 0 or not ylog)]
    if not ys:
        return out
    xlo, xhi = math.log10(min(xs_all)), math.log10(max(xs_all))
    if ylog:
        yt = log_ticks(min(ys), max(ys))
        ylo, yhi = math.log10(yt[0]), math.log10(yt[-1])
    else:
        yt = nice_linear(max(ys))
        ylo, yhi = yt[0], yt[-1]

    def px(x):
        return x0 + ML + (math.log10(x) - xlo) / (xhi - xlo or 1) * PW

    def py(y):
        v = math.log10(y) if ylog else y
        return MT + PH - (v - ylo) / (yhi - ylo or 1) * PH

    out.append(f'<text x="{x0 + ML + PW / 2}" y="{MT - 14}" text-anchor="middle" font-weight="bold">'
               f"{escape(title)}</text>")
    out.append(f'<rect x="{x0 + ML}" y="{MT}" width="{PW}" height="{PH}" fill="none" stroke="#888"/>')
    for y in yt:
        yy = py(y)
        out.append(f'<line x1="{x0 + ML}" y1="{yy:.1f}" x2="{x0 + ML + PW}" y2="{yy:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 + ML - 5}" y="{yy + 4:.1f}" text-anchor="end">{label(y)}</text>')
    for x in sorted(set(xs_all)):
        xx = px(x)
        out.append(f'<line x1="{xx:.1f}" y1="{MT}" x2="{xx:.1f}" y2="{MT + PH}" stroke="#eee"/>')
        out.append(f'<text x="{xx:.1f}" y="{MT + PH + 16}" text-anchor="middle">{x}</text>')
    out.append(f'<text x="{x0 + ML + PW / 2}" y="{MT + PH + 34}" text-anchor="middle">children (log)</text>')
    out.append(f'<text transform="translate({x0 + 14},{MT + PH / 2}) rotate(-90)" text-anchor="middle">'
               f"{escape(ylabel)}</text>")
    for name, pts in series.items():
        pts = [(x, y) for x, y in pts if y is not None and (y > 0 or not ylog)]
        if not pts:
            continue
        c = COLORS.get(name, "#333")
        d = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(pts))
        w = 3 if name == "vigil" else 1.8
        out.append(f'<path d="{d}" fill="none" stroke="{c}" stroke-width="{w}"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>')
    return out


def main():
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "target/bench/results.json")
    dst = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).with_name("scaling.svg"))
    res = json.loads(src.read_text())
    idle = res["summary"]["idle"]
    tools = [t for t in res["tools"] if t in idle]
    sizes = res["params"]["sizes"]

    def series(key, scale=1.0):
        return {t: [(n, (idle[t].get(str(n), {}).get(key) or 0) * scale if idle[t].get(str(n), {}).get(key)
                     is not None else None) for n in sizes] for t in tools}

    panels = [
        ("Supervisor memory (PSS)", series("pss_kib", 1 / 1024), True, "MiB"),
        ("Idle CPU of the supervisor", series("cpu_s_per_min"), False, "CPU s/min"),
        ("Start-up: all children running", series("startup_s"), True, "seconds"),
    ]
    pw = ML + PW + MR
    width, height = pw * len(panels), MT + PH + MB + 40
    els = []
    for i, (title, s, ylog, yl) in enumerate(panels):
        els += panel(i * pw, title, s, sizes, ylog, yl)
    lx = ML
    for t in tools:
        c = COLORS.get(t, "#333")
        els.append(f'<rect x="{lx}" y="{height - 22}" width="14" height="4" fill="{c}"/>')
        els.append(f'<text x="{lx + 18}" y="{height - 16}">{escape(t)}</text>')
        lx += 30 + 8 * len(t)
    m = res.get("machine", {})
    rounds = res["params"].get("rounds", "?")
    how = "1 round" if rounds == 1 else f"medians of {rounds} rounds"
    note = f"bench/run.sh, {m.get('date', '')}, {m.get('cpus', '?')} vCPU, kernel {m.get('kernel', '?')}; {how}"
    els.append(f'<text x="{width - 8}" y="{height - 16}" text-anchor="end" fill="#666">{escape(note)}</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">\n'
           f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(els) + "\n</svg>\n")
    dst.write_text(svg)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
