#!/usr/bin/env python3
"""Benchmark place details (issue 34) through the real daemon, release builds, the Helsinki extract.

1. The places file: its size and the import's time with details, beside a baseline placectl's
   (--baseline-placectl, a build of the commit before details) on the same extract; each import run
   `--imports` times, the median wall time.
2. Round trips over one raw varlink connection (NUL-framed JSON, one call in flight), `--calls` each
   after 200 unmeasured: Details of a place with opening hours (every key, hours evaluated), and Rank at
   Helsinki's centre (limit 20) with the standard keys beside fields ["id", "likelihood"]: p50, p99 and
   the reply's bytes.

Usage: bench/details.py [--placed PATH] [--placectl PATH] [--baseline-placectl PATH] [--calls 5000]
"""
import argparse
import json
import pathlib
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import HELSINKI_CENTER, PLACES, PlacedService, bin_path, percentile  # noqa: E402

HELSINKI = ROOT / "data" / "helsinki-center.osm.pbf"
CAFE = "osm:node/1381017836"  # Robert's Coffee, Forum: Mo-Fr 07:00-19:00; Sa 10:00-18:00


def imported(placectl, path, runs):
    """(median wall seconds, median CPU seconds, bytes, the import's output) of importing Helsinki `runs`
    times. The CPU time (user + system, every thread) says more than the wall time on a busy machine."""
    times, cpu, out = [], [], ""
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        done = subprocess.run([placectl, "import", HELSINKI, "--db", path], capture_output=True, text=True,
                              timeout=300)
        times.append(time.monotonic() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        assert done.returncode == 0, done.stderr
        out = done.stdout
    return statistics.median(times), statistics.median(cpu), pathlib.Path(path).stat().st_size, out


def round_trips(sock, messages, calls):
    """Per message, latencies (µs) and the reply's size (bytes, without the NUL) of `calls` calls. The
    messages take turns, so a machine busier at one moment weighs on each alike."""
    data = [json.dumps(message).encode() + b"\0" for message in messages]
    latencies, sizes = [[] for _ in messages], [0] * len(messages)
    for index in range(calls + 200):
        for which, message in enumerate(data):
            start = time.perf_counter_ns()
            sock.sendall(message)
            buffer = b""
            while not buffer.endswith(b"\0"):
                chunk = sock.recv(1 << 20)
                assert chunk, "placed closed the connection"
                buffer += chunk
            elapsed = (time.perf_counter_ns() - start) / 1000
            assert b'"error"' not in buffer[:40], buffer[:200]
            if index >= 200:
                latencies[which].append(elapsed)
            sizes[which] = len(buffer) - 1
    return latencies, sizes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--placed", default=str(bin_path("release", "placed")))
    parser.add_argument("--placectl", default=str(bin_path("release", "placectl")))
    parser.add_argument("--baseline-placectl")
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--imports", type=int, default=5)
    arguments = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="placed-bench-details-") as work:
        work = pathlib.Path(work)
        seconds, cpu, size, out = imported(arguments.placectl, work / "places.db", arguments.imports)
        print("places file with details: %d bytes, import %.3f s, CPU %.3f s (medians of %d)" % (
            size, seconds, cpu, arguments.imports))
        for line in out.splitlines():
            if line.startswith("details:"):
                print("  " + line)
        if arguments.baseline_placectl:
            base_seconds, base_cpu, base_size, _ = imported(arguments.baseline_placectl, work / "baseline.db",
                                                            arguments.imports)
            print("places file baseline: %d bytes, import %.3f s, CPU %.3f s (medians of %d)" % (
                base_size, base_seconds, base_cpu, arguments.imports))
            print("places file growth: %+.1f %%, import CPU %+.1f %%" % (100 * (size / base_size - 1),
                                                                         100 * (cpu / base_cpu - 1)))

        placed = PlacedService(arguments.placed, work, "--time-zone", "Europe/Helsinki", static=HELSINKI_CENTER)
        try:
            placed.wait_ready()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(placed.socket))
            latitude, longitude = map(float, HELSINKI_CENTER.split(",")[:2])
            rank = {"latitude": latitude, "longitude": longitude, "limit": 20}
            cases = [
                ("Details (every key, hours evaluated)", {"id": CAFE}, "Details"),
                ("Rank, 20 places, standard keys", rank, "Rank"),
                ("Rank, 20 places, fields id,likelihood", dict(rank, fields=["id", "likelihood"]), "Rank"),
                ("Rank, 20 places, fields *", dict(rank, fields=["*"]), "Rank"),
            ]
            print("%-40s %9s %9s %9s" % ("round trip", "p50 us", "p99 us", "bytes"))
            latencies, sizes = round_trips(
                sock, [{"method": PLACES + "." + method, "parameters": parameters} for _, parameters, method in cases],
                arguments.calls)
            for (label, _, _), times, size in zip(cases, latencies, sizes):
                print("%-40s %9.1f %9.1f %9d" % (label, percentile(times, 50), percentile(times, 99), size))
            sock.close()
        finally:
            placed.stop()


if __name__ == "__main__":
    main()
