#!/usr/bin/env python3
"""Predicted versus measured iteration time of real CPU runs (issue 5, docs/cost-model.md).

For each preset and each repetition: run it on the CPU backend, read the measured iteration
time back with `pipescope-trace stats --json`, then simulate the same config with
costs.source = "calibrated:RUN.db" and print both with the prediction's error. The measured
figure is the mean over the measured iterations (what `stats` reports) and their median. The
predictions: "typical" times the schedule once with typical op times (the calibrated table);
"spread" is the mean over repeated timings with op times drawn from the run's own (what the
simulator reports as the recorded spread), the one that predicts the run.

    bench/calibration.py --bin build/release/bin --runs 3 \
        resources/presets/small-2stage-naive.json resources/presets/small-2stage-vocab-2.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("presets", nargs="+", help="config files to run")
    ap.add_argument("--bin", default="build/release/bin", help="folder with the binaries")
    ap.add_argument("--runs", type=int, default=2, help="repetitions per preset")
    ap.add_argument("--iterations", type=int, default=20, help="iterations per run")
    ap.add_argument("--keep", help="folder to keep the run files in (default: a temporary one)")
    args = ap.parse_args()
    runner = os.path.join(args.bin, "pipescope-run")
    trace = os.path.join(args.bin, "pipescope-trace")
    for tool in (runner, trace):
        if not os.access(tool, os.X_OK):
            sys.exit(f"{tool} not found: build first or pass --bin")

    out_dir = args.keep or tempfile.mkdtemp(prefix="pipescope-calibration-")
    os.makedirs(out_dir, exist_ok=True)
    print(f"{'preset':24} {'run':>3} {'mean ms':>8} {'median':>8} {'typical':>8} {'error':>7} "
          f"{'spread':>8} {'error':>7} {'p10-p90 ms':>13}")
    for preset in args.presets:
        name = os.path.splitext(os.path.basename(preset))[0]
        for i in range(1, args.runs + 1):
            db = os.path.join(out_dir, f"{name}-{i}.db")
            if os.path.exists(db):
                os.remove(db)
            run([runner, preset, "--backend", "cpu", "--out", db,
                 "--iterations", str(args.iterations)])
            stats = json.loads(run([trace, "stats", db, "--json"]))
            it = stats["iterations"]
            per = [it["per_iteration_ms"][it["numbers"].index(n)] for n in it["selected"]]
            mean = stats["iteration_time_ms"]
            median = statistics.median(per)
            summary = json.loads(run([runner, preset, "--set",
                                      f'costs.source="calibrated:{db}"',
                                      "--summary-json", "-"]))
            typical = summary["iteration_time_ms"]
            spread = summary.get("recorded_spread")
            line = (f"{name:24} {i:3d} {mean:8.2f} {median:8.2f} {typical:8.2f} "
                    f"{100 * (typical - mean) / mean:+6.1f}%")
            if spread:
                drawn = spread["iteration_time_ms"]
                line += (f" {drawn:8.2f} {100 * (drawn - mean) / mean:+6.1f}% "
                         f"{spread['p10_ms']:6.2f}-{spread['p90_ms']:6.2f}")
            print(line, flush=True)
    if not args.keep:
        print(f"(run files in {out_dir})")


if __name__ == "__main__":
    main()
