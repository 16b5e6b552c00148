"""Draws docs/benchmarks.png from the CSV files of one scripts/bench.sh run.

usage: plot-bench.py RESULTS_DIR OUTPUT_PNG
"""
import csv
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(results, name):
    path = Path(results) / name
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def main(results, output):
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax_delay, ax_burst, ax_cluster, ax_rate = axes.flat

    # Fire delay against the number of one-second jobs (short precision runs, one shard).
    series = defaultdict(list)
    for r in rows(results, "precision.csv"):
        if r["shards"] == "1" and int(r["seconds"]) < 100:
            series[r["scheduler"]].append(
                (int(r["jobs"]), float(r["p50_ms"]), float(r["p99_ms"]))
            )
    for name, points in sorted(series.items()):
        points.sort()
        xs = [p[0] for p in points]
        line = ax_delay.plot(xs, [p[1] for p in points], marker="o", label=f"{name} p50")[0]
        ax_delay.plot(
            xs, [p[2] for p in points], marker="x", linestyle="--",
            color=line.get_color(), label=f"{name} p99",
        )
    ax_delay.set_xscale("log")
    ax_delay.set_yscale("log")
    ax_delay.set_xlabel("jobs, each on a one-second cron")
    ax_delay.set_ylabel("delay from scheduled instant to executor call (ms)")
    ax_delay.set_title("Fire delay")
    ax_delay.legend(fontsize=8)
    ax_delay.grid(True, which="both", alpha=0.3)

    # Burst: executor calls received against time since the instant.
    delays = sorted(float(r["delay_ms"]) for r in rows(results, "burst.csv"))
    if delays:
        ax_burst.plot([d / 1000 for d in delays], range(1, len(delays) + 1))
    ax_burst.set_xlabel("seconds after the instant")
    ax_burst.set_ylabel("executor calls received")
    ax_burst.set_title(f"Burst: {len(delays):,} jobs due at one instant (JobFlow)")
    ax_burst.grid(True, alpha=0.3)

    # Cluster: share of jobs changing owner when one instance joins.
    labels, measured, computed, ideal = [], [], [], []
    for r in rows(results, "cluster.csv"):
        m = int(r["instances"])
        labels.append(f"{m}→{m + 1}\n{r['strategy']}")
        measured.append(100 * float(r["moved_measured"]))
        computed.append(100 * float(r["moved_computed_100k"]))
        ideal.append(100 / (m + 1))
    xs = range(len(labels))
    ax_cluster.bar([x - 0.2 for x in xs], measured, width=0.4, label="measured (fired by)")
    ax_cluster.bar([x + 0.2 for x in xs], computed, width=0.4, label="computed, 100,000 names")
    ax_cluster.scatter(list(xs), ideal, color="black", marker="_", s=600, label="ideal 1/(M+1)", zorder=3)
    ax_cluster.set_xticks(list(xs), labels, fontsize=8)
    ax_cluster.set_ylabel("% of jobs changing owner")
    ax_cluster.set_title("One instance joins")
    ax_cluster.legend(fontsize=8)
    ax_cluster.grid(True, axis="y", alpha=0.3)

    # Sustained throughput: executions per second delivered against offered.
    for r in rows(results, "precision.csv"):
        if int(r["seconds"]) >= 100:
            offered = int(r["expected"]) / int(r["seconds"])
            delivered = int(r["executions"]) / int(r["seconds"])
            ax_rate.bar(
                f"{r['scheduler']}\nshards {r['shards']}", delivered,
                label=None,
            )
            ax_rate.text(
                f"{r['scheduler']}\nshards {r['shards']}", delivered,
                f"{delivered:.0f}/s\np99 {float(r['p99_ms']):.0f} ms\n{float(r['cpu_scheduler']):.2f} cores",
                ha="center", va="bottom", fontsize=8,
            )
            ax_rate.axhline(offered, color="grey", linestyle=":", linewidth=1)
    ax_rate.set_ylabel("executions per second delivered")
    ax_rate.set_title("Sustained dispatch (dotted: offered)")
    ax_rate.tick_params(axis="x", labelsize=8)
    ax_rate.margins(y=0.3)
    ax_rate.grid(True, axis="y", alpha=0.3)

    fig.suptitle("JobFlow benchmarks (2 cores, MariaDB on the same machine)")
    fig.tight_layout()
    fig.savefig(output, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
