"""The gate's HTML report: one self-contained file (tables, and matplotlib plots embedded as base64 PNG)."""
from __future__ import annotations

import base64
import html
import io
import math
from collections import defaultdict
from pathlib import Path
from statistics import median

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global figure state

FLOOR = 1e-3  # ratios below this (0 for bitwise-exact results) are drawn at it on the log axes
COLORS = {"baseline": "tab:blue", "candidate": "tab:orange"}


def _judged(report: dict) -> list[dict]:
    return [r for r in report["records"] if r["ratios"]]


def drift(baseline: dict, candidate: dict) -> list[tuple]:
    """[(target, kind, (median, max) baseline, (median, max) candidate)] of the error-to-bound ratios."""
    ratios = defaultdict(lambda: ([], []))
    for i, report in enumerate((baseline, candidate)):
        for r in _judged(report):
            for kind, ratio in r["ratios"].items():
                ratios[(r["target"], kind)][i].append(ratio)
    stats = lambda xs: (median(xs), max(xs)) if xs else (math.nan, math.nan)
    return [(*key, stats(b), stats(c)) for key, (b, c) in sorted(ratios.items())]


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def histograms(sides) -> str | None:
    """Per target: the distribution of each example's worst error-to-bound ratio, baseline vs candidate."""
    worst = defaultdict(lambda: defaultdict(list))  # target -> side -> [max ratio of one example]
    for side in sides:
        for r in _judged(side.report):
            worst[r["target"]][side.name].append(max(max(r["ratios"].values()), FLOOR))
    if not worst:
        return None
    every = [x for per_side in worst.values() for xs in per_side.values() for x in xs]
    bins = np.logspace(math.log10(FLOOR), math.log10(max(max(every), 2.0)), 41)
    cols = min(len(worst), 3)
    rows = math.ceil(len(worst) / cols)
    fig = Figure(figsize=(5 * cols, 3.2 * rows), layout="tight")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (target, per_side) in zip(axes.flat, sorted(worst.items())):
        for side, style in zip(sides, (dict(histtype="stepfilled", alpha=0.35), dict(histtype="step", linewidth=2))):
            xs = per_side.get(side.name, [])
            ax.hist(xs, bins=bins, color=COLORS[side.name], label=f"{side.name} ({len(xs)})", **style)
        ax.axvline(1.0, color="red", linestyle="--", linewidth=1, label="bound")
        ax.set(xscale="log", title=target, xlabel=f"worst error / bound per example (< {FLOOR:g} at {FLOOR:g})",
               ylabel="examples")
        ax.legend(fontsize=8)
    for ax in axes.flat[len(worst):]:
        ax.axis("off")
    return _png(fig)


def heatmaps(sides) -> str | None:
    """Per side: the worst error-to-bound ratio over all targets and kinds, by T and state dtype."""
    cells = [defaultdict(float) for _ in sides]  # (state dtype, T) -> worst ratio
    for cell, side in zip(cells, sides):
        for r in _judged(side.report):
            key = (r["state_dtype"], r["T"])
            cell[key] = max(cell[key], max(r["ratios"].values()), FLOOR)
    if not any(cells):
        return None
    dtypes = sorted({d for c in cells for d, _ in c}, key=lambda d: (d != "fp32", d))
    ts = sorted({t for c in cells for _, t in c})
    logs = [math.log10(v) for c in cells for v in c.values()]
    norm = TwoSlopeNorm(vcenter=0.0, vmin=min(min(logs), -1.0), vmax=max(max(logs), 1.0))  # white at the bound
    cmap = colormaps["coolwarm"].with_extremes(bad="white")
    fig = Figure(figsize=(max(5.0, 0.75 * len(ts) + 2) * len(sides), 1.2 * len(dtypes) + 2), layout="constrained")
    axes = fig.subplots(1, len(sides))
    for ax, cell, side in zip(axes, cells, sides):
        grid = np.ma.masked_invalid([[math.log10(cell[(d, t)]) if (d, t) in cell else np.nan for t in ts]
                                     for d in dtypes])
        image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
        for (i, j), v in np.ndenumerate(grid.filled(np.nan)):
            dark = not math.isnan(v) and abs(norm(v) - 0.5) > 0.3
            ax.text(j, i, "none" if math.isnan(v) else f"{10 ** v:.2g}", ha="center", va="center", fontsize=9,
                    color="white" if dark else "black")
        ax.set(xticks=range(len(ts)), xticklabels=ts, yticks=range(len(dtypes)), yticklabels=dtypes,
               xlabel="T (prefill: longest sequence)", title=f"{side.name}: worst error / bound")
    axes[0].set_ylabel("state dtype")
    fig.colorbar(image, ax=list(axes), label="log10(worst error / bound); 0 = bound")
    return _png(fig)


def coverage(sides) -> str | None:
    """Per target: distinct dispatch buckets hit by both sides, by one side only."""
    hit = defaultdict(lambda: defaultdict(set))  # target -> side -> buckets
    for side in sides:
        for r in side.report["records"]:
            hit[r["target"]][side.name].add(r["bucket"])
    if not hit:
        return None
    targets = sorted(hit)
    base, cand = ([hit[t][s.name] for t in targets] for s in sides)
    parts = [("both", [len(b & c) for b, c in zip(base, cand)], "tab:green"),
             (f"{sides[0].name} only", [len(b - c) for b, c in zip(base, cand)], COLORS[sides[0].name]),
             (f"{sides[1].name} only", [len(c - b) for b, c in zip(base, cand)], COLORS[sides[1].name])]
    fig = Figure(figsize=(8, 0.5 * len(targets) + 1.5))
    ax = fig.subplots()
    left = np.zeros(len(targets))
    for label, counts, color in parts:
        bars = ax.barh(targets, counts, left=left, color=color, label=label)
        ax.bar_label(bars, labels=[str(c) if c else "" for c in counts], label_type="center", fontsize=8)
        left += counts
    ax.invert_yaxis()
    ax.set(xlabel="distinct dispatch buckets (fuzz.run.harness.dispatch_bucket) hit", title="dispatch-bucket coverage")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return _png(fig)


def _table(head: list[str], rows: list[list]) -> str:
    cell = lambda x: f"{x:.3g}" if isinstance(x, float) else html.escape(str(x))
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{cell(x)}</td>" for x in row) + "</tr>" for row in rows) + "</table>")


def write_html(path: Path, sides, rows: dict) -> None:
    counts = {status: len(found) for status, found in rows.items()}
    verdict = "FAIL: new failures" if rows["new"] else "PASS: no new failures"
    parts = [f"<h1>gdn-fuzz gate: {html.escape(verdict)}</h1>",
             _table(["", *counts], [["failures", *counts.values()]]),
             "<h2>Failures</h2>",
             _table(["status", "test", "failure", "baseline", "candidate"],
                    [[status, test, kind, base or "-", cand or "-"] for status, found in rows.items()
                     for test, kind, base, cand in found]),
             "<h2>Installations</h2>",
             _table(["side", "installation", "overrides", "pytest exit"],
                    [[s.name, s.installation, ", ".join(s.overrides) or "-", s.returncode] for s in sides]),
             _table(["target"] + [f"{s.name} {c}" for s in sides for c in ("version", "examples")],
                    [[t] + [x for s in sides for x in _target_cells(s.report["targets"].get(t, {}))]
                     for t in sides[0].report["targets"] if any(_ran_or_missing(s.report, t) for s in sides)]),
             "<h2>Numerics drift</h2><p>Error-to-bound ratio per judged kind (1 = the verdict's bound).</p>",
             _table(["target", "kind", "baseline median", "baseline max", "candidate median", "candidate max"],
                    [[t, k, *b, *c] for t, k, b, c in drift(sides[0].report, sides[1].report)])]
    for title, png in (("Error-to-bound ratios per path", histograms(sides)),
                       ("Worst error over T x state dtype", heatmaps(sides)),
                       ("Dispatch-bucket coverage", coverage(sides))):
        parts.append(f"<h2>{title}</h2>" + (f'<img alt="{title}" src="data:image/png;base64,{png}">' if png
                                            else "<p>No judged examples.</p>"))
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}img{max-width:100%}")
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>gdn-fuzz gate</title>"
                    f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")


def _ran_or_missing(report: dict, target: str) -> bool:
    info = report["targets"].get(target, {})
    return bool(info.get("examples") or info.get("unavailable"))


def _target_cells(info: dict) -> list:
    if info.get("unavailable"):
        return ["unavailable", info["unavailable"][:80]]
    return [info.get("version") or "-", ", ".join(f"{op} {n}" for op, n in info.get("examples", {}).items()) or "-"]
