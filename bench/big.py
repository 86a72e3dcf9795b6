#!/usr/bin/env python3
"""Continental scale (issue 19): synthetic extracts of a city centre's and of the countryside's place
density at 10 M and 30 M places (about 100 M and 300 M nodes), kept in $PLACED_BENCH_DATA
(default /work/bench-data; never in the repository), and what placed does with them:

  import   placectl import --no-map: time and peak RSS beside osmium export (and osmium tags-filter,
           then export) of the same file, in the same run
  daemon   placed exec to the first ranking a client reads, RSS after start, RSS after a 500 km drive
           (Rank at every 50 m of a route across the area, each ranked through the catalog the daemon
           moves with); the file's pages out of the page cache first, as an import leaves them
  index    placed-bench index on the file: within-250 m and ranking p50, cold and warm, beside SQLite's
           R*Tree on the same points
  rank     Rank round trip from a compiled client (bench/rank-client.c) over 1 M places at city density
           beside PostGIS KNN top-20 through pgbench on the same places, and strace's count per call;
           beside the floor (bench/rank-floor.c: a server that answers with a fixed reply of the same
           size) and, with --rank-baseline BINARY, another placed build, all measured in turns

The files are large (a 30 M extract is about 2 GB, its places file about 6 GB) and take minutes to make:
without --build, a missing one is skipped and named. Figures carry the load average (uptime).

Usage: bench/big.py [--build] [--sizes 10M,30M] [--shapes city,countryside] [--parts import,daemon,index,rank]
                   [--rank-baseline PLACED]
"""
import argparse
import json
import os
import pathlib
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import PLACES, VarlinkSocket, bin_path, percentile  # noqa: E402

DATA = pathlib.Path(os.environ.get("PLACED_BENCH_DATA", "/work/bench-data"))
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
    fields = {}
    for line in open("/proc/%d/status" % pid):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["RssAnon"], fields["RssFile"]


def timed(argv, stdout=subprocess.DEVNULL):
    """Seconds and peak RSS (MB) of one program run."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - started
    errors = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("bench/big.py: %s failed (%d): %s" % (" ".join(map(str, argv)), proc.returncode, errors[-2000:]))
    return elapsed, usage.ru_maxrss / 1024


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


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


def import_part(files, placectl):
    print("\nimport (--no-map), best of 1 run each, %s" % load())
    print("file                        placectl s  peak MB   osmium export s  peak MB   tags-filter+export s  peak MB"
          "   ratio (osmium/placectl)")
    for shape, size, pbf in files:
        db = DATA / ("%s-%s.db" % (shape, size))
        ours, ours_rss = timed([placectl, "import", pbf, "--db", db, "--no-map"])
        exported, exported_rss = timed(["sh", "-c", 'osmium export "$0" -f geojsonseq -o - > /dev/null', pbf])
        filtered = DATA / "filtered.osm.pbf"
        t1, r1 = timed(["osmium", "tags-filter", pbf, *["nwr/" + k for k in KEYS], "-o", filtered, "--overwrite"])
        t2, r2 = timed(["sh", "-c", 'osmium export "$0" -f geojsonseq -o - > /dev/null', filtered])
        filtered.unlink()
        print("%-26s %10.1f %8.0f %17.1f %8.0f %22.1f %8.0f   %.2fx / %.2fx  (%s)" % (
            pbf.name, ours, ours_rss, exported, exported_rss, t1 + t2, max(r1, r2), exported / ours,
            (t1 + t2) / ours, load()), flush=True)
        print("  places file %s: %.0f MB" % (db.name, db.stat().st_size / 1e6))


def route(shape, size, metres=500_000, step=50):
    """A 500 km route across the grid at 50 m steps: a serpentine where the grid is narrower."""
    blocks = int(SIZES[size] / PLACES_PER_BLOCK + 1)
    side_m = int(blocks ** 0.5 + 1) * BLOCK[shape]
    lat0, lon0 = ORIGIN
    middle_lat = lat0 + side_m / 2 / 111_000
    per_lat = 111_320.0
    import math
    per_lon = 111_320.0 * math.cos(math.radians(middle_lat))
    margin = side_m * 0.05
    width = side_m - 2 * margin
    points, x, y, east, travelled = [], margin, margin, True, 0.0
    lane = side_m / 12
    while travelled < metres:
        points.append((lat0 + y / per_lat, lon0 + x / per_lon))
        if (east and x + step > margin + width) or (not east and x - step < margin):
            y += lane if y + lane < side_m - margin else -y + margin
            east = not east
        else:
            x += step if east else -step
        travelled += step
    return points, (middle_lat, lon0 + side_m / 2 / per_lon)


def daemon_part(files, placed):
    print("\ndaemon: exec to the first ranking read, RSS after start and after a 500 km drive, %s" % load())
    print("file                    ready ms  ranked ms   RSS start MB (anon/file)   RSS drive MB (anon/file)"
          "   drive Rank p50 us")
    for shape, size, _ in files:
        db = DATA / ("%s-%s.db" % (shape, size))
        if not db.exists():
            print("(%s: no places file; run the import part first)" % db)
            continue
        points, centre = route(shape, size)
        with tempfile.TemporaryDirectory(prefix="placed-big-") as tmp:
            work = pathlib.Path(tmp)
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
                times = []
                for lat, lon in points:
                    t = time.monotonic()
                    client.call(PLACES + ".Rank", latitude=lat, longitude=lon, limit=5)
                    times.append((time.monotonic() - t) * 1e6)
                drive_rss = memory(proc.pid)
                client.close()
            finally:
                proc.terminate()
                proc.wait(timeout=30)
                notify.close()
        print("%-22s %9.1f %10.1f   %6.1f (%5.1f / %5.1f)       %6.1f (%5.1f / %5.1f)     %8.0f   (%d Rank calls, %s)" % (
            db.name, ready, ranked, *start_rss, *drive_rss, percentile(times, 50), len(points), load()), flush=True)


def index_part(files, bench):
    print("\nindex: within-250 m and ranking on the places file (mapped) beside SQLite R*Tree, %s" % load())
    for shape, size, _ in files:
        db = DATA / ("%s-%s.db" % (shape, size))
        if not db.exists():
            print("(%s: no places file; run the import part first)" % db)
            continue
        out = subprocess.run([bench, "index", "--places-file", str(db), "--queries", "10000"], capture_output=True,
                             text=True)
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
    parser.add_argument("--rank-baseline", default=os.environ.get("PLACED_RANK_BASELINE"),
                        help="a placed binary measured beside this build's in the rank part ($PLACED_RANK_BASELINE)")
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    placed, placectl, bench = (str(bin_path("release", n)) for n in ("placed", "placectl", "placed-bench"))
    parts = args.parts.split(",")
    files = []
    for size in args.sizes.split(","):
        for shape in args.shapes.split(","):
            pbf = extract(shape, size, args.build, bench)
            if pbf:
                files.append((shape, size, pbf))
    print("big: %d extract(s) in %s, %.0f GB free, %s" % (len(files), DATA, free_gb(), load()))
    if "import" in parts:
        import_part(files, placectl)
    if "daemon" in parts:
        daemon_part(files, placed)
    if "index" in parts:
        index_part(files, bench)
    if "rank" in parts:
        rank_part(bench, placectl, placed, args.build, args.rank_baseline)


if __name__ == "__main__":
    main()
