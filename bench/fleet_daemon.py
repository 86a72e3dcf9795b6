#!/usr/bin/env python3
"""Benchmark the fleet export in the daemon (issue 16): what it costs placed, side by side in one run.

1. Fix-to-move latency with fleet export off, on (connected to a mosquitto on loopback) and on during an
   outage (its broker down: every event goes to the outbox): placed (--distance-filter 0, so every
   fix is a move and ranks), each with gpspipe on a gpsd replaying the Helsinki drive, in turn, twice.
   For each fix, the time placed logs the move minus the time gpspipe printed the TPV (wall clock,
   microseconds), as bench/gpsd.py measures it: p50, p95, p99; and placed's CPU time over the drive.
2. Idle at a static position (nothing comes or goes but the broker's keepalive), Helsinki loaded: RSS of
   placed with fleet export off and on (connected), and the system calls and wake-ups (epoll_wait
   returns) of each over 30 s with KeepAlive=10 (strace -c -f): the export should wake for the keepalive
   only.

Usage: bench/fleet_daemon.py [--placed PATH] [--idle SECONDS] [--keepalive SECONDS] [--rounds N] [--fixes N]
       (default: the release build, 2 rounds of the whole drive; --fixes: its first N fixes only, for a quick run)
"""
import argparse
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
from fleet import FleetPlaced, Mosquitto, wait_until  # noqa: E402
from gpsd import GpsPipe, strace_calls  # noqa: E402
from harness import HELSINKI_CENTER, GpsFake, bin_path, free_port, percentile, rss_mb  # noqa: E402
import nmea  # noqa: E402

MOVE = re.compile(r"^(\d+\.\d+) placed: move \d+ at (-?[\d.]+),(-?[\d.]+)")


def deltas(placed, reference):
    """Milliseconds from gpspipe's TPV to placed's move, per fix both saw."""
    pending = {key: list(times) for key, times in reference.items()}
    found = []
    for line in placed.lines:
        m = MOVE.search(line)
        if m:
            key = (round(float(m.group(2)), 7), round(float(m.group(3)), 7))
            if pending.get(key):
                found.append((float(m.group(1)) - pending[key].pop(0)) * 1000)
    return found


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine():
    """The cores, the CPU model and the load average: on a shared machine the figures depend on them."""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 "?")
    return "%d cores (nproc), %s, load average %s" % (len(os.sched_getaffinity(0)), model,
                                                       " ".join(open("/proc/loadavg").read().split()[:3]))


def shortened(drive, count, path):
    """The drive up to its `count`th fix (the no-fix epochs before the first kept), written to `path`."""
    last = nmea.fixes(drive)[count - 1][0]
    kept = []
    for line in open(drive, encoding="ascii"):
        fields = line.split(",")
        if line.startswith("$") and fields[0][3:] in ("RMC", "GGA") and fields[1] > last:
            break
        kept.append(line)
    pathlib.Path(path).write_text("".join(kept))
    return pathlib.Path(path)


def start(binary, work, name, fleet, *arguments, static=None):
    directory = work / name
    directory.mkdir(exist_ok=True)
    if not (directory / "places.db").exists():
        shutil.copy(work / "places.db", directory / "places.db")
    return FleetPlaced(binary, directory, fleet, *arguments, static=static, env={"PLACED_LOG_TIMESTAMPS": "1"})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--placed", default=str(bin_path("release", "placed")))
    parser.add_argument("--idle", type=int, default=30)
    parser.add_argument("--keepalive", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fixes", type=int, default=0)
    args = parser.parse_args()
    print("machine: %s" % machine(), flush=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="placed-fleet-bench-"))
    subprocess.run([str(pathlib.Path(args.placed).parent / "placectl"), "import",
                    str(ROOT / "data" / "helsinki-center.osm.pbf"), "--db", str(work / "places.db")],
                   check=True, capture_output=True)
    broker = Mosquitto(work / "broker")
    dead = free_port()  # nothing listens: the outage
    configs = {
        "off": {},
        "on": {"Broker": broker.url, "DeviceId": "bench-on", "KeepAlive": args.keepalive},
        "outage": {"Broker": "mqtt://127.0.0.1:%d" % dead, "DeviceId": "bench-outage", "KeepAlive": args.keepalive},
    }
    drive = ROOT / "data" / "helsinki-drive.nmea"
    if args.fixes:
        drive = shortened(drive, args.fixes, work / "drive.nmea")
    results = {name: [] for name in configs}
    cpu = {name: 0.0 for name in configs}
    backlog = {}
    try:
        # One placed per replay, beside gpspipe: several placed on one gpsd race each other for the two
        # cores, and the lightest always wins. The configurations take turns, twice.
        for round_ in range(args.rounds):
            for name in ("off", "on", "outage"):
                port = free_port()
                gps = GpsFake(drive, port)
                pipe = GpsPipe(port)
                placed = None
                try:
                    placed = start(args.placed, work, "%s-%d" % (name, round_), configs[name], "--gpsd",
                                   "localhost:%d" % port, "--distance-filter", "0", "--gpsd-timeout", "2")
                    placed.wait_for(r"move 1 at", timeout=60)
                    before = cpu_seconds(placed.proc.pid)
                    placed.wait_for(r"no data from gpsd", timeout=240)
                    cpu[name] += cpu_seconds(placed.proc.pid) - before
                    if name != "off":
                        backlog[name] = placed.fleet()
                finally:
                    gps.stop()
                    pipe.stop()
                    if placed:
                        placed.stop()
                found = deltas(placed, pipe.tpv_times())
                results[name] += found
                print("  round %d %-7s p50 %.3f ms (%d moves)" % (round_ + 1, name, percentile(found, 50), len(found)),
                      flush=True)
        expected = len(nmea.fixes(drive))
        print("fix-to-move latency, placed - gpspipe (Helsinki drive, %d fixes, every fix a move, %d round(s))"
              % (expected, args.rounds))
        print("  %-26s %8s %9s %9s %9s %9s %9s" % ("fleet export", "moves", "p50 ms", "p95 ms", "p99 ms", "mean ms",
                                                   "CPU s"))
        for name, label in (("off", "off"), ("on", "on, connected"), ("outage", "on, broker down (outage)")):
            values = results[name]
            print("  %-26s %8d %9.3f %9.3f %9.3f %9.3f %9.2f" % (
                label, len(values), percentile(values, 50), percentile(values, 95), percentile(values, 99),
                statistics.mean(values), cpu[name]))
        off = percentile(results["off"], 50)
        for name in ("on", "outage"):
            difference = percentile(results[name], 50) - off
            print("  p50 %-7s - off          %+.3f ms   goal: within 0.1 ms: %s"
                  % (name, difference, "met" if abs(difference) <= 0.1 else "MISSED"))
        print("  exported during the drive: on %s, outage %s" % (
            "backlog %d, acknowledged %d" % (backlog["on"]["backlog"], backlog["on"]["acknowledged"]),
            "backlog %d (state %s)" % (backlog["outage"]["backlog"], backlog["outage"]["state"])))

        # Idle: a static position (no gpsd to come and go), Helsinki loaded, the broker connected.
        idle = {}
        try:
            for name in ("off", "on"):
                idle[name] = start(args.placed, work, "idle-" + name, configs[name], static=HELSINKI_CENTER)
            for placed in idle.values():
                placed.wait_for(r"ranking 1:", timeout=60)
            idle["on"].wait_fleet(lambda f: f.get("state") == "connected" and f.get("backlog") == 0, 30, "connected")
            time.sleep(3)
            rss = {name: rss_mb(placed.proc.pid) for name, placed in idle.items()}
            calls = {}
            threads = [threading.Thread(target=lambda n, p: calls.__setitem__(n, strace_calls(p, args.idle)),
                                        args=(name, placed.proc.pid)) for name, placed in idle.items()]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            for placed in idle.values():
                placed.stop()
        print("idle at a static position, Helsinki loaded, KeepAlive=%d, %d s" % (args.keepalive, args.idle))
        for name in ("off", "on"):
            total, per_call = calls[name]
            print("  fleet %-4s RSS %5.1f MB  syscalls %4d  epoll_wait %3d  %s" % (
                name, rss[name], total, per_call.get("epoll_wait", 0), per_call))
        print("  placed RSS, fleet export on   %.1f MB   goal: <= 14 MB: %s" % (rss["on"], "met" if rss["on"] <= 14 else "MISSED"))
        intervals = args.idle / args.keepalive
        wakeups = calls["on"][1].get("epoll_wait", 0)
        print("  idle wake-ups, fleet on       %d in %d s, %.1f per keepalive interval   goal: keepalive only "
              "(<= 2 per interval): %s" % (wakeups, args.idle, wakeups / intervals,
                                           "met" if wakeups / intervals <= 2 else "MISSED"))
        print("machine at the end: %s" % machine())
    finally:
        broker.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
