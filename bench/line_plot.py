"""The charts of a benchmark's results, saved as PNGs: a line chart, one line per series, and
a pair of bar charts over the same cases (matplotlib, imported here only: most runs plot
nothing); and `report`, which prints a bench's table and appends it to the benchmarks page."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def save_line_plot(path: Path, series: Mapping[str, Sequence[tuple[float, float]]], xlabel: str, ylabel: str,
                   title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for label, points in series.items():
        ax.plot([x for x, _ in sorted(points)], [y for _, y in sorted(points)], "o-", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def save_bar_pair(path: Path, names: Sequence[str], left: tuple[str, Sequence[float]],
                  right: tuple[str, Sequence[float]], title: str) -> None:
    """Two bar charts side by side over the same cases: (y label, values) each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (ylabel, values), color in zip(axes, (left, right), ("#55A868", "#4C72B0"), strict=True):
        ax.bar(list(names), list(values), color=color)
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", labelrotation=15)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(text: str, plot_path: Path, out: Path | None) -> None:
    """Print a bench's table and where its plot is; with `out`, append the table to that
    markdown file under a dated "Run of" heading."""
    print(text)
    print(f"plot: {plot_path}")
    if out is not None:
        with open(out, "a") as f:
            f.write(f"\n### Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n{text}\n")
