#!/usr/bin/env python3
"""Benchmark the map through the daemon (issue 17): what a client waits for, end to end.

1. varlink Map round trips on the Helsinki import (release placed, static position): one raw
   NUL-framed socket, one call in flight, from sending the call to holding the whole reply (not
   parsed), at 200 random centres in the middle half of the extract, for radii 150 m, 292 m (what
   `placectl map` asks for its default 150 m view at 800x480) and 1000 m (the largest allowed).
   Beside it, as the reference, Current (5 places) on the same socket, and the daemon's CPU time
   per call; the daemon's RSS idle, after the Map calls, and once it returned the freed heap.
2. `placectl map` from exec to exit: Current, Status and Map over the socket, the drawing, and the
   file written: SVG, and PNG (the same SVG through rsvg-convert), 20 runs each at the fix.

Usage: bench/map_daemon.py [--placed PATH] [--placectl PATH] [--calls 200] [--runs 20]
"""
import argparse
import json
import os
import pathlib
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import HELSINKI_CENTER, PLACES, PlacedService, VarlinkSocket, bin_path, percentile, rss_mb  # noqa: E402


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_trip(sock, message):
    """Seconds from sending `message` to holding its whole reply, and the reply's size in bytes."""
    start = time.perf_counter()
    sock.send_raw(message)
    size = 0
    while True:
        chunk = sock.sock.recv(1 << 20)
        assert chunk, "placed closed the connection"
        size += len(chunk)
        if chunk.endswith(b"\0"):
            return time.perf_counter() - start, size


def centres(database, count):
    """Random points in the middle half of the extract's places (seeded: the same every run)."""
    db = sqlite3.connect(database)
    south, north, west, east = db.execute(
        "SELECT min(latitude), max(latitude), min(longitude), max(longitude) FROM places").fetchone()
    db.close()
    rng = random.Random(17)
    return [(south + (0.25 + 0.5 * rng.random()) * (north - south), west + (0.25 + 0.5 * rng.random()) * (east - west))
            for _ in range(count)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--placed", default=str(bin_path("release", "placed")))
    parser.add_argument("--placectl", default=str(bin_path("release", "placectl")))
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    directory = pathlib.Path(tempfile.mkdtemp(prefix="placed-bench-map-"))
    extract = ROOT / "data" / "helsinki-center.osm.pbf"
    subprocess.run([args.placectl, "import", extract, "--db", directory / "places.db"], check=True,
                   capture_output=True)
    points = centres(directory / "places.db", args.calls)
    placed = PlacedService(args.placed, directory, static=HELSINKI_CENTER)
    try:
        placed.wait_ready()
        pid = placed.proc.pid
        time.sleep(0.5)
        idle = rss_mb(pid)
        with VarlinkSocket(placed.socket, timeout=30) as sock:
            current = json.dumps({"method": PLACES + ".Current"}).encode() + b"\0"
            for _ in range(20):
                round_trip(sock, current)  # warm
            cpu0 = cpu_seconds(pid)
            times = [round_trip(sock, current)[0] for _ in range(args.calls)]
            current_cpu = (cpu_seconds(pid) - cpu0) / args.calls
            current_p50 = percentile(times, 50) * 1000
            print("varlink round trips, %d calls each, one raw socket (send to whole reply, unparsed)" % args.calls)
            print("  call                     p50 ms   p99 ms   reply kB p50   daemon CPU ms/call")
            print("  Current (5 places)     %7.3f  %7.3f   %12.1f   %18.3f"
                  % (current_p50, percentile(times, 99) * 1000, len(json.dumps(sock.call(PLACES + ".Current"))) / 1000,
                     current_cpu * 1000))
            for radius in (150.0, 292.0, 1000.0):
                calls = [json.dumps({"method": PLACES + ".Map", "parameters": {
                    "latitude": lat, "longitude": lon, "radius": radius}}).encode() + b"\0" for lat, lon in points]
                cpu0 = cpu_seconds(pid)
                measured = [round_trip(sock, call) for call in calls]
                cpu = (cpu_seconds(pid) - cpu0) / len(calls)
                times, sizes = [t for t, _ in measured], [s for _, s in measured]
                p50 = percentile(times, 50) * 1000
                print("  Map %4.0f m (centres)   %7.3f  %7.3f   %12.1f   %18.3f   %.1fx Current"
                      % (radius, p50, percentile(times, 99) * 1000, percentile(sizes, 50) / 1000, cpu * 1000,
                         p50 / current_p50))
        busy = rss_mb(pid)
        time.sleep(1.5)  # placed returns the freed heap a second after the last Map reply
        print("  daemon RSS: idle %.1f MB, after the Map calls %.1f MB, 1.5 s later %.1f MB"
              % (idle, busy, rss_mb(pid)))

        print("placectl map, exec to exit (Current, Status, Map over the socket; draw; write), %d runs at the fix"
              % args.runs)
        print("  output  p50 ms   p99 ms   file kB")
        for suffix in ("svg", "png"):
            output = directory / ("map." + suffix)
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                out = subprocess.run([args.placectl, "--socket", placed.socket, "map", "--output", output],
                                     capture_output=True, text=True)
                times.append(time.perf_counter() - start)
                assert out.returncode == 0, out.stderr
            print("  %-6s %7.1f  %7.1f   %7.0f" % (suffix.upper(), percentile(times, 50) * 1000,
                                                   percentile(times, 99) * 1000, output.stat().st_size / 1000))
    finally:
        placed.stop()
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
