#!/usr/bin/env python3
"""Opening hours per value, p50 over every distinct opening_hours value of the Helsinki extract: placed's
parse and evaluate (`placed-bench hours --time`, release; state and next change at 50 instants through 2026
in Europe/Helsinki) beside opening-hours-py (opening-hours-rs) on the same values and instants, in the same
run."""
import datetime
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zoneinfo

import opening_hours

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from test_opening_hours import LATITUDE, LONGITUDE, ZONE, ZONE_FILE, helsinki_values  # noqa: E402

BENCH = ROOT / ".build" / "release" / "placed-bench"
INSTANTS = 50


def main():
    with tempfile.TemporaryDirectory() as work:
        values = sorted(helsinki_values(pathlib.Path(work)))
        listing = pathlib.Path(work) / "values.txt"
        listing.write_text("\n".join(values) + "\n")
        out = subprocess.run([BENCH, "hours", "--zone", ZONE_FILE, "--time", listing, "--instants", str(INSTANTS)],
                             capture_output=True, text=True, check=True).stdout
    figures = dict(re.findall(r"(parse|evaluate) .*?p50 ([0-9.]+) µs", out))
    start = datetime.datetime(2026, 1, 1, tzinfo=ZONE)
    step = datetime.timedelta(seconds=365 * 86_400 // INSTANTS + 3_607)  # as placed-bench steps
    moments = [start + i * step for i in range(INSTANTS)]
    parse_times, evaluate_times = [], []
    for value in values:
        began = time.perf_counter()
        try:
            hours = opening_hours.OpeningHours(value, timezone=ZONE, country="FI", coords=(LATITUDE, LONGITUDE))
        except Exception:
            continue
        parse_times.append((time.perf_counter() - began) * 1e6)
        began = time.perf_counter()
        for moment in moments:
            hours.state(moment)
            hours.next_change(moment)
        evaluate_times.append((time.perf_counter() - began) * 1e6 / len(moments))
    print("opening hours, p50 per value over %d Helsinki values (%d instants each)" % (len(values), INSTANTS))
    print("  parse                    placed %8.2f us   opening-hours-py %8.2f us"
          % (float(figures["parse"]), statistics.median(parse_times)))
    print("  evaluate (state + next)  placed %8.2f us   opening-hours-py %8.2f us"
          % (float(figures["evaluate"]), statistics.median(evaluate_times)))


if __name__ == "__main__":
    main()
