"""``ddpkit plot`` (alias ``curves``): a run's metrics.csv as curves."""

from __future__ import annotations

import argparse
from typing import Any

from ddpkit.cli._parser import Command


def _register(sub: Any) -> argparse.ArgumentParser:
    plot: argparse.ArgumentParser = sub.add_parser(
        "plot",
        aliases=["curves"],
        help="draw a run's metrics.csv as curves (needs matplotlib)",
        description="Draw the metrics.csv that a run wrote into its default_root_dir: one "
        "panel per metric, against the step. Needs matplotlib: pip install 'ddpkit[plot]'.",
    )
    plot.add_argument("metrics", metavar="METRICS_CSV", help="for instance runs/x/metrics.csv")
    plot.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="the picture to write; its suffix picks the format (default: beside the CSV, "
        "metrics.png; a folder gets metrics.png inside it)",
    )
    return plot


def _run(args: argparse.Namespace) -> int:
    from ddpkit.utilities._curves import plot_metrics

    print(plot_metrics(args.metrics, args.output).resolve())
    return 0


COMMAND = Command("plot", ("curves",), _register, _run)
