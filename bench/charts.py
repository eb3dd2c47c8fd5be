"""PNG charts of one results file (matplotlib, the ``bench`` extra)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

GLUON = "#1f77b4"
RAW = "#7f7f7f"
COLORS = {
    "in-place": "#1f77b4",
    "full": "#ff7f0e",
    "partition-wise full": "#2ca02c",
    "raw MERGE INTO": "#7f7f7f",
    "raw rewrite": "#bcbcbc",
}


def draw(output: dict[str, Any], out: Path, stem: str) -> list[Path]:
    """Write one PNG per figure group present in ``output``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    figures = output["figures"]
    title = f"gluon benchmark, scale {output['scale']} ({output['machine']['nproc']} cores)"
    written = []
    for name, draw_one in (
        ("capture", _capture),
        ("extraction", _extraction),
        ("compaction", _compaction),
        ("reads", _reads),
        ("curve", _curve),
    ):
        path = out / f"{name}-{stem}.png"
        if draw_one(figures, path, title):
            written.append(path)
    return written


def _group(figures: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    return [f for f in figures if f["group"] == group]


def _save(fig: Any, path: Path) -> bool:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return True


def _capture(figures: list[dict[str, Any]], path: Path, title: str) -> bool:
    import matplotlib.pyplot as plt

    rows = _group(figures, "capture")
    if not rows:
        return False
    fig, axes = plt.subplots(1, len(rows), figsize=(4.5 * len(rows), 3.6), squeeze=False)
    for ax, row in zip(axes[0], rows, strict=True):
        method = row["params"].get("method", "CHANGELOG")
        bars = ax.bar([row["baseline_name"], f"gluon {method}"], [row["baseline"], row["gluon"]])
        bars[0].set_color(RAW)
        bars[1].set_color(GLUON)
        ax.set_title(f"{row['name']}\n(gluon costs {row['ratio']:.2f}x)", fontsize=9)
        ax.set_ylabel(row["unit"])
    fig.suptitle(f"Capture overhead - {title}", fontsize=10)
    return _save(fig, path)


def _extraction(figures: list[dict[str, Any]], path: Path, title: str) -> bool:
    import matplotlib.pyplot as plt

    rows = [f for f in _group(figures, "extraction") if "changes" in f["params"]]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.8))
    changes = [row["params"]["changes"] for row in rows]
    ax.plot(changes, [row["gluon"] for row in rows], "o-", color=GLUON, label="gluon extraction")
    ax.plot(changes, [row["baseline"] for row in rows], "s--", color=RAW, label="raw")
    ax.set_xscale("log")
    ax.set_xlabel("pending changes")
    ax.set_ylabel("changes/s (process wall time)")
    noop = [f for f in _group(figures, "extraction") if "no-op" in f["name"]]
    if noop:
        ax.set_title(f"no-op extraction: {noop[0]['gluon']:.2f} s wall", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.suptitle(f"Extraction - {title}", fontsize=10)
    return _save(fig, path)


def _compaction(figures: list[dict[str, Any]], path: Path, title: str) -> bool:
    import matplotlib.pyplot as plt

    times = _group(figures, "compaction")
    if not times:
        return False
    memory = _group(figures, "compaction memory")
    cells: dict[str, dict[str, float]] = defaultdict(dict)
    peaks: dict[str, dict[str, float]] = defaultdict(dict)
    for row in times:
        label = row["name"].split(", ", 1)[1]
        cells[label][row["params"]["method"]] = row["gluon"]
        cells[label]["raw MERGE INTO"] = row["detail"]["raw_merge_s"]
        cells[label]["raw rewrite"] = row["detail"]["raw_rewrite_s"]
    for row in memory:
        label = row["name"].split(", ", 1)[1]
        peaks[label][row["params"]["method"]] = row["gluon"]
        peaks[label]["raw MERGE INTO"] = row["detail"]["raw_merge_peak_rss_mb"]
        peaks[label]["raw rewrite"] = row["detail"]["raw_rewrite_peak_rss_mb"]
    fig, axes = plt.subplots(2, 1, figsize=(max(7, 1.9 * len(cells)), 7))
    for ax, data, unit in ((axes[0], cells, "seconds (wall)"), (axes[1], peaks, "peak RSS, MB")):
        labels = list(data)
        series = list(COLORS)
        width = 0.8 / len(series)
        for index, name in enumerate(series):
            xs = [i + (index - len(series) / 2 + 0.5) * width for i in range(len(labels))]
            ax.bar(
                xs,
                [data[label].get(name, 0) for label in labels],
                width,
                label=name,
                color=COLORS[name],
            )
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8, ncol=3)
    base = times[0]["params"]
    fig.suptitle(
        f"Compaction of a {base['base_rows']:,}-row, {base['partitions']}-partition base - {title}",
        fontsize=10,
    )
    return _save(fig, path)


def _reads(figures: list[dict[str, Any]], path: Path, title: str) -> bool:
    import matplotlib.pyplot as plt

    rows = _group(figures, "reads")
    if not rows:
        return False
    queries = list(dict.fromkeys(row["params"]["query"] for row in rows))
    fig, axes = plt.subplots(1, len(queries), figsize=(4 * len(queries), 3.6), squeeze=False)
    for ax, query in zip(axes[0], queries, strict=True):
        mine = [row for row in rows if row["params"]["query"] == query]
        # one line per layout (changes spread over every partition, or clustered in a few)
        layouts = dict.fromkeys(row["params"].get("layout", "spread") for row in mine)
        for layout, style in zip(layouts, ("o-", "^-", "v-"), strict=False):
            steps = [row for row in mine if row["params"].get("layout", "spread") == layout]
            fractions = [row["params"]["fraction"] * 100 for row in steps]
            gluon = [row["gluon"] for row in steps]
            ax.plot(fractions, gluon, style, color=GLUON, label=f"user view, {layout}")
            base = [row["baseline"] for row in steps]
            ax.plot(fractions, base, "s--", color=RAW, label=f"base alone, {layout}")
        ax.set_xscale("log")
        ax.set_xlabel("delta, % of the base")
        ax.set_ylabel("seconds (median)")
        ax.set_title(mine[0]["name"].split(",")[0], fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Reads through the user view - {title}", fontsize=10)
    return _save(fig, path)


def _curve(figures: list[dict[str, Any]], path: Path, title: str) -> bool:
    import matplotlib.pyplot as plt

    rows = _group(figures, "scale curve")
    if not rows:
        return False
    offloads = [f for f in _group(figures, "offload") if f["params"].get("curve")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    series: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for row in rows:
        size = row["params"]["base_rows"]
        step = "extraction" if row["params"]["step"] == "extraction" else row["params"]["method"]
        series[(step, f"gluon {step}")][size] = row["gluon"]
        series[(step, row["baseline_name"])][size] = row["baseline"]
    palette = {"extraction": "#1f77b4", "in-place": "#2ca02c", "full": "#ff7f0e"}
    for (step, name), points in series.items():
        sizes = sorted(points)
        style = "o-" if name.startswith("gluon") else "s--"
        color = palette.get(step, GLUON)
        axes[0].plot(
            sizes, [points[s] for s in sizes], style, color=color, label=name, markersize=4
        )
    changes = rows[0]["params"]["changes"]
    axes[0].set_title(f"about {changes:,} changes at every size", fontsize=9)
    axes[0].set_xlabel("base rows")
    axes[0].set_ylabel("seconds (wall)")
    axes[0].legend(fontsize=7)
    axes[0].grid(alpha=0.3)
    if offloads:
        ordered = sorted(offloads, key=lambda row: row["params"]["rows"])
        sizes = [row["params"]["rows"] for row in ordered]
        axes[1].plot(sizes, [row["gluon"] for row in ordered], "o-", color=GLUON, label="gluon")
        axes[1].plot(sizes, [row["baseline"] for row in ordered], "s--", color=RAW, label="raw")
        axes[1].set_title("initial offload", fontsize=9)
        axes[1].set_xlabel("rows")
        axes[1].set_ylabel("rows/s")
        axes[1].legend(fontsize=8)
        axes[1].grid(alpha=0.3)
    fig.suptitle(f"Scale curve - {title}", fontsize=10)
    return _save(fig, path)
