"""The gate's reports, rendered from one fuzz.cli.gate_model.Result: the markdown summary (a CI step summary), the
JUnit XML and the HTML report (one self-contained file: tables, and matplotlib plots embedded as base64 PNG)."""

from __future__ import annotations

import base64
import html
import io
import math
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global figure state

from fuzz.cli.gate_model import FLOOR, SEED, STATUSES, Drift, Result, Row
from fuzz.run.report import ExampleRecord, TargetRow

COLORS = {"baseline": "tab:blue", "candidate": "tab:orange"}
NOTABLE = 2.0  # a change of the median ratio by this factor (either way) is flagged
MEANING = {
    "new": "the candidate's only",
    "fixed": "the baseline's only; the candidate ran the test",
    "unchanged": "on both sides",
    "untested": "the baseline's only; the candidate did not run the test",
}


# ---- shared words ------------------------------------------------------------------------------------------------


def verdict(result: Result) -> str:
    new = len(result.of("new"))
    return f"FAIL: {new} new failure{'s' if new > 1 else ''}" if new else "PASS: no new failure"


def _count_rows(result: Result) -> list[tuple[str, bool, bool]]:
    """The counts table's rows (label, fuzz, edges): fuzz failures, other failed tests, and the contract edges' fuzz
    failures where there are any."""
    edges = any(r.finding.edge for r in result.rows)
    return [("fuzz failures", True, False), ("other failed tests", False, False)] + (
        [("contract edges (not bugs)", True, True)] if edges else []
    )


def _short(test: str) -> str:
    return test.rpartition("::")[2]


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _change(d: Drift) -> str:
    c = d.change
    if c is None:
        return "-"
    mark = " ▲" if c >= NOTABLE else " ▼" if c <= 1 / NOTABLE else ""
    return f"{c:.2f}x{mark}"


def _plan_line(result: Result) -> str:
    p = result.plan
    parts = [
        f"profile {p.profile}",
        f"families {', '.join(p.families) if p.families else 'all'}",
        *([f"-k {p.keywords}"] if p.keywords else []),
        f"{p.examples} examples per test" if p.examples else "the profile's examples per test",
        f"--hypothesis-seed={SEED}",
        *([f"pytest {' '.join(p.extra)}"] if p.extra else []),
    ]
    return ", ".join(parts)


def _side_line(side, plan) -> str:
    versions = ", ".join(side.versions(plan)) or "no library version"
    return f"{side.where.spec}" + (f" with {side.overrides_text}" if side.overrides else "") + f" ({versions})"


def _shared_line(result: Result) -> str:
    b, c, both = result.shared
    share = f"{both / max(b, c):.0%}" if max(b, c) else "-"
    return (
        f"{both} coordinates judged by both sides ({share} of the larger side: the baseline judged {b}, the "
        f"candidate {c}); each row compares only those. Change: candidate median / baseline median, each floored "
        f"at {FLOOR:g} (1 = the verdict's bound)."
    )


# ---- markdown ------------------------------------------------------------------------------------------------------


def _md_code(text: str) -> str:
    return f"`{text}`" if text else "-"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_rows(rows: list[Row], out: Path) -> list[str]:
    lines = ["| test | kind | baseline | candidate | reproduction | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        sides = [
            (_md_code(f.coordinate) + (f" {_md_cell(f.detail[:160])}" if f.detail else "")) if f else "-"
            for f in (r.baseline, r.candidate)
        ]
        script = (
            _md_code(str(r.script.relative_to(out)))
            if r.script
            else f"export failed: {_md_cell(r.script_error[:160])}"
            if r.script_error
            else "-"
        )
        lines.append(
            f"| `{_md_cell(_short(r.finding.test))}` | {r.finding.kind} | {sides[0]} | {sides[1]} | "
            f"{script} | {_md_cell(r.note)} |"
        )
    return lines


def markdown(result: Result) -> str:
    base, cand = result.sides
    lines = [
        f"## gdn-fuzz gate: {'✅' if result.passed else '❌'} {verdict(result)}",
        "",
        f"- **baseline**: {_side_line(base, result.plan)}",
        f"- **candidate**: {_side_line(cand, result.plan)}",
        f"- {_plan_line(result)}",
        "",
        "| | " + " | ".join(STATUSES) + " |",
        "|---|" + "---|" * len(STATUSES),
        *(
            f"| {label} | " + " | ".join(str(len(result.of(s, fuzz, edges))) for s in STATUSES) + " |"
            for label, fuzz, edges in _count_rows(result)
        ),
        "",
    ]
    if edges := [r for s in STATUSES for r in result.of(s, edges=True)]:
        lines += ["### Contract edges (not bugs; they never fail the gate)", "", *_md_rows(edges, result.out), ""]
    for status in STATUSES:
        rows = result.of(status)
        if rows and status != "unchanged":
            lines += [f"### {status.capitalize()} ({MEANING[status]})", "", *_md_rows(rows, result.out), ""]
    if unchanged := result.of("unchanged"):
        lines += [
            f"<details><summary>Unchanged failures ({len(unchanged)})</summary>",
            "",
            *_md_rows(unchanged, result.out),
            "",
            "</details>",
            "",
        ]
    lines += [
        "### Numerics drift (error / bound)",
        "",
        _shared_line(result),
        "",
        "| target | kind | shared | baseline median / max | candidate median / max | change | largest growth |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in result.drift:
        b, c = d.stats(0), d.stats(1)
        worst = d.worst(1)
        grew = f"`{worst[0][0]}`: {worst[0][1]:.3g} → {worst[0][2]:.3g}" if worst else "-"
        lines.append(
            f"| {d.target} | {d.kind} | {len(d.shared)} of {d.judged[0]} / {d.judged[1]} | "
            f"{_num(b and b[0])} / {_num(b and b[1])} | {_num(c and c[0])} / {_num(c and c[1])} | "
            f"{_change(d)} | {grew} |"
        )
    if not result.drift:
        lines.append("| - | no judged examples | | | | | |")
    if diverged := sorted({f"{d.target} ({', '.join(s)})" for d in result.drift if (s := _diverged(result, d))}):
        lines += [
            "",
            f"Fewer shared coordinates where a test failed on one side (its cases differ after the first "
            f"failure): {', '.join(diverged)}.",
        ]
    one_sided = _one_sided(result)
    if one_sided:
        lines += [
            "",
            "### Tests run on one side only",
            "",
            *(f"- {side} only: `{_short(t)}`" for side, tests in one_sided.items() for t in tests),
        ]
    lines += ["", f"Report: `{result.out / 'report.html'}`; reproduction scripts: `{result.out / 'scripts'}`", ""]
    return "\n".join(lines)


def _diverged(result: Result, d: Drift) -> list[str]:
    """The sides on which a test of the row's target failed, when not every judged coordinate is shared: a failing
    test's later rounds draw other cases (fuzz.suite.session), so the sides share fewer of them."""
    if d.judged[0] == d.judged[1] == len(d.shared):
        return []
    return [s.name for s in result.sides if any(f.target == d.target for f in s.report.failures)]


def _one_sided(result: Result) -> dict[str, list[str]]:
    base, cand = result.sides
    return {s.name: sorted(s.ran - o.ran) for s, o in ((base, cand), (cand, base)) if s.ran - o.ran}


# ---- JUnit ---------------------------------------------------------------------------------------------------------


def not_run_markdown(sides, out: Path) -> str:
    """The summary when a side could not be run (exit 2): which, and the end of its log."""
    lines = ["## gdn-fuzz gate: ⚠️ NOT RUN: a side could not be run", ""]
    for s in sides:
        if not s.report:
            log = out / f"{s.name}.log"
            tail = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []
            lines += [
                f"The {s.name} run failed (pytest exit {s.returncode}) on `{s.where.spec}`; `{log}` ends:",
                "",
                "```",
                *tail,
                "```",
                "",
            ]
    return "\n".join(lines)


def write_junit(path: Path, result: Result | None, summary: str) -> None:
    """A testcase per failure (new ones failing) and a summary testcase; result None: a side could not be run, the
    summary is an error."""
    if result is None:
        suite = ET.Element("testsuite", name="gdn-fuzz-gate", tests="1", errors="1")
        case = ET.SubElement(suite, "testcase", classname="gdn-fuzz-gate", name="summary")
        ET.SubElement(case, "error", message="a side could not be run").text = summary
        ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
        return
    new = result.of("new")
    suite = ET.Element(
        "testsuite", name="gdn-fuzz-gate", tests=str(len(result.rows) + 1), failures=str(len(new) + bool(new))
    )
    names = Counter((r.finding.test, r.finding.kind) for r in result.rows)
    for r in result.rows:
        f = r.finding
        name = f"{f.test} {f.kind}" + (
            f" ({f.variant + ': ' if f.variant else ''}{f.cause})" if names[(f.test, f.kind)] > 1 else ""
        )  # one name per failure
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"gdn-fuzz-gate.{r.status}",
            name=name,
            **({"file": str(r.script)} if r.script else {}),
        )
        text = "\n".join(
            filter(
                None,
                (
                    *(
                        f"{name}: {x.coordinate or '-'} {x.detail}"
                        for name, x in (("baseline", r.baseline), ("candidate", r.candidate))
                        if x
                    ),
                    r.note,
                    f"reproduction: {r.script}" if r.script else r.script_error,
                ),
            )
        )
        if r.status == "new" and not f.edge:
            ET.SubElement(case, "failure", message=f"new {f.kind}: {f.cause}", type=f.kind).text = text
        else:
            ET.SubElement(case, "system-out").text = f"{r.status} failure\n{text}"
    case = ET.SubElement(suite, "testcase", classname="gdn-fuzz-gate", name="summary")
    if new:
        ET.SubElement(case, "failure", message=f"{len(new)} new failures").text = summary
    else:
        ET.SubElement(case, "system-out").text = summary
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


# ---- HTML ----------------------------------------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:24px auto;max-width:1320px;
 padding:0 16px;line-height:1.45;font-size:14px}
h1{font-size:22px;margin:0}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #d8dee4;padding-bottom:4px}
.verdict{padding:12px 16px;border-radius:6px;border-left:6px solid}.pass{background:#dafbe1;border-color:#1a7f37}
.fail{background:#ffebe9;border-color:#cf222e}.verdict p{margin:4px 0 0;color:#424a53}
table{border-collapse:collapse;margin:6px 0 12px;width:100%}th{background:#f6f8fa;text-align:left}
td,th{border:1px solid #d0d7de;padding:4px 8px;font-size:13px;vertical-align:top}td.n{text-align:right;
 font-variant-numeric:tabular-nums;white-space:nowrap}table.counts{width:auto}table.counts td{text-align:center}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:anywhere}
code.name{white-space:nowrap}
.badge{display:inline-block;padding:0 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600}
.new{background:#cf222e}.fixed{background:#1a7f37}.unchanged{background:#6e7781}.untested{background:#9a6700}
.up{color:#cf222e;font-weight:600}.down{color:#1a7f37;font-weight:600}.muted{color:#57606a;font-size:12px}
p.note{color:#57606a;margin:4px 0}img{max-width:100%;border:1px solid #d8dee4;border-radius:4px}
"""


def _e(x) -> str:
    return html.escape(str(x))


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """Cells are HTML already (escape text with _e); a cell starting with '\\x00' is numeric (right-aligned)."""
    cell = lambda c: f"<td class='n'>{c[1:]}</td>" if c.startswith("\x00") else f"<td>{c}</td>"
    return (
        f"<table class='{cls}'><tr>"
        + "".join(f"<th>{_e(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(map(cell, row)) + "</tr>" for row in rows)
        + "</table>"
    )


def _n(x) -> str:
    return "\x00" + (_num(x) if isinstance(x, float) or x is None else _e(x))


def _finding_cell(f) -> str:
    if f is None:
        return "<span class='muted'>-</span>"
    parts = [f"<code>{_e(f.coordinate)}</code>" if f.case else "", _e(f.detail[:300])]
    if (x := f.record) is not None:
        shrunk = "minimal" if x.minimal else "NOT minimal (shrink cut off)"
        again = "; did not reproduce alone" if x.reproduced_on_rerun is False else ""
        parts.append(
            f"<span class='muted'>{shrunk}, {x.hits} hit(s), first after {x.first_hit_seconds:.1f} s{again}</span>"
        )
    return "<br>".join(p for p in parts if p)


def _script_cell(r: Row, out: Path) -> str:
    if r.script:
        rel = r.script.relative_to(out)
        return (
            f"<a href='{_e(rel)}'><code>{_e(rel)}</code></a><br>"
            f"<span class='muted'>exits 1 on the {r.failing_side}</span>"
        )
    return f"<span class='up'>export failed: {_e(r.script_error[:200])}</span>" if r.script_error else "-"


def _rows_table(rows: list[Row], out: Path) -> str:
    return _table(
        ["status", "test", "kind", "baseline", "candidate", "reproduction", "note"],
        [
            [
                f"<span class='badge {r.status}'>{r.status}</span>",
                f"<code>{_e(_short(r.finding.test))}</code>",
                _e(r.finding.kind),
                _finding_cell(r.baseline),
                _finding_cell(r.candidate),
                _script_cell(r, out),
                _e(r.note),
            ]
            for r in rows
        ],
    )


def _runs_table(result: Result) -> str:
    rows = []
    for s in result.sides:
        env = s.report.environment
        examples = sum(n for name in s.report.targets for n in s.report.examples_of(name).values())
        rows.append(
            [
                _e(s.name),
                f"<code>{_e(s.where.spec)}</code>",
                _e(s.overrides_text or "-"),
                _e(", ".join(s.versions(result.plan)) or "-"),
                _n(s.returncode),
                _n(len(s.ran)),
                _n(examples),
                _n(f"{s.seconds:.0f} s"),
                _e(f"{env.get('gpu') or 'CPU'}; torch {env.get('torch', '?')}"),
            ]
        )
    return _table(
        [
            "side",
            "installation",
            "overrides",
            "versions",
            "pytest exit",
            "tests run",
            "examples",
            "wall time",
            "device",
        ],
        rows,
    )


def _targets_table(result: Result) -> str:
    """The targets of the families asked for (all that ran, when none was): what each side ran, or why not."""

    def cell(row: TargetRow) -> str:
        if row.unavailable:
            return f"<span class='muted'>unavailable: {_e(row.unavailable[:120])}</span>"
        ran = ", ".join(f"{op} {n}" for op, n in row.examples.items())
        return _e(f"{row.version or 'no version'}: {ran}") if ran else "<span class='muted'>not run</span>"

    names = sorted(
        {
            n
            for s in result.sides
            for n in s.report.targets
            if s.report.examples_of(n) or (result.plan.families and result.plan.asked(n))
        }
    )
    rows = [
        [
            f"<code class='name'>{_e(n)}</code>",
            *(cell(s.report.target_summary(n) if n in s.report.targets else TargetRow()) for s in result.sides),
        ]
        for n in names
    ]
    return _table(["target", *(s.name for s in result.sides)], rows)


def _drift_tables(result: Result) -> str:
    def change(d: Drift) -> str:
        text = _e(_change(d))
        return "\x00" + (
            f"<span class='up'>{text}</span>"
            if d.change and d.change >= NOTABLE
            else f"<span class='down'>{text}</span>"
            if d.change and d.change <= 1 / NOTABLE
            else text
        )

    def shared(d: Drift) -> str:
        return _n(f"{len(d.shared)} of {d.judged[0]} / {d.judged[1]}") + "".join(
            f"<br><span class='muted'>failed on the {side}: its cases differ after the first failure</span>"
            for side in _diverged(result, d)
        )

    rows = [
        [
            _e(d.target),
            _e(d.kind),
            shared(d),
            *(_n(s and s[j]) for s in (d.stats(0), d.stats(1)) for j in (0, 1)),
            change(d),
        ]
        for d in result.drift
    ]
    worst = [
        [_e(d.target), _e(d.kind), f"<code>{_e(c)}</code>", _n(b), _n(a), _n(f"{g:.1f}x")]
        for d in result.drift
        for c, b, a, g in d.worst(3)
    ]
    return (
        f"<p class='note'>{_e(_shared_line(result))}</p>"
        + _table(
            [
                "target",
                "kind",
                "shared (of baseline / candidate judged)",
                "baseline median",
                "baseline max",
                "candidate median",
                "candidate max",
                "change",
            ],
            rows,
        )
        + "<h2>Largest growth per target and kind</h2><p class='note'>The shared coordinates whose error / bound "
        "grew most (up to 3 per row above).</p>"
        + (
            _table(["target", "kind", "coordinate", "baseline", "candidate", "growth"], worst)
            if worst
            else "<p>No shared coordinate grew.</p>"
        )
    )


def write_html(path: Path, result: Result) -> None:
    base, cand = result.sides
    out = result.out
    counts = [
        [_e(label), *(_n(len(result.of(s, fuzz, edges))) for s in STATUSES)]
        for label, fuzz, edges in _count_rows(result)
    ]
    parts = [
        f"<div class='verdict {'pass' if result.passed else 'fail'}'><h1>gdn-fuzz gate: {_e(verdict(result))}</h1>"
        f"<p><b>baseline</b> {_e(_side_line(base, result.plan))}<br><b>candidate</b> "
        f"{_e(_side_line(cand, result.plan))}<br>{_e(_plan_line(result))}</p></div>",
        _table(["", *STATUSES], counts, "counts"),
        "<p class='note'>" + "; ".join(f"<b>{s}</b>: {_e(MEANING[s])}" for s in STATUSES) + ".</p>",
    ]
    for title, fuzz in (("Fuzz failures", True), ("Other failed tests (corpus replay, errors)", False)):
        rows = [r for r in result.rows if r.finding.fuzz == fuzz]
        parts.append(f"<h2>{title}</h2>" + (_rows_table(rows, out) if rows else "<p>None on either side.</p>"))
    parts += ["<h2>Runs</h2>", _runs_table(result), "<h2>Targets</h2>", _targets_table(result)]
    if one_sided := _one_sided(result):
        parts.append(
            "<p class='note'>Run on one side only: "
            + "; ".join(
                f"{side}: " + ", ".join(f"<code>{_e(_short(t))}</code>" for t in tests)
                for side, tests in one_sided.items()
            )
            + "</p>"
        )
    parts += ["<h2>Numerics drift (error / bound, shared coordinates)</h2>", _drift_tables(result)]
    shared = _shared_records(result)
    for title, png in (
        ("Baseline vs candidate, per shared coordinate", scatter(result.drift)),
        ("Error-to-bound ratios per path (shared coordinates)", histograms(result.sides, shared)),
        ("Worst error over T x state dtype (shared coordinates)", heatmaps(result.sides, shared)),
        ("Dispatch-bucket coverage (all examples)", coverage(result.sides)),
    ):
        parts.append(
            f"<h2>{title}</h2>"
            + (f'<img alt="{title}" src="data:image/png;base64,{png}">' if png else "<p>No judged examples.</p>")
        )
    path.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>gdn-fuzz gate: {_e(verdict(result))}"
        f"</title><style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>\n"
    )


# ---- plots ---------------------------------------------------------------------------------------------------------


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _shared_records(result: Result) -> list[list[ExampleRecord]]:
    """Each side's judged records of the coordinates both sides judged."""
    keys = [{r.coordinate for r in s.report.records if r.ratios} for s in result.sides]
    both = keys[0] & keys[1]
    return [[r for r in s.report.records if r.ratios and r.coordinate in both] for s in result.sides]


def _grid(n: int, width: float, height: float):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, axes.flat


def scatter(drift: list[Drift]) -> str | None:
    """Per target: each shared coordinate's baseline ratio against its candidate ratio, one colour per kind."""
    per_target = defaultdict(list)
    for d in drift:
        if d.shared:
            per_target[d.target].append(d)
    if not per_target:
        return None
    fig, axes = _grid(len(per_target), 4.4, 4.0)
    top = max(2.0, *(max(b, c) for ds in per_target.values() for d in ds for _, b, c in d.shared))
    for ax, (target, ds) in zip(axes, sorted(per_target.items())):
        for d in ds:
            xs, ys = (np.maximum([s[i] for s in d.shared], FLOOR) for i in (1, 2))
            ax.scatter(xs, ys, s=12, alpha=0.6, label=f"{d.kind} ({len(d.shared)})")
        ax.plot([FLOOR, top], [FLOOR, top], color="grey", linewidth=1, linestyle=":")
        ax.axhline(1.0, color="red", linestyle="--", linewidth=1)
        ax.axvline(1.0, color="red", linestyle="--", linewidth=1)
        ax.set(
            xscale="log",
            yscale="log",
            xlim=(FLOOR / 1.5, top * 1.5),
            ylim=(FLOOR / 1.5, top * 1.5),
            title=target,
            xlabel="baseline error / bound",
            ylabel="candidate error / bound",
        )
        ax.legend(fontsize=8, loc="upper left")
    return _png(fig)


def histograms(sides, shared: list[list[ExampleRecord]]) -> str | None:
    """Per target: the distribution of each shared coordinate's worst error-to-bound ratio, baseline vs candidate."""
    worst = defaultdict(lambda: defaultdict(list))  # target -> side -> [max ratio of one example]
    for side, records in zip(sides, shared):
        for r in records:
            worst[r.target][side.name].append(max(max(r.ratios.values()), FLOOR))
    if not worst:
        return None
    every = [x for per_side in worst.values() for xs in per_side.values() for x in xs]
    bins = np.logspace(math.log10(FLOOR), math.log10(max(max(every), 2.0)), 41)
    fig, axes = _grid(len(worst), 4.6, 3.2)
    for ax, (target, per_side) in zip(axes, sorted(worst.items())):
        for side, style in zip(sides, (dict(histtype="stepfilled", alpha=0.35), dict(histtype="step", linewidth=2))):
            xs = per_side.get(side.name, [])
            ax.hist(xs, bins=bins, color=COLORS[side.name], label=f"{side.name} ({len(xs)})", **style)
        ax.axvline(1.0, color="red", linestyle="--", linewidth=1, label="bound")
        ax.set(
            xscale="log",
            title=target,
            xlabel=f"worst error / bound per example (< {FLOOR:g} at {FLOOR:g})",
            ylabel="examples",
        )
        ax.legend(fontsize=8)
    return _png(fig)


def heatmaps(sides, shared: list[list[ExampleRecord]]) -> str | None:
    """Per side: the worst error-to-bound ratio over all targets and kinds, by T and state dtype."""
    cells = [defaultdict(float) for _ in sides]  # (state dtype, T) -> worst ratio
    for cell, records in zip(cells, shared):
        for r in records:
            key = (r.case.state_dtype, r.case.T)
            cell[key] = max(cell[key], max(r.ratios.values()), FLOOR)
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
        grid = np.ma.masked_invalid(
            [[math.log10(cell[(d, t)]) if (d, t) in cell else np.nan for t in ts] for d in dtypes]
        )
        image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
        for (i, j), v in np.ndenumerate(grid.filled(np.nan)):
            dark = not math.isnan(v) and abs(norm(v) - 0.5) > 0.3
            ax.text(
                j,
                i,
                "none" if math.isnan(v) else f"{10**v:.2g}",
                ha="center",
                va="center",
                fontsize=9,
                color="white" if dark else "black",
            )
        ax.set(
            xticks=range(len(ts)),
            xticklabels=ts,
            yticks=range(len(dtypes)),
            yticklabels=dtypes,
            xlabel="T (prefill: longest sequence)",
            title=f"{side.name}: worst error / bound",
        )
    axes[0].set_ylabel("state dtype")
    fig.colorbar(image, ax=list(axes), label="log10(worst error / bound); 0 = bound")
    return _png(fig)


def coverage(sides) -> str | None:
    """Per target: distinct dispatch buckets hit by both sides, by one side only."""
    hit = defaultdict(lambda: defaultdict(set))  # target -> side -> buckets
    for side in sides:
        for r in side.report.records:
            hit[r.target][side.name].add(r.bucket)
    if not hit:
        return None
    targets = sorted(hit)
    base, cand = ([hit[t][s.name] for t in targets] for s in sides)
    parts = [
        ("both", [len(b & c) for b, c in zip(base, cand)], "tab:green"),
        (f"{sides[0].name} only", [len(b - c) for b, c in zip(base, cand)], COLORS[sides[0].name]),
        (f"{sides[1].name} only", [len(c - b) for b, c in zip(base, cand)], COLORS[sides[1].name]),
    ]
    fig = Figure(figsize=(8, 0.5 * len(targets) + 1.5), layout="constrained")
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
