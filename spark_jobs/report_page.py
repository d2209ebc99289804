"""The capacity report as one HTML page that needs no network: per cluster its totals, its volumes by days
left, and a chart per volume at risk, each an inline SVG drawn by matplotlib (no script, no external file).

A chart shows the volume's available bytes over the history (thinned to the lowest and highest of each time
bucket), the forecast's line of the sawtooth's lowest points ahead to the limit, its ±2σ band, the limit, and
the date the line reaches it.
"""
from __future__ import annotations

import html
import io
from datetime import datetime, timezone

GIB = float(1 << 30)
_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1150px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.5em; text-align: right; white-space: nowrap; }
th:nth-child(-n+2), td:nth-child(-n+2) { text-align: left; }
tr.risk td { background: #fff1f0; }
.totals { color: #444; }
figure { margin: 1em 0 2em; }
figcaption { font-size: 0.9em; color: #444; }
"""


def html_page(report: dict) -> str:
    """The report (``report.build``) as a page."""
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Capacity report</title>"
             f"<style>{_STYLE}</style></head><body>",
             "<h1>Capacity report</h1>",
             f"<p>History <code>{_e(report['history'])}</code>"
             f"{', since ' + _e(report['since']) if report['since'] else ''}; made {_e(report['generated_at'])}. "
             f"Limit: {_e(report['limit'])}. At risk: reaching the limit within {report['at_risk_days']:g} days. "
             "Growth is the rise of the sawtooth's peaks (retention cycles), not the fill rate of the last hours.</p>"]
    if not report["clusters"]:
        parts.append("<p>No volume in the history.</p>")
    for cluster in report["clusters"]:
        volumes = [v for v in report["volumes"] if v["cluster"] == cluster["cluster"]]
        charts = [chart for chart in report["charts"] if chart["volume"]["cluster"] == cluster["cluster"]]
        parts += [f"<h2>Cluster {_e(cluster['cluster'])}</h2>", _totals(cluster), _table(volumes, charts)]
        parts += [_figure(chart) for chart in charts]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _totals(cluster: dict) -> str:
    first = cluster["first_to_limit"]
    headroom = (f"first at the limit: broker {first['broker']} {_e(first['log_dir'])} on {first['limit_at']}, "
                f"headroom {cluster['headroom_days']:.1f} days" if first else "no volume is filling")
    return (f"<p class=\"totals\">{cluster['volumes']} volumes ({cluster['filling']} filling), "
            f"{_gib(cluster['available_bytes'])} available of {_gib(cluster['total_bytes'])}, net growth "
            f"{_gib(cluster['growth_bytes_per_day'])}/day; {headroom} "
            f"(newest observation {cluster['observed_at']}).</p>")


def _table(volumes: list[dict], charts: list[dict]) -> str:
    risky = {(c["volume"]["broker"], c["volume"]["log_dir"]) for c in charts}
    head = ("broker", "log dir", "available", "growth/day", "±2σ", "limit at (UTC)", "days left", "full at (UTC)",
            "method", "cycles")
    rows = []
    for v in volumes:
        band = v["growth_band_bytes_per_day"]
        cells = (str(v["broker"]), _e(v["log_dir"]), f"{_gib(v['available_bytes'])} of {_gib(v['total_bytes'])}",
                 _gib(v["growth_bytes_per_day"]),
                 f"{_gib(band[0])} … {_gib(band[1])}" if band[0] is not None else "-",
                 _minute(v["limit_at"]) or "not filling",
                 f"{v['days_to_limit']:.1f}" if v["days_to_limit"] is not None else "-", _minute(v["full_at"]) or "-",
                 v["method"], str(v["cycles"]))
        css = " class=\"risk\"" if (v["broker"], v["log_dir"]) in risky else ""
        rows.append(f"<tr{css}>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{name}</th>" for name in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _figure(chart: dict) -> str:
    v = chart["volume"]
    caption = (f"Broker {v['broker']} {_e(v['log_dir'])}: available bytes, the forecast ({_e(v['method'])}) reaches "
               f"the limit on {v['limit_at']} ({v['days_to_limit']:.1f} days), the filesystem on {v['full_at']}.")
    return f"<figure>{svg_chart(chart)}<figcaption>{caption}</figcaption></figure>"


def svg_chart(chart: dict) -> str:
    """One volume's chart as an inline <svg> element (its XML prologue dropped)."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    fit, v = chart["fit"], chart["volume"]
    figure = Figure(figsize=(9, 3.2), layout="constrained")
    axes = figure.add_subplot()
    if chart["points"]:
        times, available = zip(*chart["points"])
        axes.plot([_time(t) for t in times], [a / GIB for a in available], color="#1f77b4", linewidth=0.8,
                  label="available")
    end = fit["limit_at_seconds"] + 0.15 * (fit["limit_at_seconds"] - fit["first_seconds"])
    ahead = [fit["first_seconds"] + (end - fit["first_seconds"]) * step / 50 for step in range(51)]
    axes.plot([_time(t) for t in ahead], [_available(fit, fit["growth"], t) / GIB for t in ahead], color="#d62728",
              linestyle="--", linewidth=1.2, label=f"forecast ({v['method']})")
    ahead_of_now = [t for t in ahead if t >= fit["x_seconds"]]
    axes.fill_between([_time(t) for t in ahead_of_now],
                      [_available(fit, fit["growth_low"], t) / GIB for t in ahead_of_now],
                      [_available(fit, fit["growth_high"], t) / GIB for t in ahead_of_now],
                      color="#d62728", alpha=0.12, linewidth=0, label="±2σ")
    axes.axhline(fit["limit_bytes"] / GIB, color="#444", linewidth=1, label="limit")
    axes.axvline(_time(fit["limit_at_seconds"]), color="#444", linestyle=":", linewidth=1)
    axes.annotate(v["limit_at"][:10], (_time(fit["limit_at_seconds"]), fit["limit_bytes"] / GIB),
                  textcoords="offset points", xytext=(4, 6), fontsize=8)
    axes.set_ylim(bottom=0)
    axes.set_ylabel("available GiB")
    locator = AutoDateLocator()
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes.grid(alpha=0.3)
    axes.legend(loc="upper right", fontsize=8)
    buffer = io.StringIO()
    import matplotlib

    # Ids in the SVG come from a hash salted with this: distinct per chart, so two charts' clip paths never clash.
    with matplotlib.rc_context({"svg.hashsalt": f"{v['cluster']}/{v['broker']}/{v['log_dir']}",
                                "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _available(fit: dict, growth_per_day: float, seconds: float) -> float:
    used = fit["y_bytes"] + growth_per_day * (seconds - fit["x_seconds"]) / 86400.0
    return fit["total_bytes"] - used


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def _minute(iso: str | None) -> str | None:
    """An ISO-8601 instant to the minute, its "T" a space ("YYYY-MM-DD HH:MM"): to the minute is enough for people."""
    return None if iso is None else iso[:16].replace("T", " ")


def _gib(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / GIB + 0.0:,.1f} GiB".replace("-0.0 ", "0.0 ")  # a shrinking band's -0.0 is 0.0


def _e(text: object) -> str:
    return html.escape(str(text))
