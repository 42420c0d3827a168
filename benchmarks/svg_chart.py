"""Line charts of benchmark figures as SVG (no plotting library), and as PNG through headless Chromium.

A chart is panels side by side; each panel has categorical x values (the same spacing for each: library sizes
such as 0, 51, 500, 2,000 read best so), a linear or logarithmic y axis, and named series of (x, y) points.
`write(path, panels)` writes SVG, or PNG when `path` ends in `.png` (the SVG rendered by `chromium --headless
--screenshot`: Debian's `chromium` package; without it, a clear error, and the SVG is kept beside).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

WIDTH, HEIGHT = 560, 380
"""One panel's size in pixels."""
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 70, 20, 40, 110
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")
DASHES = ("", "6,4")


@dataclass
class Panel:
    title: str
    x_label: str
    y_label: str
    x_values: list[float]
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    log_y: bool = False


class ChartError(Exception):
    """The chart could not be written (no Chromium for a PNG)."""


def _ticks(low: float, high: float, log: bool) -> list[float]:
    if log:
        return [10.0 ** k for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]
    if high <= low:  # one value (all zero, say): a unit range above it
        high = low + 1
    step = 10 ** math.floor(math.log10(high - low))
    while (high - low) / step < 4:
        step /= 2
    return [k * step for k in range(math.floor(low / step), math.ceil(high / step) + 1)]


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:g}"


def _panel(panel: Panel, left: float) -> list[str]:
    """The SVG elements of one panel whose left edge is at `left`."""
    values = [y for points in panel.series.values() for _, y in points if not panel.log_y or y > 0]
    low, high = (min(values), max(values)) if values else (1.0, 10.0)
    if not panel.log_y:
        low = min(low, 0.0)
    ticks = _ticks(low, high, panel.log_y)
    low, high = ticks[0], ticks[-1]
    plot_w, plot_h = WIDTH - MARGIN_LEFT - MARGIN_RIGHT, HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    x0, y0 = left + MARGIN_LEFT, MARGIN_TOP

    def x_of(x: float) -> float:
        index = panel.x_values.index(x)
        return x0 + plot_w * (index + 0.5) / len(panel.x_values)

    def y_of(y: float) -> float:
        if panel.log_y:
            share = (math.log10(y) - math.log10(low)) / (math.log10(high) - math.log10(low))
        else:
            share = (y - low) / (high - low)
        return y0 + plot_h * (1 - share)

    out = [f'<text x="{left + WIDTH / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
           f'{escape(panel.title)}</text>',
           f'<rect x="{x0}" y="{y0}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>']
    for tick in ticks:
        y = y_of(tick)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_label(tick)}</text>')
    for x in panel.x_values:
        out.append(f'<text x="{x_of(x):.1f}" y="{y0 + plot_h + 16}" text-anchor="middle" font-size="11">'
                   f'{_label(x)}</text>')
    out.append(f'<text x="{x0 + plot_w / 2}" y="{y0 + plot_h + 34}" text-anchor="middle" font-size="12">'
               f'{escape(panel.x_label)}</text>')
    out.append(f'<text transform="translate({left + 16},{y0 + plot_h / 2}) rotate(-90)" text-anchor="middle" '
               f'font-size="12">{escape(panel.y_label)}</text>')
    for number, (name, points) in enumerate(panel.series.items()):
        colour, dash = COLOURS[number // 2 % len(COLOURS)], DASHES[number % 2]
        shown = [(x_of(x), y_of(y)) for x, y in points if not panel.log_y or y > 0]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in shown)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" '
                   f'stroke-dasharray="{dash}"/>')
        out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in shown]
        legend_y = y0 + plot_h + 52 + 16 * number
        out.append(f'<line x1="{x0}" y1="{legend_y - 4}" x2="{x0 + 24}" y2="{legend_y - 4}" stroke="{colour}" '
                   f'stroke-width="2" stroke-dasharray="{dash}"/>')
        out.append(f'<text x="{x0 + 30}" y="{legend_y}" font-size="11">{escape(name)}</text>')
    return out


def svg(panels: list[Panel], caption: str = "") -> str:
    """The chart: `panels` side by side, `caption` under them."""
    width, height = WIDTH * len(panels), HEIGHT + (20 if caption else 0)
    body = [element for n, panel in enumerate(panels) for element in _panel(panel, n * WIDTH)]
    if caption:
        body.append(f'<text x="10" y="{HEIGHT + 10}" font-size="11" fill="#555">{escape(caption)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif">'
            f'<rect width="{width}" height="{height}" fill="white"/>{"".join(body)}</svg>\n')


def write(path: Path, panels: list[Panel], caption: str = "") -> None:
    """`svg(panels, caption)` to `path`, rendered to PNG when it ends in `.png` (see the module docstring)."""
    text = svg(panels, caption)
    if path.suffix.lower() != ".png":
        path.write_text(text, encoding="utf-8")
        return
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        path.with_suffix(".svg").write_text(text, encoding="utf-8")
        raise ChartError(f"no chromium to render {path} (apt-get install chromium); the chart is in "
                         f"{path.with_suffix('.svg')}")
    width, height = WIDTH * len(panels), HEIGHT + (20 if caption else 0)
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "chart.html"
        page.write_text(f'<html><body style="margin:0">{text}</body></html>', encoding="utf-8")
        done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--screenshot={path.resolve()}", f"--window-size={width},{height}",
                               page.as_uri()], capture_output=True, text=True, timeout=120, cwd=scratch)
    if done.returncode != 0 or not path.is_file():
        raise ChartError(f"chromium could not render {path}: {done.stderr.strip()[-500:]}")
