#!/usr/bin/env python3
"""Daemon start-up: placed from exec to READY=1 (places loaded, socket listening), then to the first
ranking a client reads (varlink Current with generation 1: candidates read from the file, ranked),
and its RSS then; on the Helsinki extract and on 1 M synthetic places (a third of them areas), with
the page cache warm and cold. Each run is a fresh placed with a static location and no D-Bus. "CPU to
READY" is the time placed ran on a CPU until READY=1 (/proc/PID/schedstat): on a shared machine the
wall-clock figures include waiting for a core, this one hardly does. "Disk reads" are the page faults
that had to read the disk (/proc/PID/stat majflt) until the first ranking was read: with the cache
cold, the places file's pages placed waited for one at a time.

`placed-bench load` times PlaceDatabase open + load alone; this is the whole daemon around it.

With --placed BINARY (repeatable) it times those binaries instead of this checkout's release build,
in alternating rounds (--rounds), each round every binary in turn, so two builds share the machine's
load: e.g. `--placed /tmp/main/placed --placed .build/release/placed --rounds 3`.

Usage: bench/startup.py [--runs N] [--placed BINARY ...] [--rounds N] [--helsinki-only]
"""
import argparse
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import PLACES, VarlinkSocket, bin_path, rss_mb  # noqa: E402

HELSINKI = ROOT / "data" / "helsinki-center.osm.pbf"


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def first_ranking(path):
    """Calls Current until a ranking is out; its generation."""
    client = VarlinkSocket(path)
    while (generation := client.call(PLACES + ".Current").get("generation", 0)) < 1:
        pass
    return generation


def start_once(placed, database, work):
    """Seconds from spawn to READY=1 and to the first ranking read, VmRSS then in MB, the seconds
    placed ran on a CPU until READY=1, and its major page faults (disk reads) until the first ranking."""
    notify_path = work / "notify"
    if notify_path.exists():
        notify_path.unlink()
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.settimeout(0.1)
    log = open(work / "placed.log", "w+")
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(placed), "--bus", "none", "--static", "60.1699,24.9384,10", "--db", str(database),
         "--selections", str(work / "selections.db"), "--socket", str(work / "sock")],
        env={**os.environ, "NOTIFY_SOCKET": str(notify_path)}, stderr=log)
    try:
        while True:
            try:
                if "READY=1" in notify.recv(4096).decode():
                    break
            except socket.timeout:
                if proc.poll() is not None:
                    log.seek(0)
                    sys.exit("bench/startup.py: placed exited with %d: %s" % (proc.returncode, log.read()))
        ready = time.monotonic() - started
        cpu = on_cpu_seconds(proc.pid)
        first_ranking(work / "sock")
        ranked = time.monotonic() - started
        rss = rss_mb(proc.pid)
        disk_reads = major_faults(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        notify.close()
        log.close()
    return ready, ranked, rss, cpu, disk_reads


def on_cpu_seconds(pid):
    """The time a process has run on a CPU so far (/proc/PID/schedstat, ns): unlike the wall-clock
    figures, what other processes on the machine do hardly changes it."""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0]) / 1e9


def major_faults(pid):
    """Page faults that had to read the disk so far (/proc/PID/stat majflt)."""
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[9])


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--placed", action="append", help="a placed binary to time (repeatable)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--helsinki-only", action="store_true", help="leave out the 1 M synthetic places")
    args = parser.parse_args()
    runs = args.runs
    placectl, bench = (bin_path("release", n) for n in ("placectl", "placed-bench"))
    binaries = [pathlib.Path(p).resolve() for p in args.placed] if args.placed else [bin_path("release", "placed")]
    with tempfile.TemporaryDirectory(prefix="placed-startup-") as tmp:
        work = pathlib.Path(tmp)
        helsinki = work / "helsinki.db"
        subprocess.run([placectl, "import", HELSINKI, "--db", helsinki], check=True, stdout=subprocess.DEVNULL)
        databases = [("Helsinki 1,644", helsinki)]
        if not args.helsinki_only:
            million = work / "million.db"
            subprocess.run([bench, "load", "--places", "1000000", "--database", million, "--keep"], check=True,
                           stdout=subprocess.DEVNULL)
            databases.append(("synthetic 1,000,000", million))
        print("startup: placed from exec to READY=1 and to the first ranking read, median of %d fresh runs" % runs)
        print("database              cache   ready ms  ranked ms   RSS MB  CPU to READY ms  disk reads  load"
              "         binary")
        for round_number in range(args.rounds):
            for placed in binaries:
                for label, database in databases:
                    for cache in ("warm", "cold"):
                        results = []
                        for _ in range(runs):
                            if cache == "cold":
                                evict(database)
                            else:
                                start_once(placed, database, work)  # warm the cache
                            results.append(start_once(placed, database, work))
                        ready = statistics.median(r[0] for r in results) * 1000
                        ranked = statistics.median(r[1] for r in results) * 1000
                        rss = statistics.median(r[2] for r in results)
                        cpu = statistics.median(r[3] for r in results) * 1000
                        reads = statistics.median(r[4] for r in results)
                        print("%-21s %-7s %8.1f %10.1f %8.1f  %15.2f  %10.0f  %-12s %s" % (
                            label, cache, ready, ranked, rss, cpu, reads, load_average(), placed))


if __name__ == "__main__":
    main()
