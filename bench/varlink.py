#!/usr/bin/env python3
"""Benchmark placed's varlink interface, io.placed.Places (issue 6).

1. Current round trips per second, default list (5 places, ~1.6 kB reply), with 1 and with 100
   concurrent clients. Clients are raw NUL-framed JSON sockets driven by one epoll loop in Python,
   each with one call outstanding; the daemon's CPU time per call is printed beside the rate, so a
   client-bound figure shows as the daemon idling.
2. Move-to-watchers latency: 1,000 raw-socket watchers (Watch with `more`) spread over reader
   processes; each round a Refresh makes a new ranking (a move without GPS). Latency = when a
   watcher has read the whole new-generation message minus when the Refresh call was sent, both on
   CLOCK_MONOTONIC. Per round, "last watcher" is when the slowest of the 1,000 had it.

Usage: bench/varlink.py [--placed PATH] [--placectl PATH] [--watchers 1000] [--rounds 20] [--seconds 3]
"""
import argparse
import json
import multiprocessing
import os
import pathlib
import resource
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import HELSINKI_CENTER, PLACES, PlacedService, VarlinkSocket, bin_path, percentile, rss_mb  # noqa: E402

CURRENT = json.dumps({"method": PLACES + ".Current"}).encode() + b"\0"
REFRESH = json.dumps({"method": PLACES + ".Refresh"}).encode() + b"\0"
WATCH = json.dumps({"method": PLACES + ".Watch", "more": True}).encode() + b"\0"


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def current_rate(path, clients, seconds, pid):
    """Replies per second with `clients` connections, each keeping one Current call in flight."""
    socks = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(clients)]
    for s in socks:
        s.connect(str(path))
        s.setblocking(False)
    poller = select.epoll()
    by_fd = {s.fileno(): s for s in socks}
    buffers = {fd: b"" for fd in by_fd}
    for fd, s in by_fd.items():
        poller.register(fd, select.EPOLLIN)
        s.send(CURRENT)
    replies, cpu0, start = 0, cpu_seconds(pid), time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        for fd, _ in poller.poll(1):
            data = by_fd[fd].recv(65536)
            assert data, "the daemon closed a benchmark client"
            buffers[fd] += data
            while b"\0" in buffers[fd]:
                _, buffers[fd] = buffers[fd].split(b"\0", 1)
                replies += 1
                by_fd[fd].send(CURRENT)
    elapsed, cpu = time.monotonic() - start, cpu_seconds(pid) - cpu0
    for s in socks:
        s.close()
    return replies / elapsed, cpu / max(replies, 1), cpu / elapsed


def reader(path, count, ready, results):
    """One process holding `count` watchers: records when each has read each generation."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(path))
        s.sendall(WATCH)
        socks.append(s)
    for s in socks:  # the first reply: the current state
        data = b""
        while b"\0" not in data:
            data += s.recv(65536)
        s.setblocking(False)
    poller = select.epoll()
    by_fd = {s.fileno(): s for s in socks}
    buffers = {fd: b"" for fd in by_fd}
    for fd in by_fd:
        poller.register(fd, select.EPOLLIN)
    seen = {}  # generation -> [monotonic time a watcher had it]
    ready.send("ready")
    while not ready.poll():
        for fd, _ in poller.poll(0.05):
            data = by_fd[fd].recv(65536)
            if not data:
                raise SystemExit("a watcher was dropped")
            now = time.monotonic()
            buffers[fd] += data
            while b"\0" in buffers[fd]:
                message, buffers[fd] = buffers[fd].split(b"\0", 1)
                at = message.find(b'"generation":')
                generation = int(message[at + 13:message.index(b",", at)])
                seen.setdefault(generation, []).append(now)
    results.send(seen)


def watcher_latency(path, watchers, rounds, processes):
    share = [watchers // processes + (i < watchers % processes) for i in range(processes)]
    controls, outputs, procs = [], [], []
    for count in share:
        control, child_control = multiprocessing.Pipe()
        output, child_output = multiprocessing.Pipe()
        proc = multiprocessing.Process(target=reader, args=(path, count, child_control, child_output))
        proc.start()
        controls.append(control)
        outputs.append(output)
        procs.append(proc)
    for control in controls:
        assert control.recv() == "ready"
    sent, replied = {}, []
    with VarlinkSocket(path) as trigger:
        generation = trigger.call(PLACES + ".Current")["generation"]
        for _ in range(rounds):
            time.sleep(0.1)  # let the readers go idle: each round starts from a quiet system
            generation += 1
            sent[generation] = time.monotonic()
            trigger.send_raw(REFRESH)
            trigger.reply()
            replied.append((time.monotonic() - sent[generation]) * 1000)
        time.sleep(0.5)
    for control in controls:
        control.send("stop")
    seen = {}
    for output in outputs:
        for gen, times in output.recv().items():
            seen.setdefault(gen, []).extend(times)
    for proc in procs:
        proc.join()
    per_watcher, last_watcher, complete = [], [], 0
    for gen, start in sent.items():
        times = [(t - start) * 1000 for t in seen.get(gen, [])]
        complete += len(times) == watchers
        per_watcher += times
        if times:
            last_watcher.append(max(times))
    return per_watcher, last_watcher, complete, replied


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--placed", default=str(bin_path("release", "placed")))
    parser.add_argument("--placectl", default=str(bin_path("release", "placectl")))
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--reader-processes", type=int, default=4)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))

    directory = pathlib.Path(tempfile.mkdtemp(prefix="placed-bench-"))
    extract = ROOT / "data" / "helsinki-center.osm.pbf"
    subprocess.run([args.placectl, "import", extract, "--db", directory / "places.db"], check=True,
                   capture_output=True)
    placed = PlacedService(args.placed, directory, static=HELSINKI_CENTER)
    try:
        placed.wait_ready()
        pid = placed.proc.pid
        print("varlink Current round trips (raw sockets, one Python epoll client process, %g s each)"
              % args.seconds)
        for clients in (1, 100):
            rate, cpu_per_call, busy = current_rate(placed.socket, clients, args.seconds, pid)
            print("  %3d client%s  %8.0f calls/s   daemon %5.1f µs CPU per call, %3.0f %% busy"
                  % (clients, " " if clients == 1 else "s", rate, cpu_per_call * 1e6, busy * 100))
        per_watcher, last_watcher, complete, replied = watcher_latency(
            placed.socket, args.watchers, args.rounds, args.reader_processes)
        print("Refresh → %d raw-socket watchers (%d rounds, %d reader processes)"
              % (args.watchers, args.rounds, args.reader_processes))
        print("  rounds every watcher got      %d of %d" % (complete, args.rounds))
        print("  per watcher    p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms"
              % (percentile(per_watcher, 50), percentile(per_watcher, 99), max(per_watcher)))
        print("  last watcher   p50 %6.2f ms  max %6.2f ms   (per round, the slowest of all)"
              % (percentile(last_watcher, 50), max(last_watcher)))
        print("  Refresh reply  p50 %6.2f ms  (sent after the broadcast is queued)" % percentile(replied, 50))
        print("  goal: all watchers within 10 ms at p50: %s"
              % ("met" if percentile(last_watcher, 50) <= 10 else "MISSED"))
        print("  daemon RSS %.1f MB" % rss_mb(pid))
    finally:
        placed.stop()
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
