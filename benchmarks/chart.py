"""A grouped bar chart of the benchmark ratios, as a self-contained SVG (no plotting library)."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

SERIES = [
    ("ours_over_cpython", "ours / CPython (time; above 1x = slower than CPython)", "#d9822b"),
    ("reference_over_ours", "reference / ours (time; above 1x = faster than the reference)", "#2b7bd9"),
]


def _ticks(lo: float, hi: float) -> list[float]:
    out = []
    for exp in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** exp
            if lo <= v <= hi:
                out.append(v)
    return out


def _fmt(v: float) -> str:
    if v >= 10:
        return f"{v:.0f}x"
    if v >= 1:
        return f"{v:.1f}x"
    return f"{v:.2f}x"


def render(rows: list[dict], title: str, subtitle: str = "") -> str:
    """``rows``: [{"name": str, "ratios": {series key: float | None}}]; log-scale bars from 1x."""
    values = [r["ratios"].get(k) for r in rows for k, _, _ in SERIES]
    values = [v for v in values if v]
    lo = min([0.5] + [v / 1.6 for v in values])
    hi = max([2.0] + [v * 1.6 for v in values])
    group_w, bar_w, left, right, top, plot_h = 84, 28, 64, 24, 96, 260
    width = max(520, left + right + max(1, len(rows)) * group_w)
    height = top + plot_h + 96

    def y(v: float) -> float:
        return top + plot_h * (math.log10(hi) - math.log10(v)) / (math.log10(hi) - math.log10(lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="15" font-weight="bold">{escape(title)}</text>',
        f'<text x="{left}" y="37" fill="#555">{escape(subtitle)}</text>',
    ]
    for i, (_, label, color) in enumerate(SERIES):
        ly = 48 + i * 18
        parts.append(f'<rect x="{left}" y="{ly}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{left + 17}" y="{ly + 10}">{escape(label)}</text>')
    for t in _ticks(lo, hi):
        ty = y(t)
        stroke = "#444" if t == 1 else "#ddd"
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{ty:.1f}" y2="{ty:.1f}" '
                     f'stroke="{stroke}"/>')
        parts.append(f'<text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">{t:g}x</text>')
    base = y(1.0)
    for gi, row in enumerate(rows):
        gx = left + gi * group_w + (group_w - bar_w * len(SERIES)) / 2
        for si, (key, _, color) in enumerate(SERIES):
            bx = gx + si * bar_w
            v = row["ratios"].get(key)
            if not v:
                parts.append(f'<text x="{bx + bar_w / 2:.1f}" y="{base - 4:.1f}" fill="#999" '
                             f'text-anchor="middle" font-size="9">n/a</text>')
                continue
            vy = y(v)
            ry, rh = min(vy, base), abs(base - vy)
            parts.append(f'<rect x="{bx + 2:.1f}" y="{ry:.1f}" width="{bar_w - 4}" '
                         f'height="{max(rh, 1):.1f}" fill="{color}"><title>{escape(row["name"])}: '
                         f'{_fmt(v)}</title></rect>')
            ly = vy - 3 if v >= 1 else vy + 10
            parts.append(f'<text x="{bx + bar_w / 2:.1f}" y="{ly:.1f}" text-anchor="middle" '
                         f'font-size="9">{_fmt(v)}</text>')
        cx = left + gi * group_w + group_w / 2
        ny = top + plot_h + 14
        parts.append(f'<text x="{cx:.1f}" y="{ny}" text-anchor="end" '
                     f'transform="rotate(-30 {cx:.1f} {ny})">{escape(row["name"])}</text>')
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" stroke="#444"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
