"""Own places end to end with the real binaries: placectl own import of 10,000 sites, own places in the
rankings beside OpenStreetMap's, who may change them, bad GeoJSON refused by name with nothing applied,
and kill -9 in the middle of a PutPlaces batch leaving all of it or none after the restart."""
import json
import math
import subprocess
import time

import pytest
import varlink

from harness import PLACES, VarlinkReplyError, rss_mb
from test_varlink_access import NOBODY, as_user, open_directory, placed_group, reader_group  # noqa: F401

CENTRE = (60.1699, 24.9384)  # harness.HELSINKI_CENTER


def circle(key, lat, lon, radius, **properties):
    return {"type": "Feature", "properties": {"id": "own:" + key, "name": key.capitalize(), "radius": radius,
                                              **properties},
            "geometry": {"type": "Point", "coordinates": [lon, lat]}}


def square(key, lat, lon, half_metres, **properties):
    """A square of 2 * half_metres a side around lat, lon, with a hole of half its size."""
    dlat = half_metres / 111_320
    dlon = half_metres / (111_320 * math.cos(math.radians(lat)))

    def ring(f, clockwise=False):
        corners = [(lon - f * dlon, lat - f * dlat), (lon + f * dlon, lat - f * dlat),
                   (lon + f * dlon, lat + f * dlat), (lon - f * dlon, lat + f * dlat)]
        if clockwise:
            corners.reverse()
        return [list(c) for c in corners + corners[:1]]
    return {"type": "Feature", "properties": {"id": "own:" + key, "name": key.capitalize(), **properties},
            "geometry": {"type": "Polygon", "coordinates": [ring(1), ring(0.5, clockwise=True)]}}


def sites(count, prefix="site"):
    """`count` own places on a 40 m grid around the centre: circles, and every tenth a square with a hole."""
    side = math.ceil(math.sqrt(count))
    features = []
    for i in range(count):
        lat = CENTRE[0] + (i // side - side / 2) * 40 / 111_320
        lon = CENTRE[1] + (i % side - side / 2) * 40 / (111_320 * math.cos(math.radians(CENTRE[0])))
        key = "%s-%05d" % (prefix, i)
        features.append(square(key, lat, lon, 12, kind="depot") if i % 10 == 0
                        else circle(key, lat, lon, 5 + i % 15, kind="customer"))
    return features


def write_collection(path, features):
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return path


def placectl(placectl_bin, placed, *arguments):
    return subprocess.run([placectl_bin, "--socket", placed.socket, *map(str, arguments)],
                          capture_output=True, text=True, timeout=60)


def test_import_of_10000_sites_ranks_them_with_osm_places(start_placed, placectl_bin, tmp_path):
    placed = start_placed()
    features = sites(10_000)
    features.append(circle("here", *CENTRE, 30, kind="depot", **{"name:sv": "Här"}))
    path = write_collection(tmp_path / "sites.geojson", features)
    started = time.monotonic()
    out = placectl(placectl_bin, placed, "own", "import", path)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert out.stdout == "put 10001 own places from %s\n" % path
    print("placectl own import of 10,001 sites: %.2f s" % took)
    time.sleep(1.5)  # placed gives the batch's freed memory back a second after the last call
    print("placed RSS with 10,001 own places: %.1f MB" % rss_mb(placed.proc.pid))

    with placed.open() as places:
        assert len(places.OwnPlaces()["places"]) == 10_001
        # The change was ranked at once: generation 2 at the static position, own places with OSM ones.
        current = places.Current(limit=20)
        assert current["generation"] == 2
        ids = [p["id"] for p in current["places"]]
        assert "own:here" in ids and any(i.startswith("osm:") for i in ids), ids
        here = next(p for p in current["places"] if p["id"] == "own:here")
        assert here["distance"] == 0 and here["kind"] == "depot"
        assert places.Current(language="sv")["places"]
        # A what-if ranking inside a square's hole finds the square at the hole's edge, not at 0.
        hole = features[0]["geometry"]["coordinates"][1]
        lon = sum(c[0] for c in hole[:4]) / 4
        lat = sum(c[1] for c in hole[:4]) / 4
        ranked = {p["id"]: p for p in places.Rank(latitude=lat, longitude=lon, accuracy=5, limit=20)["places"]}
        assert 5 < ranked["own:site-00000"]["distance"] < 7, ranked.get("own:site-00000")

    # export writes what import reads: the same places.
    exported = tmp_path / "exported.geojson"
    assert placectl(placectl_bin, placed, "own", "export", exported).returncode == 0
    again = json.loads(exported.read_text())["features"]
    assert sorted(f["properties"]["id"] for f in again) == sorted(f["properties"]["id"] for f in features)
    here_again = next(f for f in again if f["properties"]["id"] == "own:here")
    assert here_again["properties"]["name:sv"] == "Här" and here_again["properties"]["radius"] == 30

    # Own places outlive a restart and a Refresh onto the places file.
    placed.stop()
    placed = start_placed()
    with placed.open() as places:
        places.Refresh()
        assert len(places.OwnPlaces()["places"]) == 10_001
        assert "own:here" in [p["id"] for p in places.Current(limit=20)["places"]]


def test_add_remove_and_list(start_placed, placectl_bin):
    placed = start_placed()
    out = placectl(placectl_bin, placed, "own", "add", "gate-3", "Gate 3", "--at", "%f,%f" % CENTRE,
                   "--radius", 15, "--kind", "gate")
    assert out.returncode == 0 and out.stdout == "put own:gate-3\n", out.stderr
    listed = placectl(placectl_bin, placed, "own", "list")
    assert listed.stdout.split() == ["own:gate-3", "Gate", "3", "gate", "15", "m", "around", "60.169900,24.938400"]
    bad = placectl(placectl_bin, placed, "own", "add", "gate-4", "Gate 4", "--at", "%f,%f" % CENTRE,
                   "--radius", 20000)
    assert bad.returncode == 2 and "own:gate-4: radius 20000.0 m out of range: 1 to 10000 m" in bad.stderr
    removed = placectl(placectl_bin, placed, "own", "remove", "gate-3", "own:nothing")
    assert removed.returncode == 0 and removed.stdout == "deleted 1 of 2\n"
    assert json.loads(placectl(placectl_bin, placed, "--json", "own", "list").stdout) == {"places": []}


def test_a_reader_may_list_but_not_change(start_placed, open_directory, reader_group, placed_group):  # noqa: F811
    placed = start_placed(directory=open_directory)  # after the groups exist: placed resolves them at start

    def attempt():
        from harness import VarlinkSocket
        results = {}
        for method, parameters in [("OwnPlaces", {}), ("PutPlaces", {"places": [circle("r", *CENTRE, 10)]}),
                                   ("DeletePlaces", {"ids": ["own:w"]})]:
            with VarlinkSocket(placed.socket) as connection:
                try:
                    results[method] = connection.call(PLACES + "." + method, **parameters)
                except VarlinkReplyError as error:
                    results[method] = {"error": error.name}
        return results

    reader = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [reader_group], attempt)
    assert reader["OwnPlaces"] == {"places": []}
    assert reader["PutPlaces"] == {"error": PLACES + ".PermissionDenied"}
    assert reader["DeletePlaces"] == {"error": PLACES + ".PermissionDenied"}
    stranger = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [], attempt)
    assert all(r == {"error": PLACES + ".PermissionDenied"} for r in stranger.values()), stranger
    writer = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [placed_group], attempt)
    assert writer["PutPlaces"] == {"count": 1} and writer["DeletePlaces"] == {"count": 0}
    with placed.open() as places:
        assert [f["properties"]["id"] for f in places.OwnPlaces()["places"]] == ["own:r"]


@pytest.mark.parametrize("broken, message", [
    (lambda f: f["geometry"]["coordinates"][0].pop(), "feature 2 (own:b-00002): polygon 0 ring 0 is not closed"),
    (lambda f: f["geometry"]["coordinates"][0].__setitem__(slice(1, 3), f["geometry"]["coordinates"][0][2:0:-1]),
     "feature 2 (own:b-00002): polygon 0 ring 0 crosses itself"),
    (lambda f: f["properties"].__setitem__("id", "own:b-00001"), "feature 2 (own:b-00001): the same id as feature 1"),
    (lambda f: f["properties"].__setitem__("name", ""), "feature 2 (own:b-00002): name is empty"),
    (lambda f: f["properties"].__setitem__("id", "own:with space"), "feature 2 (own:with space): invalid id"),
])
def test_bad_geojson_is_named_and_nothing_is_applied(start_placed, placectl_bin, tmp_path, broken, message):
    placed = start_placed()
    with placed.open() as places:
        places.PutPlaces([circle("kept", *CENTRE, 10)])
    features = [square("b-%05d" % i, CENTRE[0] + i * 1e-3, CENTRE[1], 20) for i in range(4)]
    broken(features[2])
    path = write_collection(tmp_path / "bad.geojson", features)
    out = placectl(placectl_bin, placed, "own", "import", path)
    assert out.returncode == 1 and message in out.stderr, out.stderr
    # The daemon refuses the same batch by itself, naming the feature in the error's parameters.
    from harness import VarlinkSocket
    with VarlinkSocket(placed.socket) as connection:
        with pytest.raises(VarlinkReplyError) as refused:
            connection.call(PLACES + ".PutPlaces", places=features)
    assert refused.value.name == PLACES + ".InvalidOwnPlace"
    assert refused.value.parameters["feature"] == 2 and message in refused.value.parameters["reason"]
    with placed.open() as places:
        assert [f["properties"]["id"] for f in places.OwnPlaces()["places"]] == ["own:kept"]


def test_not_geojson_is_refused(start_placed, placectl_bin, tmp_path):
    placed = start_placed()
    path = tmp_path / "bad.geojson"
    path.write_bytes(b'{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": '
                     b'{"id": "own:a", "name": "\xc3\x28", "radius": 3}, "geometry": {"type": "Point", '
                     b'"coordinates": [24.9, 60.1]}}]}')
    out = placectl(placectl_bin, placed, "own", "import", path)
    assert out.returncode == 1 and "invalid GeoJSON: JSON: invalid UTF-8 at byte" in out.stderr, out.stderr
    path.write_text('{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": '
                    '{"id": "own:a", "name": "A"}, "geometry": {"type": "LineString", "coordinates": []}}]}')
    out = placectl(placectl_bin, placed, "own", "import", path)
    assert out.returncode == 1 and "feature 0 (own:a): invalid GeoJSON: geometry LineString" in out.stderr


def test_details_of_own_places_are_served_and_evaluated_like_osm_places(start_placed, placectl_bin, tmp_path):
    placed = start_placed("--time-zone", "Europe/Helsinki")
    shop = circle("shop", *CENTRE, 25, kind="shop=convenience", opening_hours="Mo-Fr 08:00-20:00",
                  phone=["+358 9 111", "+358 9 222"], website="https://shop.example", wheelchair="yes",
                  **{"diet:vegan": "yes", "contact:email": "shop@example.fi", "colour": "green"})
    closed = circle("closed", *CENTRE, 25, kind="shop=convenience", opening_hours="off")
    always = circle("always", *CENTRE, 25, kind="shop=convenience", opening_hours="24/7")
    with placed.open() as places:
        assert places.PutPlaces([shop, closed, always])["count"] == 3
        monday = places.Details(id="own:shop", time="2026-12-07T10:00:00+02:00")["place"]
        assert monday["open_now"] is True and monday["next_change"] == "2026-12-07T20:00:00+02:00"
        assert monday["intervals"] == [{"start": "08:00", "end": "20:00", "state": "open"}]
        assert monday["phone"] == ["+358 9 111", "+358 9 222"] and monday["email"] == ["shop@example.fi"]
        assert monday["website"] == ["https://shop.example"] and monday["wheelchair"] == "yes"
        assert monday["diet"] == {"vegan": "yes"} and monday["opening_hours"] == "Mo-Fr 08:00-20:00"
        assert "colour" not in monday
        sunday = places.Details(id="own:shop", time="2026-12-06T12:00:00+02:00", fields=["open_now", "id"])
        assert sunday["place"] == {"id": "own:shop", "open_now": False}
        # Rankings with a field mask carry them as for an OSM place.
        ranked = {p["id"]: p for p in places.Current(limit=20, fields=["id", "opening_hours", "likelihood"])
                  ["places"]}
        assert ranked["own:shop"]["opening_hours"] == "Mo-Fr 08:00-20:00"
        assert "opening_hours" not in places.Current(limit=20)["places"][0], "no mask: the keys as before"
        # Always closed and always open, the same shape at the same spot: ClosedWeight= (0.05) times
        # the other's share, whatever the time of the run.
        ratio = ranked["own:closed"]["likelihood"] / ranked["own:always"]["likelihood"]
        assert ratio == pytest.approx(0.05), ratio
        # They come back in OwnPlaces as OSM's strings, and out of placectl own export the same.
        listed = {f["properties"]["id"]: f["properties"] for f in places.OwnPlaces()["places"]}
        assert listed["own:shop"]["phone"] == "+358 9 111;+358 9 222"
        assert listed["own:shop"]["email"] == "shop@example.fi" and "colour" not in listed["own:shop"]
        with pytest.raises(VarlinkReplyError) as refused:
            from harness import VarlinkSocket
            with VarlinkSocket(placed.socket) as connection:
                connection.call(PLACES + ".PutPlaces", places=[circle("bad", *CENTRE, 5, opening_hours="Mo-Xx 9-5")])
        assert refused.value.name == PLACES + ".InvalidOwnPlace"
        assert "feature 0 (own:bad): opening_hours does not parse" in refused.value.parameters["reason"]
        with pytest.raises(varlink.VarlinkError) as unknown:
            places.Details(id="own:nothing")
        assert unknown.value.error() == PLACES + ".UnknownPlace"
    out = placectl(placectl_bin, placed, "own", "export", tmp_path / "out.geojson")
    assert out.returncode == 0, out.stderr
    exported = {f["properties"]["id"]: f for f in json.loads((tmp_path / "out.geojson").read_text())["features"]}
    assert exported["own:shop"]["properties"]["opening_hours"] == "Mo-Fr 08:00-20:00"
    out = placectl(placectl_bin, placed, "details", "own:shop")
    assert out.returncode == 0 and "Mo-Fr 08:00-20:00" in out.stdout and "+358 9 111" in out.stdout, out


def test_kill_9_during_a_put_leaves_all_of_it_or_none(start_placed, tmp_path):
    """PutPlaces of 10,000 sites, placed killed at a different moment each round: after the restart the
    batch is wholly there or wholly absent, and a batch acknowledged before the kill is always there."""
    from harness import VarlinkSocket
    placed = start_placed()
    with placed.open() as places:
        places.PutPlaces([circle("acknowledged", *CENTRE, 10)])
    outcomes = []
    for round, delay in enumerate([0.0, 0.05, 0.1, 0.2, 0.4, 0.8]):
        batch = sites(10_000, prefix="r%d" % round)
        connection = VarlinkSocket(placed.socket)
        connection.send(PLACES + ".PutPlaces", {"places": batch})
        time.sleep(delay)
        placed.kill()
        connection.sock.close()
        placed = start_placed()
        with placed.open(timeout=30) as places:
            ids = {f["properties"]["id"] for f in places.OwnPlaces()["places"]}
        assert "own:acknowledged" in ids
        mine = {i for i in ids if i.startswith("own:r%d-" % round)}
        assert len(mine) in (0, 10_000), (delay, len(mine))
        outcomes.append(len(mine))
        if mine:  # clear the round's batch for the next
            with placed.open(timeout=30) as places:
                places.DeletePlaces(sorted(mine))
    print("kill -9 rounds (sites present after restart):", outcomes)


ENTERED = "c5b78abef54147e38657f701bf308b8a"
LEFT = "c9fa93b161804429a62144b0e14ef73f"


def test_a_drive_through_three_sites_enters_and_leaves_each_on_every_interface(placed_bin, places_db, tmp_path):
    """gpsfake drives east at 5 m/s through three own places of 100 m radius: each is entered and left
    once, seen on varlink Watch (transition), as D-Bus Entered/Left signals and in the journal with
    their MESSAGE_IDs."""
    import pathlib
    import shutil
    import tempfile
    import threading

    import nmea
    from harness import GpsFake, JournaledPlaced, VarlinkSocket, free_port, open_varlink, private_bus

    start = (60.1699, 24.93)
    drive = tmp_path / "drive.nmea"
    nmea.stop_and_go(drive, start, [("stop", 30), ("go", 640, 90, 5), ("stop", 60)])
    sites = []
    for key, metres in [("a", 600), ("b", 1400), ("c", 2400)]:
        centre = nmea.WGS84.Direct(*start, 90, metres)
        sites.append(circle(key, centre["lat2"], centre["lon2"], 100))
    conf = tmp_path / "placed.conf"
    # gpsfake replays 50 epochs a second: the drive's 20 s inside a site pass in 0.4 s, so no dwell.
    conf.write_text("[OwnPlaces]\nBoundaryMargin=5\nBoundaryDwell=0\n")
    public = tempfile.mkdtemp(prefix="placed-own-")
    bus, address = private_bus(pathlib.Path(public))
    shutil.copy(places_db, tmp_path / "places.db")
    port = free_port()
    placed = JournaledPlaced(placed_bin, tmp_path / "places.db", tmp_path, "--bus", "session", "--gpsd",
                             "localhost:%d" % port, "--gpsd-timeout", "5", "--config", conf,
                             env={"DBUS_SESSION_BUS_ADDRESS": address})
    monitor = subprocess.Popen(["gdbus", "monitor", "--address", address, "--dest", "io.placed.Placed1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    heard = []
    reader = threading.Thread(target=lambda: heard.extend(monitor.stdout), daemon=True)
    reader.start()
    gps = None
    try:
        with open_varlink(placed.socket) as places:
            assert places.PutPlaces(sites) == {"count": 3}
        watch = VarlinkSocket(placed.socket, timeout=60)
        watch.send(PLACES + ".Watch", more=True)
        watch.reply()  # the current state
        gps = GpsFake(drive, port)
        transitions = []
        deadline = time.monotonic() + 90
        while len(transitions) < 6 and time.monotonic() < deadline:
            update = watch.reply()
            if "transition" in update:
                transitions.append(update["transition"])
        assert [(t["event"], t["id"]) for t in transitions] == [
            ("enter", "own:a"), ("leave", "own:a"), ("enter", "own:b"), ("leave", "own:b"),
            ("enter", "own:c"), ("leave", "own:c")], transitions
        for t in transitions:
            crossed = nmea.WGS84.Inverse(*start, t["location"]["latitude"], t["location"]["longitude"])["s12"]
            centre = {"own:a": 600, "own:b": 1400, "own:c": 2400}[t["id"]]
            # Counted once the fix's circle and the margin are past the edge: 5 m + its 95 % radius.
            beyond = 5 + t["location"].get("accuracy", 25)
            expected = centre - 100 + beyond if t["event"] == "enter" else centre + 100 + beyond
            assert expected - 1 <= crossed <= expected + 15, (t, crossed, expected)
        entered = placed.entries("MESSAGE_ID=%s" % ENTERED, count=3)
        left = placed.entries("MESSAGE_ID=%s" % LEFT, count=3)
        assert [e["PLACE_ID"] for e in entered] == ["own:a", "own:b", "own:c"]
        assert [e["TRANSITION"] for e in left] == ["leave"] * 3
        time.sleep(0.5)
        monitor.terminate()
        reader.join(10)
        signals = [line for line in heard if ".Entered" in line or ".Left" in line]
        assert [".Entered" in line for line in signals] == [True, False] * 3, signals
        assert "own:b" in signals[2] and "'event': <'enter'>" in signals[2]
    finally:
        if monitor.poll() is None:
            monitor.kill()
        if gps:
            gps.stop()
        assert placed.stop() == 0
        bus.kill()
        bus.wait()
        shutil.rmtree(public, ignore_errors=True)
