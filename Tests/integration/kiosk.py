"""The kiosk's real parts for tests and benchmarks: placed-web in the foreground, Debian's Chromium
driven by selenium through chromium-driver, and NMEA logs that hold still at chosen points so a test
knows when the next move comes."""
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import threading
import time
import urllib.parse

import nmea
from harness import ROOT, end, free_port

WEB = ROOT / "web"
LEAFLET = pathlib.Path("/usr/share/javascript/leaflet")
CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMEDRIVER = pathlib.Path("/usr/bin/chromedriver")
DRIVE = ROOT / "data" / "helsinki-drive.nmea"
ARTIFACTS = ROOT / ".build" / "artifacts" / "kiosk"


class PlacedWeb:
    """placed-web serving the repository's web/ on a free loopback port; log lines collected."""

    def __init__(self, binary, socket_path, *arguments, port=None, env=None):
        self.port = port or free_port()
        self.origin = "http://127.0.0.1:%d" % self.port
        self.lines = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [str(binary), "--socket", str(socket_path), "--listen", "127.0.0.1:%d" % self.port,
             "--web-dir", str(WEB), "--leaflet-dir", str(LEAFLET), *map(str, arguments)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})})
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for("serving http://")

    def _read(self):
        for line in self.proc.stderr:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for(self, text, timeout=10):
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(text in line for line in self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise AssertionError("placed-web never said %r; log:\n%s" % (text, "\n".join(self.lines)))
                self._cond.wait(min(left, 0.1))

    def url(self, path="/"):
        return self.origin + path

    def stop(self):
        end(self.proc)
        return self.proc.returncode


def chromium(width=800, height=480, user_data_dir=None):
    """Headless Chromium at a viewport of exactly width x height CSS pixels, logging the console and
    the network (performance log). Nothing may resolve but the loopback: a request meant to leave
    the machine still shows in the performance log, and fails instead of going out."""
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), \
        "Debian's chromium and chromium-driver are needed: scripts/ensure-packages"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=%d,%d" % (width, height), "--hide-scrollbars",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-default-apps", "--disable-extensions", "--no-first-run", "--no-default-browser-check",
                     "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
                     "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                     "--user-data-dir=%s" % user_data_dir] if user_data_dir else []:
        options.add_argument(argument)
    if not user_data_dir:
        raise ValueError("give chromium a user_data_dir of its own")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium never fetches a driver or a browser
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    resize(driver, width, height)
    return driver


def resize(driver, width, height):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def console_errors(driver):
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def requested_urls(driver):
    """Every URL the page asked for since the last call (the performance log's network events)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] in ("Network.requestWillBeSent", "Network.webSocketCreated"):
            urls.append(message["params"].get("request", message["params"]).get("url"))
    return urls


def off_machine(urls):
    """The URLs that would leave the machine: network schemes (http, https, ws, wss, ftp) to anything
    but the loopback. The browser's own pages (chrome://), data: and blob: URLs stay inside it."""
    outside = []
    for url in urls:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https", "ws", "wss", "ftp"):
            continue
        if parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
            outside.append(url)
    return outside


def wait_until(what, predicate, timeout=10, interval=0.05):
    """Polls `predicate` until it returns something truthy; that value, or an AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as error:  # the page may be re-rendering: try again
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


LIST_SCRIPT = """
return Array.from(document.querySelectorAll('#places .place')).map(b => ({
  id: b.dataset.id, likelihood: Number(b.dataset.likelihood),
  name: b.querySelector('.name').textContent, shown: b.querySelector('.likelihood').textContent,
  width: b.querySelector('.fill').getBoundingClientRect().width / b.querySelector('.bar').getBoundingClientRect().width,
  height: b.getBoundingClientRect().height}));
"""

# Records, for each generation the list shows, when (wall clock, ms) the DOM changed to it.
OBSERVE_SCRIPT = """
window.__rendered = window.__rendered || {};
const list = document.getElementById('places');
new MutationObserver(() => {
  const g = list.dataset.generation;
  if (g && !(g in window.__rendered)) window.__rendered[g] = Date.now();
}).observe(list, {attributes: true, attributeFilter: ['data-generation']});
"""


def shown_generation(driver):
    value = driver.execute_script("return document.getElementById('places').dataset.generation")
    return int(value) if value else None


def banner(driver):
    return driver.execute_script(
        "const b = document.getElementById('banner'); return b.hidden ? null : b.dataset.kind")


def likelihood_text(value):
    """The page's formatting of a likelihood, for comparing with placed's numbers."""
    percent = value * 100
    return ("%d %%" % int(percent + 0.5)) if percent >= 10 else ("%.1f %%" % percent)


def _sentence(body):
    checksum = 0
    for ch in body:
        checksum ^= ord(ch)
    return "$%s*%02X\r\n" % (body, checksum)


def _epoch(t, point):
    """RMC, GGA and GSA of one epoch, as scripts/make-drive.py writes them; no fix when `point` is None."""
    hms, date = t.strftime("%H%M%S") + ".00", t.strftime("%d%m%y")
    if point is None:
        return _sentence("GPRMC,%s,V,,,,,,,%s,,,N" % (hms, date)) + _sentence("GPGGA,%s,,,,,0,00,99.9,,M,,M,," % hms)

    def ddmm(value, width):
        degrees = int(abs(value))
        return "%0*d%07.4f" % (width, degrees, (abs(value) - degrees) * 60)
    lat, ns = ddmm(point[0], 2), "N" if point[0] >= 0 else "S"
    lon, ew = ddmm(point[1], 3), "E" if point[1] >= 0 else "W"
    return (_sentence("GPRMC,%s,A,%s,%s,%s,%s,0.00,0.0,%s,,,A" % (hms, lat, ns, lon, ew, date))
            + _sentence("GPGGA,%s,%s,%s,%s,%s,1,09,1.2,18.0,M,19.0,M,," % (hms, lat, ns, lon, ew))
            + _sentence("GPGSA,A,3,01,03,06,09,12,17,19,22,28,,,,1.9,1.2,1.6"))


def hold_log(path, points, seconds_each, cycle=0.02, preamble=40):
    """An NMEA log that stands still at each of `points` ((lat, lon)) for about `seconds_each` when
    gpsfake replays it at `cycle` seconds per sentence (3 sentences an epoch)."""
    t = datetime.datetime(2026, 11, 29, 9, 0, 0)
    epochs = max(1, round(seconds_each / (3 * cycle)))
    lines = ["# Points of the Helsinki drive (c) OpenStreetMap contributors, ODbL 1.0, held still.\n"]
    for point in [None] * preamble + [p for p in points for _ in range(epochs)]:
        lines.append(_epoch(t, point))
        t += datetime.timedelta(seconds=1)
    pathlib.Path(path).write_text("".join(lines))
    return path


def drive_points(count, apart=120.0):
    """`count` fixes of the Helsinki drive, each at least `apart` metres from the one before."""
    chosen = []
    for _, lat, lon in nmea.fixes(DRIVE):
        if not chosen or nmea.WGS84.Inverse(chosen[-1][0], chosen[-1][1], lat, lon)["s12"] >= apart:
            chosen.append((lat, lon))
        if len(chosen) == count:
            return chosen
    raise AssertionError("the drive has fewer than %d points %d m apart" % (count, apart))


def keep(artifact, name):
    """Copies a file into .build/artifacts/kiosk/ (kept after the test) and returns the copy's path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / name
    shutil.copy(artifact, target)
    return target
