#!/usr/bin/env python3
"""Benchmark the kiosk page (issue 18), release builds, headless Debian Chromium:

1. navigation to the first list: from the navigation's start to the page's User Timing mark
   `placed-first-list` (the likely places on screen), over fresh loads of the page;
2. move to DOM: placed fed by gpsfake with the Helsinki drive; for each ranking, the wall-clock time
   placed logged it (PLACED_LOG_TIMESTAMPS) to when the page's list showed that generation (a
   MutationObserver on the list), p50 over the drive;
3. placed-web's resident memory while idle (following placed, no page), with a page following, and
   after the drive.

Usage: bench/kiosk.py [--loads 10]
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
import kiosk  # noqa: E402
from harness import HELSINKI_CENTER, GpsFake, Placed, bin_path, free_port, percentile, rss_mb  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    placed_bin, placectl_bin, web_bin = (bin_path("release", name) for name in ("placed", "placectl", "placed-web"))
    for path in (placed_bin, placectl_bin, web_bin):
        assert path.exists(), "build it first: swift build -c release --product %s" % path.name
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        subprocess.run([placectl_bin, "import", ROOT / "data" / "helsinki-center.osm.pbf", "--db", tmp / "places.db"],
                       check=True, capture_output=True)
        first_list(placed_bin, web_bin, tmp, args.loads)
        move_to_dom(placed_bin, web_bin, tmp)


def anon_mb(pid):
    with open("/proc/%d/status" % pid) as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:")) / 1024


def first_list(placed_bin, web_bin, tmp, loads):
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp / "places.db", "--socket", tmp / "sock",
                    "--selections", tmp / "sel.db", "--static", HELSINKI_CENTER)
    placed.wait_for("ranking 1:")
    web = kiosk.PlacedWeb(web_bin, tmp / "sock")
    browser = None
    try:
        web.wait_for("following placed")
        time.sleep(1)
        idle = rss_mb(web.proc.pid)
        anonymous = anon_mb(web.proc.pid)
        browser = kiosk.chromium(800, 480, user_data_dir=tmp / "chromium")
        times = []
        for _ in range(loads):
            browser.get(web.url())
            mark = kiosk.wait_until("the first list", lambda: browser.execute_script(
                "const m = performance.getEntriesByName('placed-first-list')[0]; return m && m.startTime"))
            times.append(mark)
        following = rss_mb(web.proc.pid)
        print("kiosk first list: first load %.0f ms, p50 %.0f ms, p95 %.0f ms over %d loads"
              % (times[0], percentile(times, 50), percentile(times, 95), len(times)))
        print("placed-web idle RSS: %.1f MB, %.1f MB of it its own (RssAnon; the rest shared library pages: "
              "libsystemd, libmicrohttpd with GnuTLS) (with a page following: %.1f MB)" % (idle, anonymous, following))
    finally:
        if browser:
            browser.quit()
        web.stop()
        placed.stop()


def move_to_dom(placed_bin, web_bin, tmp):
    port = free_port()
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp / "places.db", "--socket", tmp / "sock2",
                    "--selections", tmp / "sel2.db", "--gpsd", "localhost:%d" % port, "--gpsd-timeout", 2,
                    env={"PLACED_LOG_TIMESTAMPS": "1"})
    web = kiosk.PlacedWeb(web_bin, tmp / "sock2")
    browser = kiosk.chromium(800, 480, user_data_dir=tmp / "chromium2")
    gps = None
    try:
        browser.get(web.url())
        kiosk.wait_until("the page", lambda: browser.execute_script("return !!document.getElementById('places')"))
        browser.execute_script(kiosk.OBSERVE_SCRIPT)
        gps = GpsFake(kiosk.DRIVE, port)
        placed.wait_for(r"no data from gpsd", timeout=240)
        time.sleep(1)
        rankings = {int(m.group(2)): float(m.group(1)) for m in placed.wait_for(r"^([\d.]+) placed: ranking (\d+):")}
        rendered = browser.execute_script("return window.__rendered")
        latencies = [rendered[str(g)] / 1000 - t for g, t in rankings.items() if str(g) in rendered]
        missed = len(rankings) - len(latencies)
        ms = [1000 * x for x in latencies]
        print("kiosk move to DOM: p50 %.1f ms, p95 %.1f ms, max %.1f ms over %d rankings (%d never shown: "
              "superseded within a frame)" % (percentile(ms, 50), percentile(ms, 95), max(ms), len(ms), missed))
        print("placed-web RSS after the drive: %.1f MB" % rss_mb(web.proc.pid))
    finally:
        browser.quit()
        if gps:
            gps.stop()
        web.stop()
        placed.stop()


if __name__ == "__main__":
    main()
