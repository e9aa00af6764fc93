"""One line chart of a benchmark's results, one line per series, saved as a PNG (matplotlib,
imported here only: most runs plot nothing)."""

from __future__ import annotations

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
