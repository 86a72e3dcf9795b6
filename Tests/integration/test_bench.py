"""The snap benchmark runs, its tables say what they measure, and bench/run reads the figures it prints;
so do the map-through-the-daemon and the fleet-export-in-the-daemon benchmarks, briefly.

A short run (600 visits) cannot judge the goal; it checks what holds at any sample size worth the
name: the ranker beats the nearest place at top 1, and a stricter reading of the same accuracy leaves
less to find.
"""
import importlib.machinery
import importlib.util
import re
import subprocess
import sys

import pytest

from harness import ROOT, bin_path


@pytest.fixture(scope="module")
def snap_output():
    bench = bin_path("release", "placed-bench")
    out = subprocess.run([bench, "snap", "--visits", "600"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def load_bench_run():
    loader = importlib.machinery.SourceFileLoader("bench_run", str(ROOT / "bench" / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_run", loader))
    loader.exec_module(module)
    return module


def bench_run_rows(output, name="snap"):
    return {row[0]: row for row in load_bench_run().rows(name, output)}


def top5_at_15m(output, reading):
    table = output.split("accuracy read as " + reading, 1)[1]
    return float(re.search(r"^15 m\s+[\d.]+\s+[\d.]+ ([\d.]+)", table, re.M).group(1))


def test_goal_reading_comes_first_and_is_named(snap_output):
    readings = re.findall(r"^accuracy read as (.*)$", snap_output, re.M)
    assert readings[0].startswith("a 95 % radius, as gpsd's eph")
    assert "[the goal's reading]" in readings[0]
    assert any(r.startswith("sigma per axis") for r in readings)


def test_stricter_readings_find_less(snap_output):
    eph = top5_at_15m(snap_output, "a 95 % radius")
    android = top5_at_15m(snap_output, "a 68 % radius")
    sigma = top5_at_15m(snap_output, "sigma per axis")
    assert eph > android > sigma


def test_bench_run_reads_every_snap_figure(snap_output):
    rows = bench_run_rows(snap_output)
    top5 = rows["snap top-5 at 15 m (eph, sigma 6.1 m)"]
    assert 0 < float(top5[1]) <= 1 and top5[4] == ">= 0.9"
    assert "5 seeds" in top5[2]
    top1 = rows["snap top-1 at 15 m (eph)"]
    assert float(top1[3].rstrip("x")) > 1, "the ranker should beat the nearest place at top 1"
    assert "snap top-5 at 15 m read as sigma per axis" in rows
    timings = [name for name in rows if name.startswith("ranking time per fix")]
    # Helsinki and the 1 M-place file, and Helsinki again with the hours factor on (issue 34).
    hours = [name for name in timings if "hours factor on" in name]
    assert len(timings) == 3 and len(hours) == 1, timings
    for name in timings:
        # Judged on the second round over the same fixes; the first touch of the mapping beside it.
        assert re.fullmatch(r"p50 [\d.]+ us", rows[name][1]), rows[name]
        if name not in hours:
            assert re.fullmatch(r"first round [\d.]+ us \([\d.]+ disk reads a fix; then [\d.]+\)", rows[name][2])
    assert rows[hours[0]][4] == "p50 <= 50 us", rows[hours[0]]


def test_snap_second_round_finds_the_pages_mapped(snap_output):
    """The second round over the same fixes reads the disk no more than the first: its pages are cached."""
    rows = re.findall(r"^\d+\s+\d+ m\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+"
                      r"\s+([\d.]+)\s+([\d.]+)$", snap_output, re.M)
    assert len(rows) == 6, snap_output
    assert all(float(again) <= float(first) for first, again in rows), rows


def load_big():
    loader = importlib.machinery.SourceFileLoader("bench_big", str(ROOT / "bench" / "big.py"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_big", loader))
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("shape,size", [(shape, size) for shape in ("city", "countryside") for size in ("1M", "10M", "30M")])
def test_big_drive_is_500_km_inside_the_grid_without_jumps(shape, size):
    """The daemon part's drive: 500 km of 50 m steps as the daemon measures them, inside the synthetic grid,
    never a jump; a serpentine of lanes over the grid where it is narrower than the drive."""
    big = load_big()
    points, centre = big.route(shape, size)
    south, west, north, east = big.grid(shape, size)
    assert south < centre[0] < north and west < centre[1] < east
    steps = []
    for (lat0, lon0), (lat1, lon1) in zip(points, points[1:]):
        per_lat, per_lon = big.metres_per_degree(lat0)
        steps.append(((lat1 - lat0) * per_lat, (lon1 - lon0) * per_lon))
    lengths = [(dy * dy + dx * dx) ** 0.5 for dy, dx in steps]
    assert max(lengths) < 50.001 and min(lengths) > 49.999
    assert abs(sum(lengths) - 500_000) < 1
    assert all(south <= lat <= north and west <= lon <= east for lat, lon in points)
    width_km = (east - west) * big.metres_per_degree((south + north) / 2)[1] / 1000
    span = max(p[0] for p in points) - min(p[0] for p in points)
    if width_km > 500 / 0.9:
        assert span == 0, "one lane east where the grid is wider than the drive"
    else:
        # Lanes driven the grid's width, the climbs between them spread over its height.
        assert span > 0.5 * (north - south)


def test_bench_run_reads_the_big_daemon_line():
    line = ("city-30M.db                 13.7       18.7     13.2 (  1.1 /  12.1)         23.8 (  1.1 /  22.7)"
            "       49.3        299   (10000 Rank calls; starts 18.7 20.1 17.0 ms; load 1.90 2.17 2.10)\n")
    rows = bench_run_rows(line, "big-daemon")
    assert rows["daemon city-30M: exec to the first ranking read (median of the cold starts)"][1:] == (
        "18.7 ms", "READY=1 after 13.7 ms", "", "<= 100 ms", "met")
    assert rows["daemon city-30M: RSS after start"][1] == "13.2 MB"
    drive = rows["daemon city-30M: RSS after a 500 km drive (peak over it)"]
    assert drive[1] == "23.8 MB (peak 49.3 MB)" and drive[5] == "MISSED", drive


def test_map_daemon_bench_runs_and_bench_run_reads_it():
    out = subprocess.run([sys.executable, ROOT / "bench" / "map_daemon.py", "--calls", "10", "--runs", "2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = bench_run_rows(out.stdout, "map-daemon")
    maps = [rows["varlink Map %d m through placed (round trip)" % radius] for radius in (150, 292, 1000)]
    replies = [float(re.search(r"reply ([\d.]+) kB", row[4]).group(1)) for row in maps]
    assert 0 < replies[0] < replies[1] < replies[2], replies
    assert all(row[1].startswith("p50 ") and row[1].endswith(" ms") for row in maps)
    assert "placed RSS after Map calls, 1.5 s later" in rows
    assert {"placectl map to SVG, exec to exit (800x480, 150 m)", "placectl map to PNG, exec to exit (800x480, 150 m)"} \
        <= set(rows)


def test_fleet_daemon_bench_runs_and_bench_run_reads_it():
    """A short bench/fleet_daemon.py (one round of the drive's first 60 fixes, 10 s idle): bench/run reads
    each of its figures, and every configuration moved at each fix."""
    out = subprocess.run([sys.executable, ROOT / "bench" / "fleet_daemon.py", "--rounds", "1", "--fixes", "60",
                          "--idle", "10", "--keepalive", "5"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = bench_run_rows(out.stdout, "fleet-daemon")
    latencies = ["fix-to-move latency, fleet export %s" % name
                 for name in ("off", "on, connected", "on, broker down (outage)")]
    assert set(rows) == set(latencies) | {"fix-to-move p50, fleet on minus off",
                                          "fix-to-move p50, fleet during an outage minus off",
                                          "placed idle RSS, fleet export on (Helsinki)",
                                          "placed idle wake-ups, fleet on, connected (strace)"}, out.stdout
    for name in latencies:
        # placed's move time minus gpspipe's TPV time: two clients of one gpsd, so either may be first
        assert re.fullmatch(r"p50 -?[\d.]+ ms, p95 -?[\d.]+ ms", rows[name][1]), rows[name]
        assert re.search(r", (\d+) moves$", rows[name][2]).group(1) == "60", rows[name]
    assert re.match(r"machine: \d+ cores \(nproc\), .+, load average [\d.]+ [\d.]+ [\d.]+$", out.stdout, re.M)


def test_map_bounds_bench_compares_two_files(places_db, tmp_path):
    """bench/map_bounds.py on the Helsinki file and a copy of it: the same leaves, the same boxes found
    by each search, three rounds each; with one file it says how to use it."""
    copy = tmp_path / "copy.db"
    copy.write_bytes(places_db.read_bytes())
    out = subprocess.run([sys.executable, ROOT / "bench" / "map_bounds.py", places_db, copy], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    trees = re.findall(r"^\S+: (\d+) leaves, leaves' area (\S+) ", out.stdout, re.M)
    assert len(trees) == 2 and trees[0] == trees[1] and int(trees[0][0]) > 1, out.stdout
    found = re.findall(r"^round (\d) \S+: [\d.]+ us a search, ([\d.]+) boxes found a search$", out.stdout, re.M)
    assert [int(r) for r, _ in found] == [0, 0, 1, 1, 2, 2], out.stdout
    assert len({f for _, f in found}) == 1 and float(found[0][1]) > 0, out.stdout
    usage = subprocess.run([sys.executable, ROOT / "bench" / "map_bounds.py", places_db], capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode == 1 and "usage: bench/map_bounds.py" in usage.stderr


def test_bench_run_judges_the_rank_and_import_goals():
    """Rank at least 2x PostGIS (was 10x), its system calls shown without a goal; the import at least 0.5x
    osmium export (was 1.0x) and its peak RSS at most 1 GB."""
    rank = ("placed Rank (C client, 1 call in flight): 20000 calls, p50 60.0 us, p99 80.0 us, mean 63.0 us\n"
            "strace -c over 2,000 Rank calls, per call: recvfrom 1.00, sendto 1.00, futex 0.50 (total 2.50)\n"
            "PostGIS KNN top-20 (pgbench, 1 client, Unix socket): latency average = 0.190 ms, tps = 5263\n")
    rows = bench_run_rows(rank, "big-rank")
    assert rows["Rank round trip, 1 M city places (C client, mean)"][3:] == ("3.0x", ">= 2x", "met")
    assert rows["Rank system calls per call (strace -c)"][4:] == ("", "")
    slower = bench_run_rows(rank.replace("0.190 ms", "0.120 ms"), "big-rank")
    assert slower["Rank round trip, 1 M city places (C client, mean)"][3:] == ("1.9x", ">= 2x", "MISSED")

    line = "city-30M.osm.pbf  %s  %s  113.9  2433  300.0  2400   %s / 1.57x  (load 1.00 1.10 1.20)\n"
    rows = bench_run_rows(line % ("191.6", "760", "0.59x"), "big-import")
    assert rows["import city-30M --no-map: time"][4:] == (">= 0.5x osmium", "met")
    assert rows["import city-30M --no-map: peak RSS"][1:] == ("760 MB", "osmium export 2433 MB; tags-filter + export "
                                                             "2400 MB", "", "<= 1 GB", "met")
    rows = bench_run_rows(line % ("300.0", "1100", "0.38x"), "big-import")
    assert rows["import city-30M --no-map: time"][5] == "MISSED"
    assert rows["import city-30M --no-map: peak RSS"][5] == "MISSED"


def test_bench_run_table_keeps_the_rows_of_benchmarks_not_run(tmp_path):
    """BENCHMARKS.md from bench/results.json: a run of some benchmarks replaces their rows and keeps the
    others', each row named by its run when the runs differ; a benchmark that gave no figure keeps its rows
    and is named as failed; the method follows; no path of the machine's checkout is written."""
    run = load_bench_run()
    results, table = {}, tmp_path / "BENCHMARKS.md"
    first = {"run": "2026-01-01 10:00 UTC", "commit": "aaaaaaa", "dirty": False, "machine": "machine one"}
    second = {"run": "2026-02-01 10:00 UTC", "commit": "bbbbbbb", "dirty": True, "machine": "machine two"}
    json_row = ("JSON encode, 20-place reply", "30.0 us", "Foundation 2000.0 us", "66.7x", "", "")
    rss_row = ("placed idle RSS (Helsinki loaded)", "11.0 MB", "", "", "<= 12 MB", "met")
    run.record(results, "json", dict(first, date=first["run"]), [json_row], 0, 0.5)
    run.record(results, "gpsd", dict(first, date=first["run"]), [rss_row], 0, 0.5)
    run.write_table(results, table)
    text = table.read_text()
    assert "All rows from one run: 2026-01-01 10:00 UTC, commit aaaaaaa, on machine one." in text
    assert "| figure | value | goal | reference | ratio | met |\n" in text
    assert "| placed idle RSS (Helsinki loaded) | 11.0 MB | ≤ 12 MB |  |  | met |" in text
    assert "| JSON encode, 20-place reply | 30.0 µs |  | Foundation 2000.0 µs | 66.7x |  |" in text

    newer = ("placed idle RSS (Helsinki loaded)", "12.5 MB (%s/bench/last-run.txt)" % ROOT, "", "", "<= 12 MB",
             "MISSED")
    run.record(results, "gpsd", dict(second, date=second["run"]), [newer], 0, 0.5)
    run.write_table(results, table)
    text = table.read_text()
    assert "- **A**: 2026-01-01 10:00 UTC, commit aaaaaaa, on machine one." in text
    assert "- **B**: 2026-02-01 10:00 UTC, commit bbbbbbb with local changes, on machine two." in text
    assert "| figure | value | goal | reference | ratio | met | run |" in text
    assert "| JSON encode, 20-place reply | 30.0 µs |  | Foundation 2000.0 µs | 66.7x |  | A |" in text
    assert "| placed idle RSS (Helsinki loaded) | 12.5 MB (bench/last-run.txt) | ≤ 12 MB |  |  | MISSED | B |" in text
    assert "11.0 MB" not in text and str(ROOT) not in text

    failed = ("json benchmark", "FAILED (exit 1)", "", "", "", "MISSED")
    run.record(results, "json", dict(second, date=second["run"]), [failed], 1, 0.5)
    run.write_table(results, table)
    text = table.read_text()
    assert "| JSON encode, 20-place reply | 30.0 µs |" in text
    assert "Failed or skipped at their last run, so the rows above are older: `json` at 2026-02-01 10:00 UTC " \
        "(FAILED (exit 1))." in text
    assert "Not measured yet: `import`, " in text and "`gpsd`" not in text.split("Not measured yet")[1].split("\n")[0]
    assert text.endswith((ROOT / "bench" / "METHOD.md").read_text())


def test_bench_run_names_the_machine_and_commit():
    run = load_bench_run()
    assert re.fullmatch(r".+, \d+ cores, [\d.]+ GiB, Linux \S+, .+", run.machine()), run.machine()
    head, dirty = run.commit()
    assert re.fullmatch(r"[0-9a-f]{7,}", head) and isinstance(dirty, bool)
