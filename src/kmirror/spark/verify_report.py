"""The HTML report of `kmirror verify`: one self-contained file (plots are PNGs inlined as
base64), with per-topic and per-partition tables, each divergence with both batches'
headers, the lag per partition and, when verify ran repeatedly, the RPO over time."""

from __future__ import annotations

import base64
import datetime
import html
import io
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kmirror.spark.verify_compare import PartitionVerification, totals

HEADER_FIELDS = ("base_offset", "last_offset", "partition_leader_epoch", "crc", "batch_length", "records_count",
                 "attributes", "compression", "producer_id", "producer_epoch", "base_sequence",
                 "base_timestamp", "max_timestamp", "is_transactional", "is_control")

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1b1f24;background:#fafbfc}
h1{margin-bottom:.2rem} .sub{color:#57606a;margin-top:0}
.cards{display:flex;gap:1rem;flex-wrap:wrap;margin:1.2rem 0}
.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:.8rem 1.2rem;min-width:9rem}
.card .v{font-size:1.6rem;font-weight:600} .card .k{color:#57606a;font-size:.85rem}
.ok{color:#1a7f37} .bad{color:#cf222e} .warn{color:#9a6700}
table{border-collapse:collapse;background:#fff;margin:.6rem 0 1.6rem}
th,td{border:1px solid #d0d7de;padding:.3rem .7rem;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f3f6} td.l,th.l{text-align:left}
tr.DIVERGED td{background:#ffebe9} tr.ERROR td{background:#fff8c5} tr.BEHIND td.s{color:#9a6700}
td.diff{background:#ffcecb;font-weight:600}
img{max-width:100%;border:1px solid #d0d7de;border-radius:8px;background:#fff}
"""


# Marks the body once the page has loaded: whether every plot decoded (a browser check reads it).
RENDER_CHECK = ("<script>window.addEventListener('load',()=>{const ok=[...document.images].every("
                "i=>i.complete&&i.naturalWidth>0);document.body.dataset.plots=ok?'rendered':'broken';});</script>")


@dataclass(frozen=True, slots=True)
class Round:
    """One verification: when it ran (epoch ms), how long it took, its verdicts."""

    time_ms: int
    seconds: float
    results: list[PartitionVerification]


def render(source: str, destination: str, rounds: list[Round]) -> str:
    last = rounds[-1]
    t = totals(last.results)
    verdict = ("DIVERGED", "bad") if t.diverged else (("UNREADABLE", "warn") if t.errors else ("FAITHFUL", "ok"))
    when = datetime.datetime.fromtimestamp(last.time_ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    mb_s = t.bytes_compared / max(last.seconds, 1e-9) / 1e6
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>kmirror verify report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>kmirror verify</h1>",
        f"<p class='sub'>source <code>{_e(source)}</code> &rarr; destination <code>{_e(destination)}</code>, "
        f"{when}, {len(rounds)} verification(s)</p>",
        "<div class='cards'>",
        _card("verdict", f"<span class='{verdict[1]}'>{verdict[0]}</span>"),
        _card("partitions", f"{t.partitions} in {t.topics} topic(s)"),
        _card("diverged", f"<span class='{'bad' if t.diverged else 'ok'}'>{t.diverged}</span>"),
        _card("records behind", f"{t.records_behind:,}"),
        _card("bytes behind", _bytes(t.bytes_behind)),
        _card("RPO (time behind)", f"{t.rpo_ms:,} ms"),
        _card("log compared", f"{_bytes(t.bytes_compared)} in {last.seconds:.1f} s ({mb_s:,.0f} MB/s)"),
        "</div>",
        "<h2>Topics</h2>", _topic_table(last.results),
        "<h2>Partitions</h2>", _partition_table(last.results),
    ]
    diverged = [r for r in last.results if r.divergence is not None]
    if diverged:
        parts.append("<h2>First divergence per partition</h2>")
        parts.extend(_divergence(r) for r in diverged)
    parts.append("<h2>Lag per partition</h2>")
    parts.append(_img(_lag_plot(last.results), "lag per partition"))
    if len(rounds) > 1:
        parts.append("<h2>RPO over time</h2>")
        parts.append(_img(_rpo_plot(rounds), "RPO over time"))
    parts.append("<p class='sub'>Lag is not divergence: a destination that is an identical prefix of its source "
                 "is faithful. Time behind = latest source record's timestamp minus the last mirrored record's, "
                 "the data a failover now would lose.</p>")
    parts.append(RENDER_CHECK)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path: Path, source: str, destination: str, rounds: list[Round]) -> None:
    path.write_text(render(source, destination, rounds), encoding="utf-8")


def _e(text: object) -> str:
    return html.escape(str(text))


def _card(key: str, value_html: str) -> str:
    return f"<div class='card'><div class='v'>{value_html}</div><div class='k'>{_e(key)}</div></div>"


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError


def _table(headers: list[str], rows: list[tuple[str, list[str]]], left: int = 1) -> str:
    head = "".join(f"<th class='{'l' if i < left else ''}'>{_e(h)}</th>" for i, h in enumerate(headers))
    body = "".join(
        f"<tr class='{cls}'>" + "".join(f"<td class='{'l' if i < left else ''}{' s' if i == len(cells) - 1 else ''}'>"
                                        f"{_e(c)}</td>" for i, c in enumerate(cells)) + "</tr>"
        for cls, cells in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _topic_table(results: list[PartitionVerification]) -> str:
    by_topic: dict[str, list[PartitionVerification]] = defaultdict(list)
    for r in results:
        by_topic[r.plan.topic].append(r)
    rows = []
    for topic, rs in sorted(by_topic.items()):
        t = totals(rs)
        status = "DIVERGED" if t.diverged else ("ERROR" if t.errors else ("BEHIND" if t.records_behind else "IN-SYNC"))
        rows.append((status, [topic, rs[0].plan.source_topic_id or "-", rs[0].plan.destination_topic_id or "-",
                              str(t.partitions), _bytes(t.bytes_compared), f"{t.records_behind:,}",
                              _bytes(t.bytes_behind), f"{t.rpo_ms:,}", status]))
    return _table(["topic", "source topic id", "destination topic id", "partitions", "compared", "records behind",
                   "bytes behind", "time behind (ms)", "status"], rows, left=3)


def _partition_table(results: list[PartitionVerification]) -> str:
    rows = []
    for r in results:
        p = r.plan
        rows.append((r.status, [p.topic, str(p.partition), f"{p.source_log_start_offset}-{p.source_high_watermark}",
                                f"{p.destination_log_start_offset}-{p.destination_high_watermark}",
                                f"{r.batches_compared:,}", _bytes(r.bytes_compared), f"{r.records_behind:,}",
                                _bytes(r.bytes_behind), f"{r.time_behind_ms:,}",
                                str(r.divergence.offset) if r.divergence else "-", r.status]))
    return _table(["topic", "partition", "source log (start-end)", "destination log (start-end)",
                   "batches compared", "bytes compared", "records behind", "bytes behind", "time behind (ms)",
                   "first differing offset", "status"], rows)


def _divergence(r: PartitionVerification) -> str:
    d = r.divergence
    assert d is not None
    src, dst = d.source_batch or {}, d.destination_batch or {}
    rows = []
    for name in HEADER_FIELDS:
        a, b = src.get(name, "-"), dst.get(name, "-")
        if name == "crc":
            a = f"{a:#010x}" if isinstance(a, int) else a
            b = f"{b:#010x}" if isinstance(b, int) else b
        rows.append(f"<tr><td class='l'>{_e(name)}</td><td class='{'diff' if a != b else ''}'>{_e(a)}</td>"
                    f"<td class='{'diff' if a != b else ''}'>{_e(b)}</td></tr>")
    return (f"<h3>{_e(r.plan.topic_partition_name)} at offset {d.offset}</h3><p>{_e(d.what)}</p>"
            "<table><thead><tr><th class='l'>batch header</th><th>source</th><th>destination</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _img(png: bytes, alt: str) -> str:
    return f"<p><img alt='{_e(alt)}' src='data:image/png;base64,{base64.b64encode(png).decode()}'></p>"


def _figure() -> tuple[Any, Any]:
    import matplotlib  # plotting loads only when a report is written

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(9, 3.6), dpi=100)


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt  # plotting loads only when a report is written

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _lag_plot(results: list[PartitionVerification]) -> bytes:
    fig, ax = _figure()
    names = [r.plan.topic_partition_name for r in results]
    colors = ["#cf222e" if r.divergence else ("#d4a72c" if r.records_behind else "#2da44e") for r in results]
    ax.bar(range(len(results)), [r.records_behind for r in results], color=colors)
    ax.set_xticks(range(len(results)), names, rotation=45 if len(names) > 8 else 0, ha="right" if len(names) > 8 else "center")
    ax.set_ylabel("records behind")
    ax.set_title("lag per partition (green in sync, yellow behind, red diverged)")
    ax2 = ax.twinx()
    ax2.plot(range(len(results)), [r.time_behind_ms for r in results], "o", color="#0969da")
    ax2.set_ylabel("time behind (ms)", color="#0969da")
    ax2.set_ylim(bottom=0)
    return _png(fig)


def _rpo_plot(rounds: list[Round]) -> bytes:
    fig, ax = _figure()
    start = rounds[0].time_ms
    xs = [(r.time_ms - start) / 1000 for r in rounds]
    ax.plot(xs, [totals(r.results).rpo_ms for r in rounds], "-o", color="#0969da", label="RPO (ms)")
    ax.set_xlabel("seconds since the first verification")
    ax.set_ylabel("RPO, time behind (ms)")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(xs, [totals(r.results).records_behind for r in rounds], "--s", color="#d4a72c", label="records behind")
    ax2.set_ylabel("records behind", color="#9a6700")
    ax2.set_ylim(bottom=0)
    ax.set_title("RPO over time (repeated verification)")
    return _png(fig)
