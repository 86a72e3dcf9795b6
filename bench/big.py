#!/usr/bin/env python3
"""Continental scale (issue 19): synthetic extracts of a city centre's and of the countryside's place
density at 10 M and 30 M places (about 100 M and 300 M nodes), kept in $PLACED_BENCH_DATA
(default .build/bench-data, which git ignores), and what placed does with them:

  import   placectl import --no-map: time and peak RSS beside osmium export (and osmium tags-filter,
           then export) of the same file, in the same run; with --map, the import with the map layer
           (placectl's default), and with --import-baseline also the map layer's R*Tree searched in
           both files (p50 of the daemon's box query at 150, 500 and 1000 m, same centres, in turns)
  daemon   placed exec to the first ranking a client reads (median of 3 cold starts: the file's pages
           out of the page cache first, as an import leaves them), RSS after start, RSS after a 500 km
           drive and its peak (a Rank every 50 m of route(), ranked through the catalog the daemon moves
           with: east along the grid where it is wider than 500 km, the countryside's; a serpentine of
           driven lanes over the whole grid where it is narrower, a city's 99 or 172 km; no jumps)
  index    placed-bench index on the file: within-250 m and ranking p50, cold and warm, beside SQLite's
           R*Tree on the same points
  rank     Rank round trip from a compiled client (bench/rank-client.c) over 1 M places at city density
           beside PostGIS KNN top-20 through pgbench on the same places, and strace's count per call;
           beside the floor (bench/rank-floor.c: a server that answers with a fixed reply of the same
           size) and, with --rank-baseline BINARY, another placed build, all measured in turns

The files are large (a 30 M extract is about 2 GB, its places file about 6 GB) and take minutes to make:
without --build, a missing one is skipped and named. Figures carry the load average (uptime).

Usage: bench/big.py [--build] [--sizes 10M,30M] [--shapes city,countryside] [--parts import,daemon,index,rank]
                    [--no-references] [--no-tags-filter] [--import-baseline PLACECTL] [--rounds N] [--map]
                    [--rank-baseline PLACED]
"""
import argparse
import ctypes
import json
import math
import mmap
import os
import pathlib
import random
import shutil
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import PLACES, VarlinkSocket, bin_path, percentile  # noqa: E402

DATA = pathlib.Path(os.environ.get("PLACED_BENCH_DATA", ROOT / ".build" / "bench-data"))
SIZES = {"1M": 1_000_000, "10M": 10_000_000, "30M": 30_000_000}
# Where each shape's grid starts (SyntheticExtractLayout) and its block size in metres.
ORIGIN = (48.0, 2.0)
BLOCK = {"city": 200.0, "countryside": 2000.0}
PLACES_PER_BLOCK = 40.5
KEYS = ["amenity", "shop", "tourism", "leisure", "office", "craft", "club", "emergency", "healthcare", "historic",
        "public_transport", "railway", "highway", "aeroway", "building"]


def load():
    return "load %s" % " ".join(open("/proc/loadavg").read().split()[:3])


def memory(pid):
    """VmRSS, RssAnon, RssFile of a process, MB."""
    fields = status(pid)
    return fields["VmRSS"], fields["RssAnon"], fields["RssFile"]


def status(pid):
    """/proc/PID/status's memory fields (VmRSS, VmHWM: the peak RSS, RssAnon, RssFile), MB."""
    fields = {}
    for line in open("/proc/%d/status" % pid):
        key, _, value = line.partition(":")
        if key.startswith(("Vm", "Rss")):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def timed(argv, stdout=subprocess.DEVNULL):
    """Seconds and peak RSS (MB) of one program run."""
    elapsed, rss, _, _ = timed_cpu(argv, stdout)
    return elapsed, rss


def timed_cpu(argv, stdout=subprocess.DEVNULL):
    """Seconds, peak RSS (MB), user and system CPU seconds of one program run."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - started
    errors = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("bench/big.py: %s failed (%d): %s" % (" ".join(map(str, argv)), proc.returncode, errors[-2000:]))
    return elapsed, usage.ru_maxrss / 1024, usage.ru_utime, usage.ru_stime


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


PACK_SECTIONS = ["index", "area", "reach", "kind", "recordStarts", "records", "kinds", "areas"]


def pack_regions(path):
    """(name, offset, length) of the places file's SQLite part and of the pack's header and sections
    (PlacePack's layout: a trailer finds the pack, whose header lists the sections)."""
    with open(path, "rb") as f:
        f.seek(-32, 2)
        trailer = f.read(32)
        if trailer[:8] != b"PLACEEND":
            return [("file", 0, os.path.getsize(path))]
        pack, _ = struct.unpack("<QQ", trailer[8:24])
        f.seek(pack)
        header = f.read(4096)
    regions = [("sqlite", 0, pack), ("header", pack, 4096)]
    for i in range(struct.unpack("<I", header[40:44])[0]):
        offset, length = struct.unpack("<QQ", header[48 + 16 * i:64 + 16 * i])
        regions.append((PACK_SECTIONS[i] if i < len(PACK_SECTIONS) else "section %d" % i, pack + offset, length))
    return regions


def cached_pages(path):
    """Pages of `path` in the page cache (mincore over a mapping of it), per region of the file: after the
    file was evicted, the pages a start read."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    os.close(fd)
    vector = ctypes.create_string_buffer((size + 4095) // 4096)
    failed = libc.mincore(address, size, vector)
    libc.munmap(address, size)
    if failed:
        return []
    pages = vector.raw
    return [(name, sum(b & 1 for b in pages[start // 4096:(start + length + 4095) // 4096]))
            for name, start, length in pack_regions(path)]


def free_gb():
    return shutil.disk_usage(DATA).free / 1e9


def extract(shape, size, build, bench):
    path = DATA / ("%s-%s.osm.pbf" % (shape, size))
    if path.exists():
        return path
    if not build:
        print("(%s: not built; bench/big.py --build makes it once, about %d GB)" % (path, SIZES[size] // 15_000_000 + 1))
        return None
    need = SIZES[size] / 1e6 * 0.35
    if free_gb() < need:
        sys.exit("bench/big.py: %.0f GB free in %s, %s needs about %.0f GB with its places file" % (
            free_gb(), DATA, path.name, need))
    print("building %s (once)..." % path, flush=True)
    subprocess.run([bench, "synthesize", "--shape", shape, "--places", str(SIZES[size]), "--out", str(path)],
                   check=True)
    return path


def import_part(files, placectl, references=True, baseline=None, rounds=1, tags_filter=True, with_map=False):
    """With `baseline` (another build's placectl), both import each file `rounds` times in turns (this build
    first in odd rounds, the baseline first in even ones), then the two places files are compared byte by
    byte (an import's date and pack id differ: about 60 bytes). `with_map`: the import with the map layer,
    into files of their own (removed after), the other parts' files untouched."""
    print("\nimport (%s), %d run(s) each, %s" % ("with the map layer" if with_map else "--no-map", rounds, load()))
    print("file                        placectl s  peak MB   osmium export s  peak MB   tags-filter+export s  peak MB"
          "   ratio (osmium/placectl)")
    for shape, size, pbf in files:
        kind = ".map" if with_map else ""
        db = DATA / ("%s-%s%s.db" % (shape, size, kind))
        base_db = DATA / ("%s-%s%s.baseline.db" % (shape, size, kind))
        runs = {"this": [], "baseline": []}
        for round_number in range(rounds):
            order = [("this", placectl, db)] + ([("baseline", baseline, base_db)] if baseline else [])
            if round_number % 2:
                order.reverse()
            for name, binary, target in order:
                started_load = load()
                elapsed, rss, user, system = timed_cpu(
                    [binary, "import", pbf, "--db", target] + ([] if with_map else ["--no-map"]))
                runs[name].append((elapsed, rss))
                print("  %-8s %-24s %7.1f s  %6.0f MB  user %6.1f s  sys %5.1f s  (%s at the start, %s at the end)"
                      % (name, pbf.name, elapsed, rss, user, system, started_load, load()), flush=True)
        ours, ours_rss = min(runs["this"])
        if baseline:
            theirs = min(runs["baseline"])[0]
            if with_map:
                # The builds' R*Trees may differ by design: the searches below compare them instead.
                difference = "not compared (the map layer)"
            else:
                compared = subprocess.run("cmp -l '%s' '%s' | wc -l" % (db, base_db), shell=True,
                                          capture_output=True, text=True)
                difference = "differ in %s bytes" % compared.stdout.strip()
            print("  best: this %.1f s, baseline %.1f s (%.2fx); the places files %s"
                  % (ours, theirs, theirs / ours, difference))
            if with_map:
                map_searches(db, base_db)
            base_db.unlink()
        if not references:
            print("%-26s %10.1f   (osmium not run: --no-references)  (%s)" % (pbf.name, ours, load()), flush=True)
            print("  places file %s: %.0f MB" % (db.name, db.stat().st_size / 1e6))
            continue
        exported, exported_rss = timed(["sh", "-c", 'osmium export "$0" -f geojsonseq -o - > /dev/null', pbf])
        t1 = t2 = r1 = r2 = float("nan")
        if tags_filter:
            filtered = DATA / "filtered.osm.pbf"
            t1, r1 = timed(["osmium", "tags-filter", pbf, *["nwr/" + k for k in KEYS], "-o", filtered, "--overwrite"])
            t2, r2 = timed(["sh", "-c", 'osmium export "$0" -f geojsonseq -o - > /dev/null', filtered])
            filtered.unlink()
        print("%-26s %10.1f %8.0f %17.1f %8.0f %22.1f %8.0f   %.2fx / %.2fx  (%s)" % (
            pbf.name, ours, ours_rss, exported, exported_rss, t1 + t2, max(r1, r2), exported / ours,
            (t1 + t2) / ours, load()), flush=True)
        if baseline:
            print("  baseline: %.2fx osmium export" % (exported / theirs))
        print("  places file %s: %.0f MB" % (db.name, db.stat().st_size / 1e6))
        if with_map:
            db.unlink()


def map_searches(db, base_db, queries=2000):
    """The daemon's map query (PlaceDatabase.features: the R*Tree's boxes overlapping a square around the
    centre) on this build's file and the baseline's, at the same random centres, three rounds in turns."""
    files = [("this", db), ("baseline", base_db)]
    connections = {name: sqlite3.connect("file:%s?mode=ro" % path, uri=True) for name, path in files}
    query = ("SELECT id, min_lat, max_lat, min_lon, max_lon FROM map_bounds"
             " WHERE max_lat >= ? AND min_lat <= ? AND max_lon >= ? AND min_lon <= ?")
    first = connections["this"]
    south, north, west, east = first.execute(
        "SELECT min(min_lat), max(max_lat), min(min_lon), max(max_lon) FROM map_bounds").fetchone()
    nodes = {name: c.execute("SELECT count(*) FROM map_bounds_node").fetchone()[0] for name, c in connections.items()}
    print("  map layer R*Tree: %s nodes (this), %s (baseline)" % (nodes["this"], nodes["baseline"]))
    randomness = random.Random(3)
    for radius in (150, 500, 1000):
        per_lat, per_lon = metres_per_degree((south + north) / 2e7)
        d_lat, d_lon = int(radius / per_lat * 1e7), int(radius / per_lon * 1e7)
        centres = [(randomness.randint(south + d_lat, north - d_lat), randomness.randint(west + d_lon, east - d_lon))
                   for _ in range(queries)]
        times = {"this": [], "baseline": []}
        found = {"this": 0, "baseline": 0}
        for round_number in range(3):
            for name, _ in (files if round_number % 2 == 0 else files[::-1]):
                connection = connections[name]
                for latitude, longitude in centres:
                    started = time.perf_counter()
                    rows = connection.execute(query, (latitude - d_lat, latitude + d_lat, longitude - d_lon,
                                                      longitude + d_lon)).fetchall()
                    times[name].append(time.perf_counter() - started)
                    found[name] += len(rows)
        print("  map search %4d m: p50 this %.1f us, baseline %.1f us (%.2fx); boxes found %s / %s" % (
            radius, statistics.median(times["this"]) * 1e6, statistics.median(times["baseline"]) * 1e6,
            statistics.median(times["baseline"]) / statistics.median(times["this"]), found["this"],
            found["baseline"]), flush=True)


def metres_per_degree(latitude):
    """WGS84 metres per degree of latitude and of longitude at `latitude`, as LocalProjection has them."""
    f = 1 / 298.257223563
    e2 = f * (2 - f)
    phi = math.radians(latitude)
    w = math.sqrt(1 - e2 * math.sin(phi) ** 2)
    return 6378137.0 * (1 - e2) / w ** 3 * math.pi / 180, 6378137.0 / w * math.cos(phi) * math.pi / 180


def grid(shape, size):
    """The synthetic grid's box (south, west, north, east), as SyntheticExtractLayout lays it out."""
    blocks = math.ceil(SIZES[size] / PLACES_PER_BLOCK)
    side_m = math.ceil(math.sqrt(blocks)) * BLOCK[shape]
    lat0, lon0 = ORIGIN
    per_lat, per_lon = metres_per_degree(lat0 + side_m / 2 / 111_000)
    return lat0, lon0, lat0 + side_m / per_lat, lon0 + side_m / per_lon


def route(shape, size, metres=500_000.0, step=50.0):
    """A drive of `metres` across the grid, a point every `step` metres, the length measured as the daemon
    measures a step (LocalProjection at each point's latitude): east along the south of the grid, and
    where the grid is narrower than the drive, a serpentine of driven lanes (east, north, west, north...)
    spread over the whole grid, so that the drive never jumps and never passes the same place twice."""
    south, west, north, east = grid(shape, size)
    margin_lat, margin_lon = (north - south) * 0.05, (east - west) * 0.05
    south, west, north, east = south + margin_lat, west + margin_lon, north - margin_lat, east - margin_lon
    width = (east - west) * metres_per_degree((south + north) / 2)[1]
    height = (north - south) * metres_per_degree((south + north) / 2)[0]
    # n lanes of `width` and n - 1 climbs between them cover `metres` when n * width + height >= metres.
    lanes = max(2, math.ceil((metres - height) / width)) if width < metres else 1
    climb = height / (lanes - 1) if lanes > 1 else 0.0
    points, travelled = [(south, west)], 0.0
    lat, lon, heading, climbing, climbed = south, west, 1, False, 0.0
    while travelled < metres:
        per_lat, per_lon = metres_per_degree(lat)
        if not climbing:
            ahead = lon + heading * step / per_lon
            if west <= ahead <= east:
                lon = ahead
            else:
                climbing, climbed = True, 0.0
        if climbing:
            lat += step / per_lat
            climbed += step
            if climbed >= climb:
                climbing, heading = False, -heading
        travelled += step
        points.append((lat, lon))
    return points, ((south + north) / 2, (west + east) / 2)


def daemon_part(files, placed, rounds=3):
    print("\ndaemon: exec to the first ranking read (median of %d cold starts: the file evicted before each), RSS"
          " after start and after a 500 km drive, %s" % (rounds, load()))
    print("  drive: Rank (limit 5) every 50 m along route(), 10,000 calls with no jump, in the last start;"
          " peak = VmHWM over that run")
    print("file                    ready ms  ranked ms   RSS start MB (anon/file)   RSS drive MB (anon/file)"
          "   peak MB   drive Rank p50 us")
    for shape, size, _ in files:
        db = DATA / ("%s-%s.db" % (shape, size))
        if not db.exists():
            print("(%s: no places file; run the import part first)" % db)
            continue
        points, centre = route(shape, size)
        starts = []
        for round in range(rounds):
            drive = points if round == rounds - 1 else []
            starts.append(daemon_run(db, placed, centre, drive))
        ready, ranked, start_rss, drive_rss, peak, times, _ = starts[-1]
        ready_ms = sorted(r[0] for r in starts)[rounds // 2]
        ranked_ms = sorted(r[1] for r in starts)[rounds // 2]
        print("%-22s %9.1f %10.1f   %6.1f (%5.1f / %5.1f)       %6.1f (%5.1f / %5.1f)     %6.1f   %8.0f   (%d Rank"
              " calls; starts %s ms, %s disk reads (major faults) to the first ranking; %s)" % (
                  db.name, ready_ms, ranked_ms, *start_rss, *drive_rss, peak, percentile(times, 50), len(points),
                  " ".join("%.1f" % r[1] for r in starts), " ".join("%d" % r[6][0] for r in starts), load()), flush=True)
        print("  pages of the file read to the first ranking (mincore after each cold start): %s" % "; ".join(
            ", ".join("%s %d" % region for region in r[6][1] if region[1]) for r in starts), flush=True)


def daemon_run(db, placed, centre, drive):
    """One cold start of placed on `db` (its pages evicted first): ms to READY=1 and to the first ranking a
    client reads, RSS then, and after `drive` (a Rank at each point) RSS, peak RSS and the calls' times."""
    with tempfile.TemporaryDirectory(prefix="placed-big-") as tmp:
        work = pathlib.Path(tmp)
        # Dirty pages of an earlier import written back first: a cold start reads the disk, not behind
        # gigabytes of someone else's writeback (the first start after an import took 3x the others).
        os.sync()
        evict(db)
        notify_path = work / "notify"
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(notify_path))
        notify.settimeout(0.05)
        started = time.monotonic()
        proc = subprocess.Popen(
            [placed, "--bus", "none", "--static", "%.6f,%.6f,10" % centre, "--db", db,
             "--selections", work / "selections.db", "--socket", work / "sock", "--log-level", "warning"],
            env={**os.environ, "NOTIFY_SOCKET": str(notify_path)}, stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    if b"READY=1" in notify.recv(4096):
                        break
                except socket.timeout:
                    if proc.poll() is not None:
                        sys.exit("bench/big.py: placed exited with %d" % proc.returncode)
            ready = (time.monotonic() - started) * 1000
            client = VarlinkSocket(work / "sock")
            while client.call(PLACES + ".Current").get("generation", 0) < 1:
                pass
            ranked = (time.monotonic() - started) * 1000
            start_rss = memory(proc.pid)
            reads = major_faults(proc.pid), cached_pages(db)
            times = []
            for lat, lon in drive:
                t = time.monotonic()
                client.call(PLACES + ".Rank", latitude=lat, longitude=lon, limit=5)
                times.append((time.monotonic() - t) * 1e6)
            drive_rss = memory(proc.pid)
            peak = status(proc.pid)["VmHWM"]
            client.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            notify.close()
    return ready, ranked, start_rss, drive_rss, peak, times or [0.0], reads


def major_faults(pid):
    """Page faults of a process that had to read the disk (/proc/PID/stat majflt)."""
    return int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[9])


def index_part(files, bench):
    print("\nindex: within-250 m and ranking on the places file (mapped) beside SQLite R*Tree, %s" % load())
    for shape, size, _ in files:
        db = DATA / ("%s-%s.db" % (shape, size))
        if not db.exists():
            print("(%s: no places file; run the import part first)" % db)
            continue
        os.sync()  # as the daemon part: cold reads not queued behind an earlier import's writeback
        # The R*Tree (minutes to build at 10 M places) is kept beside the files, named by the places' pack id.
        out = subprocess.run([bench, "index", "--places-file", str(db), "--queries", "10000",
                              "--rtree-cache", str(DATA / "rtree-cache")], capture_output=True, text=True)
        print(out.stdout + out.stderr, end="", flush=True)


def rank_part(bench, placectl, placed, build, baseline=None):
    """Rank (limit 20) round trips over 1 M city places: the C client, then PostGIS through pgbench."""
    print("\nrank: Rank round trip over 1 M places at city density beside PostGIS KNN top-20, %s" % load())
    pbf = extract("city", "1M", build, bench)
    if pbf is None:
        return
    db = DATA / "city-1M.db"
    if not db.exists() or db.stat().st_mtime < pbf.stat().st_mtime:
        subprocess.run([placectl, "import", pbf, "--db", db, "--no-map"], check=True, stdout=subprocess.DEVNULL)
    client, floor = DATA / "rank-client", DATA / "rank-floor"
    subprocess.run(["cc", "-O2", "-o", client, ROOT / "bench" / "rank-client.c"], check=True)
    subprocess.run(["cc", "-O2", "-o", floor, ROOT / "bench" / "rank-floor.c"], check=True)
    blocks = int(SIZES["1M"] / PLACES_PER_BLOCK + 1)
    side = int(blocks ** 0.5 + 1) * BLOCK["city"]
    lat0, lon0 = ORIGIN
    lat1 = lat0 + side / 111_320
    import math
    lon1 = lon0 + side / (111_320 * math.cos(math.radians((lat0 + lat1) / 2)))
    rng = random.Random(19)
    positions = [(rng.uniform(lat0, lat1), rng.uniform(lon0, lon1)) for _ in range(20_000)]
    # The servers, each on its own socket, measured in turns (ROUNDS rounds of 20,000 calls after a
    # warm-up) so that the machine's drift between minutes falls on all of them alike; each row shows
    # its best round and all of them. The floor: the same client against a server that only reads each
    # request and writes a fixed reply of the size of placed's (4,958 bytes), blocking and from an epoll
    # loop. A baseline placed binary (--rank-baseline) runs beside for before/after figures.
    servers = [("floor blocking", None), ("floor epoll", None), ("placed", placed)]
    if baseline:
        servers.append(("placed baseline", baseline))
    results = {name: [] for name, _ in servers}
    syscalls = {}
    with tempfile.TemporaryDirectory(prefix="placed-rank-") as tmp:
        work = pathlib.Path(tmp)
        (work / "positions").write_text("".join("%.7f %.7f\n" % p for p in positions))
        procs = {}
        try:
            for number, (name, binary) in enumerate(servers):
                sock = work / ("sock%d" % number)
                if binary is None:
                    procs[name] = (subprocess.Popen([floor, name.split()[1], sock, "4958"], stdout=subprocess.DEVNULL), sock)
                else:
                    procs[name] = (subprocess.Popen(
                        [binary, "--bus", "none", "--static", "%.6f,%.6f,10" % positions[0], "--db", db,
                         "--selections", work / ("selections%d.db" % number), "--socket", sock, "--log-level",
                         "warning"], stderr=subprocess.DEVNULL), sock)
            for _ in range(200):
                if all(sock.exists() for _, sock in procs.values()):
                    break
                time.sleep(0.05)
            time.sleep(0.2)
            for name, (proc, sock) in procs.items():
                subprocess.run([client, sock, work / "positions", "20000"], check=True, capture_output=True)
            for _ in range(ROUNDS):
                for name, (proc, sock) in procs.items():
                    results[name].append(round_trips(client, sock, work / "positions", proc.pid))
            for name, (proc, sock) in procs.items():
                syscalls[name] = per_call_syscalls(proc.pid, [client, sock, work / "positions", "2000"], 2000,
                                                   work / "strace")
        finally:
            for proc, _ in procs.values():
                proc.terminate()
                proc.wait(timeout=30)
    for name, _ in servers:
        best = min(results[name], key=lambda r: r[0])
        rounds = "best of %d rounds; means %s us" % (ROUNDS, " / ".join("%.1f" % r[0] for r in results[name]))
        if name.startswith("floor"):
            print("%s (trivial C server, fixed 4,958-byte reply): %s; %s; system calls per call: %s" % (
                name, best[1], rounds, syscalls[name][0]))
        else:
            label = "placed Rank" if name == "placed" else "baseline placed Rank (%s)" % baseline
            print("%s (C client, 1 call in flight): %s; %s" % (label, best[1], rounds))
            print("strace -c over 2,000 %s calls, per call: %s (total %.2f)" % (
                "Rank" if name == "placed" else "baseline Rank", *syscalls[name]))
    postgis = postgis_knn(db, work_dir=DATA / "pg")
    if postgis:
        print("PostGIS KNN top-20 (pgbench, 1 client, Unix socket): %s" % postgis)
    print("rank part done, %s" % load())


ROUNDS = 3


def round_trips(client, sock, positions, server_pid, calls=20_000):
    """(mean µs, the client's figures) for `calls` round trips, with the server's CPU per call (on-CPU
    nanoseconds of all its threads, /proc/PID/task/*/schedstat) and the kernel's share of it (ticks)."""
    def cpu_ns():
        return sum(int(open(t / "schedstat").read().split()[0]) for t in pathlib.Path("/proc/%d/task" % server_pid).iterdir())

    def ticks():
        fields = open("/proc/%d/stat" % server_pid).read().rsplit(")", 1)[1].split()
        return int(fields[11]), int(fields[12])

    cpu0, (user0, system0) = cpu_ns(), ticks()
    out = subprocess.run([client, sock, positions, str(calls)], check=True, capture_output=True, text=True).stdout.strip()
    (user1, system1) = ticks()
    share = (system1 - system0) / max(1, user1 - user0 + system1 - system0)
    mean = float(out.split(" mean ")[1].split()[0])
    return mean, "%s, daemon CPU %.1f us per call (%.0f %% kernel)" % (out, (cpu_ns() - cpu0) / calls / 1e3, share * 100)


def per_call_syscalls(pid, client_argv, calls, trace):
    """strace -c of process `pid` while `client_argv` makes `calls` calls: ("name n, ...", total) per call."""
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", trace, "-p", str(pid)], stderr=subprocess.DEVNULL)
    time.sleep(1)
    subprocess.run(client_argv, check=True, capture_output=True)
    time.sleep(0.3)
    tracer.terminate()
    tracer.wait()
    counts = {}
    for line in pathlib.Path(trace).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1] not in ("syscall", "total") and parts[0][0].isdigit():
            counts[parts[-1]] = int(parts[3])
    per_call = {name: count / calls for name, count in counts.items()}
    listed = ", ".join("%s %.2f" % kv for kv in sorted(per_call.items(), key=lambda kv: -kv[1]) if kv[1] >= 0.005)
    return listed, sum(per_call.values())


def postgis_knn(db, work_dir):
    """Loads the places file's points into PostGIS (GiST) and runs pgbench's KNN top-20 at random positions."""
    pg = pathlib.Path("/usr/lib/postgresql/15/bin")
    if not (pg / "postgres").exists() or not pathlib.Path("/usr/share/postgresql/15/extension/postgis.control").exists():
        print("(PostGIS not installed: scripts/ensure-packages bench)")
        return None
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    shutil.chown(work_dir, "postgres", "postgres")
    run = lambda *argv: subprocess.run(["runuser", "-u", "postgres", "--", *map(str, argv)], check=True,
                                       capture_output=True, text=True)
    run(pg / "initdb", "-D", work_dir / "data", "-A", "trust")
    run(pg / "pg_ctl", "-D", work_dir / "data", "-o", "-k %s -c listen_addresses='' -c shared_buffers=256MB" % work_dir,
        "-l", work_dir / "log", "-w", "start")
    try:
        psql = lambda sql: run("psql", "-h", work_dir, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qAtc", sql)
        psql("CREATE EXTENSION postgis")
        psql("CREATE TABLE places(id text, name text, geom geometry(Point, 4326))")
        rows = subprocess.run(["sqlite3", "-separator", "\t", db, "SELECT id, name, longitude, latitude FROM places"],
                              check=True, capture_output=True, text=True).stdout
        copy = work_dir / "places.tsv"
        copy.write_text(rows)
        shutil.chown(copy, "postgres", "postgres")
        psql("CREATE TABLE raw(id text, name text, lon float8, lat float8)")
        psql("\\copy raw FROM '%s'" % copy)
        psql("INSERT INTO places SELECT id, name, ST_SetSRID(ST_MakePoint(lon, lat), 4326) FROM raw; DROP TABLE raw")
        psql("CREATE INDEX ON places USING gist(geom)")
        psql("VACUUM ANALYZE places")
        bounds = psql("SELECT ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e) FROM (SELECT ST_Extent(geom) e FROM places) b")
        x0, y0, x1, y1 = (float(v) for v in bounds.stdout.strip().split("|"))
        script = work_dir / "knn.sql"
        script.write_text(
            "\\set x random(%d, %d)\n\\set y random(%d, %d)\n"
            "SELECT id, name FROM places ORDER BY geom <-> ST_SetSRID(ST_MakePoint(:x / 1e7, :y / 1e7), 4326) LIMIT 20;\n"
            % (x0 * 1e7, x1 * 1e7, y0 * 1e7, y1 * 1e7))
        shutil.chown(script, "postgres", "postgres")
        run("pgbench", "-h", work_dir, "-n", "-c", "1", "-T", "5", "-f", script, "postgres")
        # In rounds as placed's figures are, best round first.
        rounds = []
        for _ in range(ROUNDS):
            out = run("pgbench", "-h", work_dir, "-n", "-c", "1", "-T", "5", "-f", script, "postgres").stdout
            latency = next(l for l in out.splitlines() if l.startswith("latency average"))
            tps = next(l for l in out.splitlines() if l.startswith("tps"))
            rounds.append((float(latency.split("=")[1].split()[0]), "%s, %s" % (latency.strip(), tps.split("(")[0].strip())))
        best = min(rounds)
        return "%s; best of %d rounds of 5 s, latency %s ms" % (best[1], ROUNDS, " / ".join("%.3f" % r[0] for r in rounds))
    finally:
        run(pg / "pg_ctl", "-D", work_dir / "data", "-m", "fast", "stop")
        shutil.rmtree(work_dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", action="store_true", help="make the missing extracts (once; large)")
    parser.add_argument("--sizes", default="10M,30M")
    parser.add_argument("--shapes", default="city,countryside")
    parser.add_argument("--parts", default="import,daemon,index,rank")
    parser.add_argument("--no-references", action="store_true",
                        help="import part: placectl alone, without the osmium runs beside it (half the time)")
    parser.add_argument("--import-baseline", default=os.environ.get("PLACED_IMPORT_BASELINE"),
                        help="import part: another build's placectl run in turns with this build's, its file "
                             "compared with this build's ($PLACED_IMPORT_BASELINE)")
    parser.add_argument("--rounds", type=int, default=1, help="import part: runs of each build (in turns)")
    parser.add_argument("--no-tags-filter", action="store_true",
                        help="import part: osmium export alone, without tags-filter + export (a third less time)")
    parser.add_argument("--map", action="store_true",
                        help="import part: the import with the map layer (placectl's default) instead of --no-map")
    parser.add_argument("--rank-baseline", default=os.environ.get("PLACED_RANK_BASELINE"),
                        help="a placed binary measured beside this build's in the rank part ($PLACED_RANK_BASELINE)")
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    placed, placectl, bench = (str(bin_path("release", n)) for n in ("placed", "placectl", "placed-bench"))
    parts = args.parts.split(",")
    files = []
    # The rank part has its own file (city-1M): asked for alone, it neither needs nor builds the others.
    for size in args.sizes.split(",") if set(parts) != {"rank"} else []:
        for shape in args.shapes.split(","):
            pbf = extract(shape, size, args.build, bench)
            if pbf:
                files.append((shape, size, pbf))
    print("big: %d extract(s) in %s, %.0f GB free, %s" % (len(files), DATA, free_gb(), load()))
    if args.build and "import" not in parts:
        # The other parts read the places file: --build makes it too (untimed; the import part times it).
        for shape, size, pbf in files:
            db = DATA / ("%s-%s.db" % (shape, size))
            if not db.exists():
                print("importing %s into %s (once)..." % (pbf.name, db.name), flush=True)
                subprocess.run([placectl, "import", pbf, "--db", db, "--no-map"], check=True, stdout=subprocess.DEVNULL)
    if "import" in parts:
        import_part(files, placectl, references=not args.no_references, baseline=args.import_baseline,
                    rounds=args.rounds, tags_filter=not args.no_tags_filter, with_map=args.map)
    if "daemon" in parts:
        daemon_part(files, placed)
    if "index" in parts:
        index_part(files, bench)
    if "rank" in parts:
        rank_part(bench, placectl, placed, args.build, args.rank_baseline)


if __name__ == "__main__":
    main()
