"""Reports: a summary table on the terminal, and self-contained HTML pages with inline SVG plots.

The plots follow Jepsen's: every send's latency against the time it was invoked (log scale,
coloured by outcome), and throughput per second by outcome, with the fault windows shaded.
No plotting library: the SVG is written here.
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter

from weir.verify.checker import ANOMALIES, safety_anomalies
from weir.verify.history import FAIL, INFO, INVOKE, OK

COLOURS = {OK: "#3b7dd8", INFO: "#f0a020", FAIL: "#d0302b"}
FAULT_FILL = "#bbbbbb"
MAX_POINTS = 20000


# -- text ---------------------------------------------------------------------------------------

def summary_table(results: dict) -> str:
    result = results["result"]
    safety = safety_anomalies(result["duplicates_allowed"])
    lines = [f"{results['name']}  ({results['faults']} faults, {results['duration_s']}s)",
             f"  {'anomaly':<22}{'count':>8}  kind"]
    for name in ANOMALIES:
        kind = "safety violation" if name in safety else "informational"
        lines.append(f"  {name:<22}{result['counts'][name]:>8}  {kind}")
    s = result["stats"]
    lines.append(f"  sends {s['sends']}: ok {s['ok']}, fail {s['fail']}, info {s['info']} "
                 f"({s['indefinite_in_final_read']} of the indefinite in the final read); "
                 f"final read {s['final_read_records']} records{'' if s['final_read_complete'] else ' (INCOMPLETE)'}")
    verdict = {True: "valid", False: "INVALID: " + ", ".join(result["violations"]), None: "unknown (no complete final read)"}
    lines.append(f"  {verdict[result['valid']]}")
    return "\n".join(lines)


MATRIX_COLUMNS = ("lost-write", "duplicate", "inconsistent-offsets", "nonmonotonic-poll", "poll-skip",
                  "failed-write-read", "unseen")
SHORT = {"lost-write": "lost", "duplicate": "dup", "inconsistent-offsets": "incons", "nonmonotonic-poll": "nonmono",
         "poll-skip": "skip", "failed-write-read": "failread", "unseen": "unseen"}


def matrix_table(rows: list[dict]) -> str:
    head = (f"{'nemesis':<17}{'unclean':<8}{'minisr':<7}{'acks':<5}{'ok':>7}{'info':>6}{'fail':>6}"
            + "".join(f"{SHORT[c]:>9}" for c in MATRIX_COLUMNS) + "  expected")
    lines = [head]
    for r in rows:
        c, s = r["cell"], r["stats"]
        lines.append(f"{c['nemesis']:<17}{'on' if c['unclean'] else 'off':<8}{c['min_isr']:<7}{c['acks']:<5}"
                     f"{s['ok']:>7}{s['info']:>6}{s['fail']:>6}"
                     + "".join(f"{r['counts'][col]:>9}" for col in MATRIX_COLUMNS) + f"  {r.get('expected') or '-'}")
    return "\n".join(lines)


# -- fault windows and series -------------------------------------------------------------------

def fault_windows(ops: list[dict]) -> tuple[list[tuple[float, float, str]], list[tuple[float, str]]]:
    """[(start, end, label)] of every fault, and [(time, label)] of the steps inside them."""
    windows, steps, open_at, label = [], [], None, ""
    end = max((op["time"] for op in ops), default=0.0)
    for op in ops:
        if op.get("process") != "nemesis":
            continue
        value = op.get("value") or {}
        phase = value.get("phase")
        if phase == "start" and op["type"] == INVOKE:
            open_at, label = op["time"], f"{value.get('fault')}: {_describe(op['f'], value)}"
        elif phase == "step" and op["type"] == INVOKE:
            steps.append((op["time"], _describe(op["f"], value)))
        elif phase == "stop" and op["type"] != INVOKE and open_at is not None:
            windows.append((open_at, op["time"], label))
            open_at = None
    if open_at is not None:
        windows.append((open_at, end, label))
    return windows, steps


def _describe(f: str, value: dict) -> str:
    if "a" in value:
        return f"{f} {','.join(value['a'])} | {','.join(value['b'])}"
    if "broker" in value:
        return f"{f} b{value['broker']}"
    return f


def send_points(ops: list[dict]) -> list[tuple[float, float, str]]:
    """(invoked at, latency in seconds, outcome) of every completed send."""
    invoked = {}
    points = []
    for op in ops:
        if op.get("f") != "send":
            continue
        if op["type"] == INVOKE:
            invoked[op["id"]] = op["time"]
        elif op["id"] in invoked:
            start = invoked.pop(op["id"])
            points.append((start, op["time"] - start, op["type"]))
    return points


def throughput(ops: list[dict], f: str = "send") -> dict[str, Counter]:
    """Completions per whole second, by outcome."""
    series = {OK: Counter(), INFO: Counter(), FAIL: Counter()}
    for op in ops:
        if op.get("f") == f and op["type"] in series:
            series[op["type"]][int(op["time"])] += 1
    return series


# -- SVG ----------------------------------------------------------------------------------------

class Plot:
    """One SVG panel: a linear time axis, a linear or log y axis, shaded fault windows."""

    def __init__(self, t_end: float, y_max: float, *, log_y_min: float | None = None, width=1000, height=260,
                 y_label: str = "") -> None:
        self.t_end = max(t_end, 1.0)
        self.log_y_min = log_y_min
        self.y_max = max(y_max, (log_y_min or 0) * 10, 1e-9)
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = 60, 20, 20, 30
        self.parts: list[str] = []
        self.y_label = y_label

    def x(self, t: float) -> float:
        return self.left + (self.width - self.left - self.right) * t / self.t_end

    def y(self, v: float) -> float:
        span = self.height - self.top - self.bottom
        if self.log_y_min is not None:
            lo, hi = math.log10(self.log_y_min), math.log10(self.y_max)
            frac = (math.log10(max(v, self.log_y_min)) - lo) / (hi - lo)
        else:
            frac = v / self.y_max
        return self.height - self.bottom - span * min(max(frac, 0.0), 1.0)

    def shade(self, windows, steps) -> None:
        for start, end, label in windows:
            x0, x1 = self.x(start), self.x(end)
            self.parts.append(f'<rect x="{x0:.1f}" y="{self.top}" width="{max(x1 - x0, 1):.1f}" '
                              f'height="{self.height - self.top - self.bottom}" fill="{FAULT_FILL}" opacity="0.35">'
                              f'<title>{html.escape(label)} ({start:.1f}s to {end:.1f}s)</title></rect>')
        for t, label in steps:
            x = self.x(t)
            self.parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.top}" y2="{self.height - self.bottom}" '
                              f'stroke="#666" stroke-dasharray="4,3"><title>{html.escape(label)} at {t:.1f}s</title></line>')

    def axes(self) -> None:
        bottom, left = self.height - self.bottom, self.left
        self.parts.append(f'<line x1="{left}" x2="{self.width - self.right}" y1="{bottom}" y2="{bottom}" stroke="#333"/>')
        self.parts.append(f'<line x1="{left}" x2="{left}" y1="{self.top}" y2="{bottom}" stroke="#333"/>')
        step = _nice_step(self.t_end / 10)
        t = 0.0
        while t <= self.t_end + 1e-9:
            self.parts.append(f'<text x="{self.x(t):.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle">{t:g}</text>')
            t += step
        if self.log_y_min is not None:
            v = self.log_y_min
            while v <= self.y_max * 1.0001:
                self._y_tick(v, f"{v * 1000:g} ms" if v < 1 else f"{v:g} s")
                v *= 10
        else:
            v, step = 0.0, _nice_step(self.y_max / 5)
            while v <= self.y_max + 1e-9:
                self._y_tick(v, f"{v:g}")
                v += step
        self.parts.append(f'<text x="{self.width / 2}" y="{self.height - 2}" font-size="11" text-anchor="middle">'
                          f'seconds since start</text>')
        self.parts.append(f'<text x="12" y="{self.top + (self.height - self.top - self.bottom) / 2}" font-size="11" '
                          f'text-anchor="middle" transform="rotate(-90 12 {self.top + (self.height - self.top - self.bottom) / 2})">'
                          f'{html.escape(self.y_label)}</text>')

    def _y_tick(self, v: float, label: str) -> None:
        y = self.y(v)
        self.parts.append(f'<line x1="{self.left - 4}" x2="{self.width - self.right}" y1="{y:.1f}" y2="{y:.1f}" '
                          f'stroke="#ddd"/><text x="{self.left - 6}" y="{y + 4:.1f}" font-size="11" '
                          f'text-anchor="end">{label}</text>')

    def svg(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'font-family="sans-serif">{"".join(self.parts)}</svg>')


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def latency_svg(ops, windows, steps, t_end) -> str:
    points = send_points(ops)
    if len(points) > MAX_POINTS:  # keep every failure and indefinite one, thin the acknowledged
        keep = max(1, len(points) // MAX_POINTS)
        points = [p for i, p in enumerate(points) if p[2] != OK or i % keep == 0]
    y_max = max((p[1] for p in points), default=1.0)
    plot = Plot(t_end, 10 ** math.ceil(math.log10(max(y_max, 0.01))), log_y_min=0.001, y_label="latency")
    plot.shade(windows, steps)
    plot.axes()
    for t, latency, outcome in points:
        plot.parts.append(f'<circle cx="{plot.x(t):.1f}" cy="{plot.y(latency):.1f}" r="1.6" '
                          f'fill="{COLOURS[outcome]}" fill-opacity="0.6"/>')
    return plot.svg()


def throughput_svg(ops, windows, steps, t_end, f: str = "send") -> str:
    series = throughput(ops, f)
    y_max = max((max(c.values(), default=0) for c in series.values()), default=1)
    plot = Plot(t_end, max(y_max, 1) * 1.1, height=220, y_label=f"{f} / s")
    plot.shade(windows, steps)
    plot.axes()
    for outcome, counts in series.items():
        if not counts:
            continue
        coords = " ".join(f"{plot.x(s + 0.5):.1f},{plot.y(counts.get(s, 0)):.1f}" for s in range(int(t_end) + 1))
        plot.parts.append(f'<polyline points="{coords}" fill="none" stroke="{COLOURS[outcome]}" stroke-width="1.5"/>')
    return plot.svg()


# -- pages ----------------------------------------------------------------------------------------

_STYLE = ("body{font-family:sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse;margin:8px 0}"
          "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}"
          ".bad{background:#fbdcdc}.good{background:#dcf5dc}pre{background:#f5f5f5;padding:8px;font-size:12px;"
          "overflow-x:auto}.key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}")


def _legend() -> str:
    return ('<div class="key">' + "".join(f'<span style="background:{c}"></span>{o}' for o, c in COLOURS.items())
            + f'<span style="background:{FAULT_FILL}"></span>fault window</div>')


def write_run_report(path, results: dict, ops: list[dict]) -> None:
    result = results["result"]
    windows, steps = fault_windows(ops)
    t_end = max((op["time"] for op in ops), default=1.0)
    safety = safety_anomalies(result["duplicates_allowed"])
    rows = "".join(
        f'<tr class="{"bad" if result["counts"][n] and n in safety else ""}"><td>{n}</td>'
        f'<td>{result["counts"][n]}</td><td>{"safety violation" if n in safety else "informational"}</td></tr>'
        for n in ANOMALIES)
    verdict = {True: "valid", False: "INVALID", None: "unknown (no complete final read)"}[result["valid"]]
    examples = "".join(
        f"<h3>{n} ({result['counts'][n]})</h3><pre>{html.escape(json.dumps(result['anomalies'][n], indent=1))}</pre>"
        for n in ANOMALIES if result["anomalies"][n])
    faults = "".join(f"<tr><td>{s:.1f}</td><td>{e:.1f}</td><td>{html.escape(label)}</td></tr>" for s, e, label in windows)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>weir verify: {html.escape(results['name'])}</title>
<style>{_STYLE}</style></head><body>
<h1>weir verify: {html.escape(results['name'])}</h1>
<p><b>{verdict}</b> &mdash; {results['faults']} faults, {results['duration_s']} s,
recovered after healing: {results['recovered']}</p>
<table><tr><th>anomaly</th><th>count</th><th>kind</th></tr>{rows}</table>
<pre>{html.escape(json.dumps(result['stats'], indent=1))}</pre>
<h2>Latency of sends</h2>{_legend()}{latency_svg(ops, windows, steps, t_end)}
<h2>Throughput of sends</h2>{throughput_svg(ops, windows, steps, t_end)}
<h2>Throughput of polls</h2>{throughput_svg(ops, windows, steps, t_end, "poll")}
<h2>Faults</h2><table><tr><th>from (s)</th><th>to (s)</th><th>fault</th></tr>{faults}</table>
<h2>Examples</h2>{examples or "<p>none</p>"}
<h2>Options and broker settings</h2>
<pre>{html.escape(json.dumps({"options": results["options"], "settings": results["settings"]}, indent=1, default=str))}</pre>
</body></html>"""
    with open(path, "w") as f:
        f.write(page)


def write_matrix_report(path, summary: dict) -> None:
    rows = []
    for r in summary["results"]:
        c = r["cell"]
        bad = (r["expected"] == "safe" and r["counts"]["lost-write"]) or (r["expected"] == "loses"
                                                                         and not r["counts"]["lost-write"])
        cls = "bad" if bad else ("good" if r["expected"] else "")
        rows.append(f'<tr class="{cls}"><td><a href="{html.escape(r["name"])}/report.html">{html.escape(r["name"])}</a></td>'
                    f'<td>{c["nemesis"]}</td><td>{"on" if c["unclean"] else "off"}</td><td>{c["min_isr"]}</td>'
                    f'<td>{c["acks"]}</td><td>{r["stats"]["ok"]}</td><td>{r["stats"]["info"]}</td><td>{r["stats"]["fail"]}</td>'
                    + "".join(f"<td>{r['counts'][col]}</td>" for col in MATRIX_COLUMNS)
                    + f'<td>{r["expected"] or "-"}</td></tr>')
    failures = "".join(f"<li>{html.escape(f)}</li>" for f in summary["expectation_failures"]) or "<li>none</li>"
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>weir verify matrix</title>
<style>{_STYLE}</style></head><body><h1>weir verify matrix</h1>
<p>Expected: the Jepsen configuration (unclean on, min ISR 1, acks=all) under the jepsen schedule loses
acknowledged writes; unclean off with min ISR 2 and acks=all never does.</p>
<h2>Expectation failures</h2><ul>{failures}</ul>
<table><tr><th>run</th><th>nemesis</th><th>unclean</th><th>min ISR</th><th>acks</th><th>ok</th><th>info</th>
<th>fail</th>{"".join(f"<th>{c}</th>" for c in MATRIX_COLUMNS)}<th>expected</th></tr>{"".join(rows)}</table>
</body></html>"""
    with open(path, "w") as f:
        f.write(page)
