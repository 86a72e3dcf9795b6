"""A drive through Debian's gpsd inside the container, fed by gpsfake, to the installed placed at its
default log level: the moves come through, and the journal stays short (flash storage)."""
import json
import re
import sys
import time

import pytest

from conftest import set_up_service, write_drop_in
from container import ROOT

sys.path.insert(0, str(ROOT / "Tests" / "integration"))
import nmea  # noqa: E402  (the independent NMEA reading the integration tests use)

DRIVE = ROOT / "data" / "helsinki-drive.nmea"
PORT = 2948  # the container has its own network; the system gpsd.socket keeps 2947


def generation(service):
    return json.loads(service.run("placectl", "--json", "status").stdout).get("generation", 0)


WATCH = re.compile(r'<= client\(\d+\): \?WATCH=\{"enable":true')


def watched(container, cursor):
    """Whether a client asked gpsfake's gpsd to watch since `cursor` (its -D 4 client log)."""
    return any(e.get("_SYSTEMD_UNIT") == "gpsfake-drive.service" and WATCH.search(str(e.get("MESSAGE", "")))
               for e in container.journal(cursor=cursor))


@pytest.fixture(scope="module")
def drive(container, deb):
    """placed on gpsd (its default source) while gpsfake replays the drive once; what it left.

    The replay starts when placed watches, as the integration tests' GpsFake does: gpsfake holds each
    sentence until it reads a line (-l -i), here from a FIFO that a second unit keeps open, and
    gpsd's client log (-D 4) in the journal says when placed's WATCH came. Started at once, the
    replay raced placed's reload and the test had to allow for moves lost before it connected."""
    set_up_service(container, deb, static=False)
    log = container.put(DRIVE, "/var/tmp/helsinki-drive.nmea")
    sentences = len(DRIVE.read_bytes().splitlines())
    container.run("mkfifo", "/run/gpsfake-drive.in")
    cursor = container.cursor()
    container.run("systemd-run", "--unit=gpsfake-drive", "--collect", "--property=Type=exec", "--", "sh", "-c",
                  "exec gpsfake -1 -q -n -l -i -D 4 -P %d -S -s 115200 -c 0.02 %s < /run/gpsfake-drive.in"
                  % (PORT, log))
    container.run("systemd-run", "--unit=gpsfake-drive-input", "--collect", "--", "sh", "-c",
                  "exec sleep infinity > /run/gpsfake-drive.in")
    container.wait_for(lambda: container.run("ss", "-Hltn", "sport = :%d" % PORT).stdout.strip(), 10,
                       "gpsd from gpsfake")  # listening; a probe that watched would count as placed
    first = generation(container)
    write_drop_in(container, "20-gpsfake.conf", "[Location]\nGPSD=localhost:%d\n" % PORT)
    container.run("systemctl", "reload", "placed")
    container.wait_for(lambda: watched(container, cursor), 20, "placed to watch gpsfake's gpsd")
    container.sh("yes '' | head -n %d > /run/gpsfake-drive.in" % (sentences + 1))  # the replay, in full
    expected = nmea.moves(nmea.fixes(DRIVE), 50)
    started, last, changed = time.monotonic(), first, time.monotonic()
    while time.monotonic() - started < 120:
        now = generation(container)
        if now != last:
            last, changed = now, time.monotonic()
        if now - first >= len(expected) or (time.monotonic() - started > 40 and time.monotonic() - changed > 5):
            break
        time.sleep(0.5)
    # After -1 gpsfake may linger, and a SIGTERM can leave it hanging: end it and its gpsd at once.
    container.run("systemctl", "kill", "--signal=SIGKILL", "gpsfake-drive", "gpsfake-drive-input", check=False)
    status = json.loads(container.run("placectl", "--json", "status").stdout)
    lines = [e for e in container.journal(cursor=cursor) if e.get("_SYSTEMD_UNIT") == "placed.service"]
    return {"moves": last - first, "expected": expected, "status": status, "lines": lines}


def test_gpsd_through_gpsfake_gives_the_drive_s_moves(drive):
    expected = drive["expected"]
    assert len(expected) >= 70
    # The replay starts once placed watches: every move of the drive, no fewer.
    assert drive["moves"] == len(expected), \
        "placed moved %d times, the NMEA has %d moves" % (drive["moves"], len(expected))
    location = drive["status"]["location"]
    _, latitude, longitude = expected[-1]
    distance = nmea.WGS84.Inverse(latitude, longitude, location["latitude"], location["longitude"])["s12"]
    assert distance < 50, "placed ended %.1f m from the drive's last move" % distance
    assert drive["status"]["source"] in ("fix", "stale", "connecting", "no-fix"), drive["status"]


def test_a_drive_leaves_few_journal_lines_at_the_default_log_level(drive):
    """Moves and rankings are debug; at the default (info) a drive of 70 moves writes state changes
    only. Flash storage on a vehicle would otherwise take tens of thousands of lines a day."""
    messages = [e["MESSAGE"] for e in drive["lines"]]
    assert drive["moves"] >= 70
    assert len(messages) < 20, "%d lines for %d moves:\n%s" % (len(messages), drive["moves"], "\n".join(messages))
