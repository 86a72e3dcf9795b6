#!/usr/bin/env python3
"""Own places in the running daemon (issue 35): what 10,000 sites cost placed, with the release binaries.

1. `placectl own import` of 10,000 sites end to end (exec to exit: read the file, PutPlaces, placed
   checks, stores and indexes them, ranks again): the median of 3 imports into a fresh daemon each.
2. placed's idle RSS (Helsinki loaded, a static position): without own places, 2 s after the import,
   and 2 s after a restart that reads the 10,000 back (goal <= 14 MB).

The sites are the integration test's layout: a 40 m grid around central Helsinki, circles of 5 to 19 m,
every tenth a square with a hole.

Usage: bench/own_daemon.py [--placed PATH] [--placectl PATH] [--rounds N]
"""
import argparse
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import PlacedService, bin_path, rss_mb  # noqa: E402
from test_own_places import sites, write_collection  # noqa: E402

HELSINKI = ROOT / "data" / "helsinki-center.osm.pbf"
SETTLE = 2.0  # placed gives a batch's freed memory back a second after the last call


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--placed", default=str(bin_path("release", "placed")))
    parser.add_argument("--placectl", default=str(bin_path("release", "placectl")))
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="placed-own-daemon-") as scratch:
        scratch = pathlib.Path(scratch)
        places = scratch / "places.db"
        subprocess.run([options.placectl, "import", HELSINKI, "--db", places], check=True, capture_output=True)
        collection = write_collection(scratch / "sites.geojson", sites(10_000))

        imports, without, after_import, after_restart = [], [], [], []
        for round in range(options.rounds):
            directory = scratch / ("round-%d" % round)
            directory.mkdir()
            shutil.copy(places, directory / "places.db")
            placed = PlacedService(options.placed, directory)
            try:
                placed.wait_ready()
                time.sleep(SETTLE)
                without.append(rss_mb(placed.proc.pid))
                started = time.monotonic()
                out = subprocess.run([options.placectl, "--socket", placed.socket, "own", "import", collection],
                                     capture_output=True, text=True, timeout=60)
                imports.append(time.monotonic() - started)
                if out.returncode != 0 or not out.stdout.startswith("put 10000 own places"):
                    sys.exit("own import failed: %s%s" % (out.stdout, out.stderr))
                time.sleep(SETTLE)
                after_import.append(rss_mb(placed.proc.pid))
            finally:
                placed.stop()
            placed = PlacedService(options.placed, directory)
            try:
                placed.wait_ready()
                time.sleep(SETTLE)
                after_restart.append(rss_mb(placed.proc.pid))
            finally:
                placed.stop()

    median = statistics.median
    print("placectl own import of 10000 sites: median %.0f ms of %d (%s) (goal <= 1000 ms)" % (
        median(imports) * 1000, len(imports), ", ".join("%.0f" % (s * 1000) for s in imports)))
    print("placed idle RSS with 10000 own places: after a restart %.1f MB, after the import %.1f MB, "
          "without own places %.1f MB (goal <= 14 MB)" % (
              median(after_restart), median(after_import), median(without)))


if __name__ == "__main__":
    main()
