"""Visits from a real gpsd: a gpsfake drive that stops at a place for longer than DwellTime= is one visit,
announced on varlink Watch, on D-Bus and in the journal with their MESSAGE_IDs; AutoSelect= selects the
visit's top place once, durably, marked automatic; leaving ends the visit with that place.

gpsfake replays 25 epochs a second, and placed judges stays by when fixes arrive (never by fix time), so
the drive's minutes pass in seconds: DwellTime=10, a stop of 350 epochs (14 s here), and a departure
long enough for the 30 s outside that ends a visit before the replay ends."""
import pathlib
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time

import pytest

import nmea
from harness import PLACES, GpsFake, JournaledPlaced, VarlinkSocket, free_port, open_varlink, private_bus

VISIT_STARTED = "1df280d41ef540f39abe08ce69b2576a"
VISIT_ENDED = "2750cf6609404de3895803abac304e54"
SELECTION = "5d1b7e4c2a9f4b8e8c3f6a0d9e2b7c41"


@pytest.fixture
def spot(start_placed, places_db, tmp_path):
    """A place of the extract at which placed ranks it first and likely enough for AutoSelect=0.6, with
    a few metres of accuracy (placed is asked: the test knows no model)."""
    placed = start_placed(directory=tmp_path / "probe")
    rows = sqlite3.connect(places_db).execute("SELECT latitude, longitude FROM places ORDER BY rowid").fetchall()
    with placed.open() as places:
        for lat, lon in rows[::7]:
            ranked = places.Rank(latitude=lat, longitude=lon, accuracy=4)["places"]
            if ranked and ranked[0]["likelihood"] >= 0.75:
                return lat, lon, ranked[0]
    pytest.fail("no place of the extract is a clear first at its own position")


def test_a_stop_is_a_visit_on_every_interface_and_auto_selected(placed_bin, places_db, tmp_path, spot):
    lat, lon, top = spot
    approach = nmea.WGS84.Direct(lat, lon, 180, 150)
    drive = tmp_path / "stop.nmea"
    ends = nmea.stop_and_go(drive, (approach["lat2"], approach["lon2"]),
                            [("go", 30, 0, 5), ("stop", 350), ("go", 1100, 90, 3)])
    conf = tmp_path / "placed.conf"
    conf.write_text("[Visits]\nDwellTime=10\nAutoSelect=0.6\n")
    public = tempfile.mkdtemp(prefix="placed-visits-")  # the bus lives outside the private /run
    bus, address = private_bus(pathlib.Path(public))
    shutil.copy(places_db, tmp_path / "places.db")
    port = free_port()
    gps = GpsFake(drive, port)
    placed = JournaledPlaced(placed_bin, tmp_path / "places.db", tmp_path, "--bus", "session", "--gpsd",
                             "localhost:%d" % port, "--gpsd-timeout", "5", "--config", conf,
                             env={"DBUS_SESSION_BUS_ADDRESS": address})
    monitor = subprocess.Popen(["gdbus", "monitor", "--address", address, "--dest", "io.placed.Placed1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    heard = []  # read as it comes: a full pipe would stall the monitor
    reader = threading.Thread(target=lambda: heard.extend(monitor.stdout), daemon=True)
    reader.start()
    updates = []
    try:
        watch = VarlinkSocket(placed.socket, timeout=120)
        watch.send(PLACES + ".Watch", more=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                update = watch.reply()
            except TimeoutError:
                log = [e["MESSAGE"] for e in placed.entries("SYSLOG_IDENTIFIER=placed")]
                raise AssertionError("no visit ended at %s: %s; log: %s" % (
                    top["name"], [u.get("visit") for u in updates if "visit" in u], log))
            updates.append(update)
            if (update.get("visit") or {}).get("ended"):
                break
        visits = [u["visit"] for u in updates if "visit" in u]
        started = [v for v in visits if "ended" not in v]
        ended = [v for v in visits if "ended" in v]
        assert len(started) == 1 and len(ended) == 1, visits
        visit = started[0]
        assert visit["places"][0]["id"] == top["id"], "ranked at the averaged position"
        assert nmea.WGS84.Inverse(visit["latitude"], visit["longitude"], *ends[1])["s12"] < 5
        assert 0 < visit["accuracy"] < 20, "the 95 % radius of the averaged position"
        assert visit["fixes"] >= 100 and visit["duration"] >= 10
        markers = [u["marker"] for u in updates if "marker" in u and u is not updates[0]]
        assert len(markers) == 1, "AutoSelect= selects once per visit"
        marker = markers[0]
        assert marker["automatic"] is True and marker["place"]["id"] == top["id"]
        assert marker["generation"] == visit["generation"]
        done = ended[0]
        assert done["id"] == visit["id"] and done["place"]["id"] == top["id"]
        assert done["selection"] == marker["selection"] and done["automatic"] is True
        assert done["duration"] >= visit["duration"]
        with open_varlink(placed.socket) as places:
            history = places.History(limit=5)["markers"]
            assert [m["automatic"] for m in history] == [True], "the row says so"
            assert "visit" not in places.Status(), "no visit is open after leaving"
        # The journal: one entry for each, with their own MESSAGE_IDs and fields.
        [begun] = placed.entries("MESSAGE_ID=%s" % VISIT_STARTED)
        assert begun["VISIT_ID"] == str(visit["id"]) and float(begun["ACCURACY"]) == pytest.approx(
            visit["accuracy"], abs=0.1)
        [left] = placed.entries("MESSAGE_ID=%s" % VISIT_ENDED)
        assert left["PLACE_ID"] == top["id"] and int(left["DURATION"]) >= 10
        [selected] = placed.entries("MESSAGE_ID=%s" % SELECTION)
        assert selected["AUTOMATIC"] == "1" and selected["PLACE_ID"] == top["id"]
        # D-Bus: the signals, with the same records.
        time.sleep(0.5)
        monitor.terminate()
        reader.join(10)
        signals = [line for line in heard if ".Visit" in line]
        assert [".VisitStarted" in line for line in signals] == [True, False], signals
        assert top["id"] in signals[0] and "'automatic': <true>" in signals[1]
    finally:
        if monitor.poll() is None:
            monitor.kill()
        gps.stop()
        assert placed.stop() == 0
        bus.kill()
        bus.wait()
        shutil.rmtree(public, ignore_errors=True)
