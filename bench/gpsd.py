#!/usr/bin/env python3
"""Benchmark placed's gpsd path against gpspipe on the same gpsd, in one run (issue 3).

1. Fix-to-move latency: gpsd (gpsfake replaying the Helsinki drive) feeds `gpspipe -w -uu` and
   placed (--distance-filter 0, so every fix is a move) at once. For each fix, the time placed logs
   the move minus the time gpspipe printed the same TPV: both are stamped with the wall clock in
   microseconds. gpspipe does nothing but read and print, so it stands for "the TPV leaving gpsd".
2. Idle cost: with gpsd connected and silent, syscalls made by placed over 10 s (strace -c), beside
   gpspipe's over the same 10 s.

Usage: bench/gpsd.py [--placed PATH]   (default: the release build)
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import GpsFake, Placed, bin_path, free_port, percentile, rss_mb  # noqa: E402
import nmea  # noqa: E402


class GpsPipe:
    def __init__(self, port):
        self.lines = []
        self.proc = subprocess.Popen(["gpspipe", "-w", "-uu", "localhost:%d" % port],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def tpv_times(self):
        """(lat, lon) rounded to 1e-7 → when gpspipe printed the first TPV of each fix there, in order:
        a stop repeats a position, and each of its fixes is its own move."""
        out, seen_times = {}, set()
        for line in self.lines:
            stamp, _, body = line.partition(": ")
            if '"class":"TPV"' not in body:
                continue
            tpv = json.loads(body)
            if tpv.get("mode", 0) < 2 or "lat" not in tpv or tpv.get("time") in seen_times:
                continue
            seen_times.add(tpv.get("time"))
            out.setdefault((round(tpv["lat"], 7), round(tpv["lon"], 7)), []).append(float(stamp.split()[-1]))
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait(5)


def strace_calls(pid, seconds):
    out = subprocess.run(["timeout", "-s", "INT", str(seconds), "strace", "-c", "-f", "-p", str(pid)],
                         capture_output=True, text=True).stderr
    total = re.search(r"^100\.00\s+\S+\s+\S+\s+(\d+)\s+(\d+)?\s*total", out, re.M)
    calls = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", out, re.M)}
    return (int(total.group(1)) if total else 0), calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--placed", default=str(bin_path("release", "placed")))
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="placed-gpsd-bench-"))
    subprocess.run([str(pathlib.Path(args.placed).parent / "placectl"), "import",
                    str(ROOT / "data" / "helsinki-center.osm.pbf"), "--db", str(work / "places.db")],
                   check=True, capture_output=True)
    files = ["--db", work / "places.db", "--socket", work / "sock"]

    drive = ROOT / "data" / "helsinki-drive.nmea"
    port = free_port()
    gps = GpsFake(drive, port)
    pipe = GpsPipe(port)
    placed = Placed(args.placed, "--bus", "none", *files, "--gpsd", "localhost:%d" % port, "--distance-filter", "0",
                    "--gpsd-timeout", "2", env={"PLACED_LOG_TIMESTAMPS": "1"})
    try:
        placed.wait_for(r"no data from gpsd", timeout=180)
    finally:
        gps.stop()
        pipe.stop()
        placed.stop()
    reference = pipe.tpv_times()
    move = re.compile(r"^(\d+\.\d+) placed: move \d+ at (-?[\d.]+),(-?[\d.]+)")
    deltas = []
    for line in placed.lines:
        m = move.search(line)
        if m:
            key = (round(float(m.group(2)), 7), round(float(m.group(3)), 7))
            if reference.get(key):
                deltas.append((float(m.group(1)) - reference[key].pop(0)) * 1000)
    expected = len(nmea.fixes(drive))
    print("gpsd fix-to-move latency (Helsinki drive, %d fixes, every fix a move)" % expected)
    print("  matched moves            %d of %d" % (len(deltas), expected))
    if deltas:
        print("  placed - gpspipe  p50    %.3f ms" % percentile(deltas, 50))
        print("  placed - gpspipe  p99    %.3f ms" % percentile(deltas, 99))
        print("  placed - gpspipe  mean   %.3f ms" % statistics.mean(deltas))
        print("  placed - gpspipe  max    %.3f ms" % max(deltas))
        print("  goal                     p50 within 1 ms of gpspipe: %s"
              % ("met" if percentile(deltas, 50) <= 1.0 else "MISSED"))

    # Idle: gpsd connected and silent after a short replay.
    port = free_port()
    short = ROOT / "data" / "helsinki-drive.nmea"
    lines = open(short, "rb").readlines()[:160]  # preamble and a few fixes
    tmp = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / ("placed-idle-%d.nmea" % os.getpid())
    tmp.write_bytes(b"".join(lines))
    gps = GpsFake(tmp, port)
    pipe = GpsPipe(port)
    placed = Placed(args.placed, "--bus", "none", *files, "--gpsd", "localhost:%d" % port)
    try:
        placed.wait_for(r"move 1 at", timeout=60)
        time.sleep(6)  # the replay ends; gpsd stays connected with nothing to say
        results = {}
        threads = [threading.Thread(target=lambda n, p: results.__setitem__(n, strace_calls(p, 10)), args=(n, p))
                   for n, p in (("placed", placed.proc.pid), ("gpspipe", pipe.proc.pid))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("idle cost, gpsd connected and silent, 10 s")
        for name in ("placed", "gpspipe"):
            total, calls = results[name]
            print("  %-8s syscalls %d %s" % (name, total, calls if calls else ""))
        print("  placed RSS               %.1f MB (Helsinki places loaded)" % rss_mb(placed.proc.pid))
        print("  goal                     no syscalls beyond watchdog pings: %s"
              % ("met" if results["placed"][0] == 0 else "MISSED"))
    finally:
        gps.stop()
        pipe.stop()
        placed.stop()
        tmp.unlink()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
