#!/usr/bin/env python3
"""walkthroughs/plot_results.py -- the plots of the paper walkthroughs, from their CSVs.

    python3 walkthroughs/plot_results.py [--results walkthroughs/results] [--quick]

For each result directory that exists (table2, lr_sweep, fig6, table6, table7; with --quick the
*_quick ones) it writes PNGs beside the CSVs:
  table2/loss_curves.png   validation loss against tokens, every configuration, mean over seeds
                           (the paper's Fig.3): one panel per optimiser, colour = mixer,
                           solid = hybrid, dashed = pure, black = softmax (dense)
  lr_sweep/lr_sweep.png    final loss against log10 learning rate, one panel per optimiser (Figs.4-5)
  fig6/fig6.png            seconds per iteration against sequence length (Fig.6)
  table6/table6.png, table7/table7.png   seed-paired deltas of the routed runs with +-1 sd bars
Needs matplotlib only (the CSVs are read with the csv module).
"""
import argparse
import csv
import math
import pathlib
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"softmax": "black", "deltanet": "tab:blue", "gdn": "tab:green", "kda": "tab:orange", "gdn2": "tab:purple"}


def read_csv(path):
    """Rows of a CSV as dicts, skipping the trainer's '#' signature lines."""
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def per_optimiser(d, filename, figsize, title, xlabel, ylabel, draw, legend_size):
    """One panel per optimiser (AdamW left, Muon right, shared y axis); draw(ax, opt) fills one."""
    fig, axes = plt.subplots(1, 2, figsize=figsize, sharey=True)
    for ax, opt in zip(axes, ["adamw", "muon"]):
        draw(ax, opt)
        ax.set_title(f"{opt}: {title}")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=legend_size)
    axes[0].set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(d / filename, dpi=120)
    plt.close(fig)
    return d / filename


def plot_table2(d):
    runs = read_csv(d / "runs.csv")
    curves = defaultdict(list)  # group -> list of (tokens, val) per seed
    meta = {}
    for r in runs:
        rows = read_csv(d / "runs" / (r["name"] + ".csv"))
        curves[r["group"]].append([(num(x["tokens"]), num(x["val_loss"])) for x in rows if x["val_loss"] not in ("", "nan")])
        meta[r["group"]] = (r["arch"], r["optimizer"], r["stack"])

    def draw(ax, opt):
        for g, seeds in sorted(curves.items()):
            arch, o, stack = meta[g]
            if o != opt or not seeds:
                continue
            n = min(len(s) for s in seeds)
            xs = [seeds[0][i][0] for i in range(n)]
            ys = [sum(s[i][1] for s in seeds) / len(seeds) for i in range(n)]
            ax.plot(xs[1:], ys[1:], color=COLOURS.get(arch, "grey"), ls="--" if stack == "pure" else "-",
                    label=f"{arch} {stack}")

    return per_optimiser(d, "loss_curves.png", (12, 4.5), "validation loss (mean over seeds)",
                         "training tokens", "nats / char", draw, 7)


def plot_lr_sweep(d):
    rows = read_csv(d / "lr_sweep.csv")

    def draw(ax, opt):
        by = defaultdict(list)
        for r in rows:
            if r["optimizer"] == opt:
                by[r["mixer"]].append((math.log10(num(r["lr"])), num(r["final_mean"]), num(r["final_sd"])))
        for m, pts in by.items():
            pts.sort()
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[0 if math.isnan(p[2]) else p[2] for p in pts],
                        marker="o", color=COLOURS.get(m, "grey"), label=m, capsize=2)

    return per_optimiser(d, "lr_sweep.png", (11, 4.2), "final loss against learning rate",
                         "log10 peak learning rate", "final validation loss (nats / char)", draw, 8)


def plot_fig6(d):
    rows = read_csv(d / "fig6.csv")
    fig, ax = plt.subplots(figsize=(6, 4.2))
    style = {"softmax": ("grey", "softmax (dense)"), "gdn_hybrid": ("darkgreen", "GDN hybrid"), "gdn_pure": ("limegreen", "GDN pure")}
    by = defaultdict(list)
    for r in rows:
        by[r["config"]].append((num(r["seq_len"]), num(r["median_s"]), num(r["min_s"]), num(r["max_s"])))
    for cfg, pts in by.items():
        pts.sort()
        c, label = style.get(cfg, ("black", cfg))
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                    yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]], marker="o", color=c, label=label, capsize=2)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length T (tokens per iteration constant)")
    ax.set_ylabel("seconds per iteration (median; bars: min-max)")
    ax.set_title("iteration time against sequence length")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(d / "fig6.png", dpi=120)
    plt.close(fig)
    return d / "fig6.png"


def plot_deltas(d, name, label_cols, series):
    rows = read_csv(d / f"{name}.csv")
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(rows)), 4))
    width = 0.8 / len(series)
    for j, (col, legend, colour) in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(rows))]
        ys = [num(r[col + "_mean"]) for r in rows]
        es = [0 if math.isnan(num(r[col + "_sd"])) else num(r[col + "_sd"]) for r in rows]
        ax.bar(xs, ys, width, yerr=es, capsize=3, label=legend, color=colour)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([" ".join(r[c] for c in label_cols) for r in rows], fontsize=8)
    ax.set_ylabel("final loss delta vs baseline (nats / char)")
    ax.set_title(f"{name}: seed-paired deltas, mean +- 1 sd (negative = better)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(d / f"{name}.png", dpi=120)
    plt.close(fig)
    return d / f"{name}.png"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    ap.add_argument("--quick", action="store_true", help="plot the *_quick directories")
    a = ap.parse_args(argv)
    root = pathlib.Path(a.results)
    suffix = "_quick" if a.quick else ""
    jobs = [
        ("table2", "runs.csv", plot_table2),
        ("lr_sweep", "lr_sweep.csv", plot_lr_sweep),
        ("fig6", "fig6.csv", plot_fig6),
        ("table6", "table6.csv", lambda d: plot_deltas(d, "table6", ["optimizer", "host"], [("delta", "CLER", "tab:red")])),
        ("table7", "table7.csv", lambda d: plot_deltas(d, "table7", ["host", "steps"],
                                                       [("cler_h_delta", "CLER-H", "tab:blue"), ("clvr_delta", "CLVR", "tab:green")])),
    ]
    made = []
    for item, needed, fn in jobs:
        d = root / (item + suffix)
        if (d / needed).exists():
            made.append(fn(d))
    for p in made:
        print("wrote", p)
    if not made:
        print(f"no results found under {root} (suffix '{suffix}')", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
