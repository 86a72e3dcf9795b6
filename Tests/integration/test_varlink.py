"""The io.placed.Places varlink interface against the PyPI `varlink` client and raw NUL-framed JSON:
introspection, every method, the Watch stream, named and standard errors, replies that match the
interface definition to the letter."""
import datetime
import json
import math
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time

import pytest
import varlink

from conftest import HELSINKI, ROOT
from harness import HELSINKI_CENTER, PLACES, VarlinkReplyError, conforms

IDL = (ROOT / "etc" / "io.placed.Places.varlink").read_text()
INTERFACE = varlink.Interface(IDL)
FAR_AWAY = (60.1656, 24.9510)  # by the Esplanadi, ~900 m south-east: none of its places rank at the centre
POSITIONS = [(60.1699, 24.9384), (60.1719, 24.9414), (60.1675, 24.9500), (60.1660, 24.9370), (60.1770, 24.9520),
             (60.1650, 24.9450)]  # inside the extract


def returns(method, reply):
    """Problems with `reply` as the output of `method`."""
    return conforms(INTERFACE, INTERFACE.members[method].out_type, reply, method)


def rank_message(lat, lon, limit=20, **more):
    parameters = {"latitude": lat, "longitude": lon, "limit": limit, **more}
    return json.dumps({"method": PLACES + ".Rank", "parameters": parameters}).encode() + b"\0"


def raw_reply(raw):
    """The next reply's bytes as the daemon wrote them (without the NUL)."""
    while (end := raw.buffer.find(b"\0")) < 0:
        raw.feed()
    message, raw.buffer = raw.buffer[:end], raw.buffer[end + 1:]
    return message


def rank_bytes(raw, lat, lon, **options):
    raw.send_raw(rank_message(lat, lon, **options))
    return raw_reply(raw)


def error_conforms(error):
    name = error.error() if isinstance(error, varlink.VarlinkError) else error.name
    parameters = error.parameters() if isinstance(error, varlink.VarlinkError) else error.parameters
    assert name.startswith(PLACES + "."), name
    member = INTERFACE.members[name.rsplit(".", 1)[1]]
    assert conforms(INTERFACE, member.type, parameters, name) == []
    return name, parameters


def test_introspection_returns_the_shipped_interface(start_placed):
    placed = start_placed()
    with placed.open("org.varlink.service") as service:
        info = service.GetInfo()
        assert info["interfaces"] == ["org.varlink.service", PLACES]
        assert info["product"] == "placed" and info["version"]
        assert service.GetInterfaceDescription(PLACES)["description"] == IDL.rstrip("\n")
        # The service interface itself is described too, and parses.
        described = varlink.Interface(service.GetInterfaceDescription("org.varlink.service")["description"])
        assert {"GetInfo", "GetInterfaceDescription"} <= set(described.members)
        with pytest.raises(varlink.InterfaceNotFound):
            service.GetInterfaceDescription("io.placed.Nothing")
    methods = {name for name, member in INTERFACE.members.items() if isinstance(member, varlink.scanner._Method)}
    assert methods == {"Current", "Rank", "Details", "Select", "Refresh", "History", "Status", "Watch", "Map"}


def test_methods_answer_the_pypi_client_as_the_interface_declares(start_placed):
    placed = start_placed()
    with placed.open() as places:
        current = places.Current()
        assert returns("Current", current) == []
        assert current["generation"] == 1 and current["stale"] is False
        assert (current["location"]["latitude"], current["location"]["longitude"]) == (60.1699, 24.9384)
        assert current["location"]["accuracy"] == 10 and current["location"]["age"] >= 0
        ranked = current["places"]
        assert len(ranked) == 5, "the default list length"
        likelihoods = [p["likelihood"] for p in ranked]
        assert likelihoods == sorted(likelihoods, reverse=True)
        assert all(0 <= x <= 1 for x in likelihoods) and sum(likelihoods) <= 1 + 1e-9
        assert all(p["attribution"] == "© OpenStreetMap contributors" for p in ranked)
        assert all(p["id"].startswith(("osm:node/", "osm:way/", "osm:relation/")) for p in ranked)

        longest = places.Current(limit=20)
        assert returns("Current", longest) == []
        assert longest["places"][:5] == ranked and len(longest["places"]) == 20

        elsewhere = places.Rank(FAR_AWAY[0], FAR_AWAY[1], 20.0, 3)
        assert returns("Rank", elsewhere) == []
        assert len(elsewhere["places"]) == 3
        assert not {p["id"] for p in elsewhere["places"]} & {p["id"] for p in longest["places"]}
        assert all(p["distance"] < 250 for p in elsewhere["places"])

        status = places.Status()
        assert returns("Status", status) == []
        assert status["source"] == "static" and status["generation"] == 1 and status["distance_filter"] == 50
        assert status["places"] > 1500 and "marker" not in status
        assert places.Current()["generation"] == 1, "Rank changes nothing"

        assert places.History() == {"markers": []}
        places.Refresh()
        assert places.Current()["generation"] == 2


def test_select_returns_the_marker_and_history_lists_it(start_placed):
    placed = start_placed()
    with placed.open() as places:
        current = places.Current()
        before = datetime.datetime.now(datetime.timezone.utc)
        marker = places.Select(current["places"][1]["id"])["marker"]
        assert returns("Select", {"marker": marker}) == []
        ranked = dict(current["places"][1])
        assert ranked.pop("address_source") in {"own", "building", "nearby", "street", "none"}
        assert marker["place"] == ranked, "the place as it stood in the ranking, but where its address came from"
        assert marker["generation"] == 1 and marker["selection"] == 1
        assert {k: marker["location"][k] for k in ("latitude", "longitude", "accuracy")} == \
            {k: current["location"][k] for k in ("latitude", "longitude", "accuracy")}
        when = datetime.datetime.strptime(marker["time"], "%Y-%m-%dT%H:%M:%S.%f%z")
        assert abs((when - before).total_seconds()) < 5
        second = places.Select(current["places"][0]["id"])["marker"]
        assert second["selection"] == 2
        history = places.History()
        assert returns("History", history) == []
        assert history["markers"] == [second, marker], "newest first"
        assert places.Status()["marker"] == second


def test_watch_sends_the_state_then_each_ranking_and_marker(start_placed):
    placed = start_placed()
    with placed.open() as watcher, placed.open() as places:
        stream = watcher.Watch(_more=True)
        first = next(stream)
        assert returns("Watch", first) == []
        assert first["generation"] == 1 and first["places"] == places.Current()["places"]
        assert "marker" not in first

        places.Refresh()
        ranking = next(stream)
        assert returns("Watch", ranking) == []
        assert ranking["generation"] == 2 and ranking["places"] == places.Current()["places"]

        marker = places.Select(ranking["places"][2]["id"])["marker"]
        placed_event = next(stream)
        assert returns("Watch", placed_event) == []
        assert placed_event["marker"] == marker and placed_event["generation"] == 2

        places.Refresh()
        assert next(stream)["generation"] == 3

    # A watcher arriving later learns the marker in its first reply.
    with placed.open() as late:
        state = next(late.Watch(_more=True))
        assert state["generation"] == 3 and state["marker"]["selection"] == marker["selection"]


def test_watch_without_more_is_refused(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(PLACES + ".Watch")
        assert refused.value.name == "org.varlink.service.ExpectedMore"
        assert raw.call(PLACES + ".Current")["generation"] == 1, "the connection still serves"


@pytest.mark.parametrize("method, parameters, error", [
    ("Select", {"id": "osm:node/1"}, ("UnknownPlace", {"id": "osm:node/1"})),
    ("Select", {"id": "nonsense"}, ("UnknownPlace", {"id": "nonsense"})),
    ("Current", {"limit": 0}, ("InvalidLimit", {"limit": 0, "maximum": 20})),
    ("Current", {"limit": 21}, ("InvalidLimit", {"limit": 21, "maximum": 20})),
    ("Rank", {"latitude": 91.0, "longitude": 24.9}, ("InvalidPosition", {"latitude": 91, "longitude": 24.9})),
    ("Rank", {"latitude": 60.17, "longitude": 181.0}, ("InvalidPosition", {"latitude": 60.17, "longitude": 181})),
    ("Rank", {"latitude": 60.17, "longitude": 24.9, "accuracy": -1.0},
     ("InvalidPosition", {"latitude": 60.17, "longitude": 24.9, "accuracy": -1})),
    ("History", {"limit": 0}, ("InvalidLimit", {"limit": 0, "maximum": 1000})),
    ("History", {"limit": 1001}, ("InvalidLimit", {"limit": 1001, "maximum": 1000})),
])
def test_bad_requests_get_named_errors(start_placed, method, parameters, error):
    placed = start_placed()
    with placed.open() as places:
        with pytest.raises(varlink.VarlinkError) as refused:
            getattr(places, method)(**parameters)
        name, got = error_conforms(refused.value)
        assert name == PLACES + "." + error[0]
        if error[1] is not None:
            assert got == error[1]
        assert places.Current()["generation"] == 1, "the connection still serves"
        assert places.History() == {"markers": []}, "nothing was recorded"


def test_select_of_a_place_not_ranked_near_is_not_in_ranking(start_placed):
    placed = start_placed()
    with placed.open() as places:
        far = places.Rank(FAR_AWAY[0], FAR_AWAY[1], None, 1)["places"][0]["id"]
        with pytest.raises(varlink.VarlinkError) as refused:
            places.Select(far)
        assert error_conforms(refused.value) == (PLACES + ".NotInRanking", {"id": far})
        assert places.History() == {"markers": []} and "marker" not in places.Status()


@pytest.mark.parametrize("method, parameters, bad", [
    ("Current", {"limit": "5"}, "limit"),
    ("Current", {"limit": 2.5}, "limit"),
    ("Current", {"count": 5}, "count"),
    ("Select", {"id": 17}, "id"),
    ("Select", {}, "id"),
    ("Select", {"id": None}, "id"),
    ("Rank", {"latitude": "60.17", "longitude": 24.9}, "latitude"),
    ("Rank", {"latitude": 60.17}, "longitude"),
    ("History", {"before": True}, "before"),
    ("Refresh", {"now": True}, "now"),
])
def test_wrong_parameters_are_invalid_parameter(start_placed, method, parameters, bad):
    placed = start_placed()
    with placed.raw() as raw:
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(PLACES + "." + method, **parameters)
        assert (refused.value.name, refused.value.parameters) == \
            ("org.varlink.service.InvalidParameter", {"parameter": bad})
        assert raw.call(PLACES + ".Current")["generation"] == 1, "the connection still serves"
        assert raw.call(PLACES + ".History") == {"markers": []}


@pytest.mark.parametrize("method, error, parameters", [
    (PLACES + ".Nothing", "org.varlink.service.MethodNotFound", {"method": PLACES + ".Nothing"}),
    ("org.varlink.service.Nothing", "org.varlink.service.MethodNotFound", {"method": "org.varlink.service.Nothing"}),
    ("io.placed.Other.Current", "org.varlink.service.InterfaceNotFound", {"interface": "io.placed.Other"}),
    ("Current", "org.varlink.service.InterfaceNotFound", {"interface": ""}),
])
def test_unknown_methods_and_interfaces(start_placed, method, error, parameters):
    placed = start_placed()
    with placed.raw() as raw:
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(method)
        assert (refused.value.name, refused.value.parameters) == (error, parameters)
        assert raw.call(PLACES + ".Current")["generation"] == 1, "the connection still serves"


def test_oneway_and_pipelined_calls_are_answered_in_order(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        # Three calls in one write: a oneway Refresh (no reply), then two answered in order.
        raw.send_raw(b"".join(
            (b'{"method":"%s.Refresh","oneway":true}\0' % PLACES.encode(),
             b'{"method":"%s.Current","parameters":{"limit":1}}\0' % PLACES.encode(),
             b'{"method":"%s.Status"}\0' % PLACES.encode())))
        current, status = raw.reply(), raw.reply()
        assert current["generation"] == 2 and len(current["places"]) == 1
        assert status["generation"] == 2 and status["source"] == "static"
        assert not math.isnan(status["distance_filter"])


def test_pipelined_rank_and_other_calls_are_answered_in_order(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        rank_bytes(raw, *POSITIONS[0])
        raw.send_raw(rank_message(*POSITIONS[1]) + rank_message(*POSITIONS[2])
                     + json.dumps({"method": PLACES + ".Status"}).encode() + b"\0" + rank_message(*POSITIONS[3])
                     + json.dumps({"method": PLACES + ".Rank", "parameters": {"latitude": 60.17, "longitude": 24.94},
                                   "oneway": True}).encode() + b"\0"
                     + json.dumps({"method": "org.varlink.service.GetInfo"}).encode() + b"\0")
        replies = [json.loads(raw_reply(raw)) for _ in range(5)]
        assert [bool(r["parameters"].get("places")) for r in replies[:2]] == [True, True]
        assert "generation" in replies[2]["parameters"] or "stale" in replies[2]["parameters"]
        assert replies[3]["parameters"]["places"]
        assert replies[4]["parameters"]["product"] == "placed", "the oneway call got no reply"


def test_rank_replies_on_a_long_lived_connection_are_a_fresh_ones_byte_for_byte(start_placed):
    placed = start_placed()
    fresh_replies = []
    for lat, lon in POSITIONS:
        with placed.raw() as fresh:
            fresh_replies.append(rank_bytes(fresh, lat, lon, accuracy=25.0, language="sv"))
    with placed.raw() as raw:
        for (lat, lon), expected in zip(POSITIONS, fresh_replies):
            assert rank_bytes(raw, lat, lon, accuracy=25.0, language="sv") == expected
        # Errors by name, and the connection serves on after them.
        for bad in [dict(lat=91.0, lon=0.0), dict(lat=60.17, lon=24.94, limit=-1),
                    dict(lat=60.17, lon=24.94, accuracy=-5.0), dict(lat=60.17, lon=24.94, unknown=1)]:
            with placed.raw() as fresh:
                expected = rank_bytes(fresh, **bad)
            assert json.loads(expected)["error"]
            assert rank_bytes(raw, **bad) == expected
        assert json.loads(rank_bytes(raw, *POSITIONS[1]))["parameters"]["places"]


def test_one_connection_serves_rank_then_every_other_call(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        ranked = json.loads(rank_bytes(raw, *POSITIONS[0]))["parameters"]["places"]
        json.loads(rank_bytes(raw, *POSITIONS[0]))
        current = raw.call(PLACES + ".Current")
        near = current["places"][0]["id"]
        marker = raw.call(PLACES + ".Select", id=near)["marker"]
        assert marker["place"]["id"] == near
        info = raw.call("org.varlink.service.GetInfo")
        assert PLACES in info["interfaces"]
        # Rank again (the pick now weighs in), then a Watch stream on the same connection. (A pick's weight
        # decays with the wall clock, so likelihoods differ in their last digits from one call to the next:
        # the places and their order are compared.)
        def ids(reply):
            return [p["id"] for p in json.loads(reply)["parameters"]["places"]]

        with placed.raw() as fresh:
            expected = ids(rank_bytes(fresh, *POSITIONS[0]))
        assert json.loads(rank_bytes(raw, *POSITIONS[0]))["parameters"]["places"] != ranked, "the pick weighs in"
        assert ids(rank_bytes(raw, *POSITIONS[0])) == expected
        raw.send(PLACES + ".Watch", more=True)
        first = raw.receive()
        assert first["continues"] is True and first["parameters"]["marker"]["place"]["id"] == near
        with placed.raw() as control:
            control.call(PLACES + ".Refresh")
        message = raw.receive()
        assert message["continues"] is True and message["parameters"]["generation"] == first["parameters"][
            "generation"] + 1


def test_a_places_file_placed_cannot_load_is_no_reason_to_exit(start_placed, places_db, tmp_path):
    # A file of the schema before this one, as an upgrade leaves it.
    shutil.copy(places_db, tmp_path / "places.db")
    db = sqlite3.connect(tmp_path / "places.db")
    with db:
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    db.close()
    placed = start_placed("--static", HELSINKI_CENTER, static=None)
    placed.wait_for(r"error: cannot load the places: .* schema version 6 \(found 4\); rankings stay empty until "
                    r"it is upgraded \(placectl upgrade, which refreshes placed\)")
    with placed.open() as places:
        assert places.Status()["places"] == 0
        assert places.Current()["places"] == []
        with pytest.raises(varlink.VarlinkError) as empty:
            places.Rank(60.1699, 24.9384, 10)
        assert empty.value.error() == PLACES + ".NoPlaces"

        shutil.copy(places_db, tmp_path / "new.db")
        os.rename(tmp_path / "new.db", tmp_path / "places.db")
        places.Refresh()
        assert places.Status()["places"] > 1000
        assert len(places.Current()["places"]) == 5


def test_refresh_reloads_the_places_only_when_the_file_changed(start_placed, places_db, tmp_path):
    placed = start_placed()
    with placed.open() as places:
        places.Refresh()
        assert places.Current()["generation"] == 2
        assert not [line for line in placed.lines if "loaded" in line], "the same file is not reloaded"

        # An import renames a new file into place: the next Refresh loads it.
        shutil.copy(places_db, tmp_path / "new.db")
        os.rename(tmp_path / "new.db", tmp_path / "places.db")
        places.Refresh()
        placed.wait_for(r"Refresh: loaded \d+ places")
        assert places.Current()["generation"] == 3

        # A broken file is the caller's StoreFailed, and the loaded places keep serving.
        (tmp_path / "broken.db").write_bytes(b"not a database" * 100)
        os.rename(tmp_path / "broken.db", tmp_path / "places.db")
        with pytest.raises(varlink.VarlinkError) as failed:
            places.Refresh()
        assert failed.value.error() == PLACES + ".StoreFailed"
        assert re.search(r"cannot load .*places\.db: .*; keeping the [\d,]+ places loaded",
                         failed.value.parameters()["reason"])
        placed.wait_for(r"Refresh: keeping the \d+ places loaded")
        current = places.Current()
        assert current["generation"] == 3 and len(current["places"]) == 5


def test_refresh_switching_files_while_rank_clients_run(start_placed, placectl_bin, tmp_path):
    placed = start_placed()
    other = tmp_path / "other.db"
    out = subprocess.run([placectl_bin, "import", HELSINKI, "--db", other, "--no-map"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    spare = tmp_path / "spare.db"
    shutil.copy(tmp_path / "places.db", spare)
    with placed.raw() as reference:
        expected = {json.loads(rank_bytes(reference, *p))["parameters"]["places"][0]["id"] for p in POSITIONS}
    stop, failures, calls = threading.Event(), [], [0]

    def client(number):
        try:
            with placed.raw(timeout=30) as raw:
                n = 0
                while not stop.is_set():
                    reply = json.loads(rank_bytes(raw, *POSITIONS[(number + n) % len(POSITIONS)]))
                    places = reply.get("parameters", {}).get("places")
                    if not places or places[0]["id"] not in expected:
                        failures.append((number, reply))
                        return
                    n += 1
                calls[0] += n
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append((number, repr(error)))

    workers = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    with placed.raw() as control:
        for n in range(12):
            # The same places, from another file each time (one without the map layer, then a copy).
            source = other if n % 2 == 0 else spare
            staged = tmp_path / "staged.db"
            shutil.copy(source, staged)
            os.rename(staged, tmp_path / "places.db")
            control.call(PLACES + ".Refresh")
            time.sleep(0.05)
    stop.set()
    for worker in workers:
        worker.join()
    assert failures == []
    assert calls[0] > 100
    placed.wait_for(r"Refresh: loaded [\d,]+ places", count=12)
    assert placed.proc.poll() is None


# --- Map: the map layer around a position ------------------------------------------------------

KINDS = {"street", "path", "rail", "building", "water", "green", "square"}


def box_distance(feature, latitude, longitude):
    """Metres from a point to a feature's bounding box (equirectangular: exact enough within 1 km)."""
    def positions(coordinates):
        if isinstance(coordinates[0], (int, float)):
            yield coordinates
        else:
            for inner in coordinates:
                yield from positions(inner)
    points = list(positions(feature["geometry"]["coordinates"]))
    lons, lats = [p[0] for p in points], [p[1] for p in points]
    north = max(min(latitude, max(lats)), min(lats)) - latitude
    east = max(min(longitude, max(lons)), min(lons)) - longitude
    return math.hypot(north * 111_195, east * 111_195 * math.cos(math.radians(latitude)))


def test_map_answers_the_pypi_client_as_the_interface_declares(start_placed):
    placed = start_placed()
    latitude, longitude = 60.1699, 24.9384
    with placed.open() as places:
        reply = places.Map(latitude, longitude, 150.0)
        assert returns("Map", reply) == []
        features = reply["features"]
        assert 50 < len(features) < 1000
        assert {f["properties"]["kind"] for f in features} >= {"street", "building"}
        assert {f["properties"]["kind"] for f in features} <= KINDS
        assert all(f["type"] == "Feature" and f["id"].startswith(("osm:way/", "osm:relation/")) for f in features)
        assert {f["geometry"]["type"] for f in features} <= {"LineString", "Polygon", "MultiPolygon"}
        # Within the radius, nearest first (the box distance placed sorts by, to 1 m).
        distances = [box_distance(f, latitude, longitude) for f in features]
        assert max(distances) <= 151
        assert all(a <= b + 1 for a, b in zip(distances, distances[1:]))
        streets = {f["properties"].get("name") for f in features if f["properties"]["kind"] == "street"}
        assert "Mannerheimintie" in streets
        # A wider circle holds what the narrower one did; radius 0 the features at the point.
        wider = {f["id"] for f in places.Map(latitude, longitude, 300.0)["features"]}
        assert {f["id"] for f in features} < wider
        assert len(places.Map(latitude, longitude, 0.0)["features"]) < len(features)
        assert places.Status()["generation"] == 1, "Map changes nothing"


@pytest.mark.parametrize("parameters, error", [
    ({"latitude": 60.17, "longitude": 24.94, "radius": 1001.0}, ("InvalidRadius", {"radius": 1001, "maximum": 1000})),
    ({"latitude": 60.17, "longitude": 24.94, "radius": -1.0}, ("InvalidRadius", {"radius": -1, "maximum": 1000})),
    ({"latitude": 95.0, "longitude": 24.94, "radius": 100.0}, ("InvalidPosition", {"latitude": 95, "longitude": 24.94})),
    ({"latitude": 60.17, "longitude": 181.0, "radius": 100.0},
     ("InvalidPosition", {"latitude": 60.17, "longitude": 181})),
])
def test_map_bounds_are_named_errors(start_placed, parameters, error):
    placed = start_placed()
    with placed.open() as places:
        with pytest.raises(varlink.VarlinkError) as refused:
            places.Map(**parameters)
        assert error_conforms(refused.value) == (PLACES + "." + error[0], error[1])
        assert places.Map(60.17, 24.94, 1000.0)["features"], "the limit itself is served"
    with placed.raw() as raw:
        for bad in ({"latitude": 60.17, "longitude": 24.94}, {"latitude": 60.17, "longitude": 24.94, "radius": "9"},
                    {"latitude": 60.17, "longitude": 24.94, "radius": 9, "language": 5},
                    {"latitude": 60.17, "longitude": 24.94, "radius": 9, "zoom": 3}):
            with pytest.raises(VarlinkReplyError) as refused:
                raw.call(PLACES + ".Map", **bad)
            assert refused.value.name == "org.varlink.service.InvalidParameter"


@pytest.mark.parametrize("latitude, longitude", [(90.0, 0.0), (-90.0, 24.94), (0.0, 180.0), (0.0, -180.0)])
def test_map_and_rank_at_the_poles_and_the_antimeridian_answer(start_placed, latitude, longitude):
    # At a pole a circle's box in degrees was ±1e13 degrees: turning it into the map index's whole
    # 1e-7 degrees trapped, and placed stopped. Far from Helsinki: nothing there, and placed stays up.
    placed = start_placed()
    with placed.open() as places:
        assert places.Map(latitude, longitude, 1000.0)["features"] == []
        assert places.Rank(latitude=latitude, longitude=longitude, accuracy=50.0)["places"] == []
        assert places.Map(60.17, 24.94, 100.0)["features"], "still serving"
    assert placed.proc.poll() is None


def test_map_of_a_file_imported_without_the_layer_is_no_map_layer(start_placed, placectl_bin, tmp_path):
    from conftest import HELSINKI
    import subprocess
    out = subprocess.run([placectl_bin, "import", HELSINKI, "--db", tmp_path / "places.db", "--no-map"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    placed = start_placed()
    with placed.open() as places:
        with pytest.raises(varlink.VarlinkError) as refused:
            places.Map(60.1699, 24.9384, 150.0)
        assert error_conforms(refused.value) == (PLACES + ".NoMapLayer", {})
        assert len(places.Current()["places"]) == 5, "the places serve without their map"


def import_with_footways(placectl_bin, directory, count, latitude, longitude, name="places.db"):
    """Imports Helsinki with `count` short footways (10 m, a few metres apart) added around a point:
    a places file is written whole by an import (its pack follows the SQLite part, so SQL that grows
    the SQLite part would write over it), so the extra features go into the extract, not the file."""
    from conftest import HELSINKI
    import subprocess
    lines = []
    for n in range(count):
        lat = latitude + (n // 60 - 30) * 4e-5
        lon = longitude + (n % 60 - 30) * 8e-5
        first, second = 90_000_000_000 + 2 * n, 90_000_000_001 + 2 * n
        lines.append("n%d v1 x%.7f y%.7f" % (first, lon, lat))
        lines.append("n%d v1 x%.7f y%.7f" % (second, lon + 1.8e-4, lat))
    lines.sort(key=lambda line: int(line.split()[0][1:]))
    lines += ["w%d v1 Thighway=footway Nn%d,n%d" % (90_000_000_000 + n, 90_000_000_000 + 2 * n,
                                                    90_000_000_001 + 2 * n) for n in range(count)]
    (directory / "footways.opl").write_text("\n".join(lines) + "\n")
    for argv in (["osmium", "cat", directory / "footways.opl", "-o", directory / "footways.osm.pbf", "--overwrite"],
                 ["osmium", "merge", HELSINKI, directory / "footways.osm.pbf", "-o", directory / "merged.osm.pbf",
                  "--overwrite"],
                 [placectl_bin, "import", directory / "merged.osm.pbf", "--db", directory / name]):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr


def test_the_largest_map_reply_reaches_a_slow_reader_and_one_more_feature_is_too_many(
        start_placed, placectl_bin, tmp_path):
    # The densest real circle, then a file with exactly 5,000 features within 1000 m of it.
    latitude, longitude = 60.1699, 24.9384
    placed = start_placed()
    with placed.open() as places:
        real = len(places.Map(latitude, longitude, 1000.0)["features"])
    assert 2000 < real < 5000
    full = tmp_path / "full"
    full.mkdir()
    import_with_footways(placectl_bin, full, 5000 - real, latitude, longitude)
    placed = start_placed(directory=full)
    wmem = int(open("/proc/sys/net/core/wmem_default").read())
    with placed.raw(timeout=20) as raw:
        raw.send(PLACES + ".Map", {"latitude": latitude, "longitude": longitude, "radius": 1000.0})
        time.sleep(1.0)  # read nothing while placed writes: the reply waits in its queue
        message = raw.receive()
        size = len(json.dumps(message, separators=(",", ":")))
        assert "error" not in message and len(message["parameters"]["features"]) == 5000
        # More than the server's default queue (256 KiB) and the socket buffer could hold.
        assert size > 256 * 1024 + wmem, size
        assert raw.call(PLACES + ".Status")["generation"] == 1, "and the connection goes on"

    # One more, in a new file renamed into place as an import does: served after the Refresh.
    import_with_footways(placectl_bin, full, 5000 - real + 1, latitude, longitude, name="new.db")
    os.rename(full / "new.db", full / "places.db")
    with placed.open() as places:
        assert len(places.Map(latitude, longitude, 1000.0)["features"]) == 5000, "the loaded file until Refresh"
        places.Refresh()
        with pytest.raises(varlink.VarlinkError) as refused:
            places.Map(latitude, longitude, 1000.0)
        assert error_conforms(refused.value) == (PLACES + ".TooManyFeatures", {"maximum": 5000})
        assert len(places.Map(latitude, longitude, 300.0)["features"]) < 5000, "a smaller radius is served"


# --- Names in the reader's language -------------------------------------------------------------

# At the European Chemicals Agency, which ranks first there: name fi, name:sv and name:en differ.
AGENCY = "osm:node/4989964844"
AT_AGENCY = "60.1657943,24.938207,5"
AGENCY_NAMES = {"fi": "Euroopan kemikaalivirasto", "sv": "Europeiska Kemikaliemyndigheten",
                "en": "European Chemicals Agency"}


def name_of(reply, place_id=AGENCY):
    return next(p["name"] for p in reply["places"] if p["id"] == place_id)


@pytest.mark.parametrize("language, expected", [
    (None, "fi"), ("", "fi"), ("sv", "sv"), ("SV", "sv"), ("sv-FI", "sv"), ("sv_FI.UTF-8", "sv"), ("en_GB.UTF-8", "en"),
    ("de", "fi"), ("C", "fi"), ("not a language", "fi"),
    # 30,000 subtags: names none, at no cost (their prefixes were a gigabyte of keys a place).
    ("sv" + "-a" * 30_000, "fi"),
], ids=lambda value: value if not isinstance(value, str) or len(value) < 40 else "sv-a-a-…")
def test_current_and_rank_name_places_in_the_language_asked_else_the_name_tag(start_placed, language, expected):
    placed = start_placed(static=AT_AGENCY)
    asked = {} if language is None else {"language": language}
    with placed.open() as places:
        current = places.Current(**asked)
        assert returns("Current", current) == []
        assert current["places"][0]["id"] == AGENCY and name_of(current) == AGENCY_NAMES[expected]
        assert current["places"][0]["address_source"] in {"own", "building", "nearby", "street", "none"}
        # By name: the PyPI client drops keyword parameters after positional ones.
        ranked = places.Rank(latitude=60.1657943, longitude=24.938207, accuracy=5.0, limit=3, **asked)
        assert name_of(ranked) == AGENCY_NAMES[expected]


def test_language_setting_names_replies_without_a_language_and_sighup_changes_it(start_placed, tmp_path):
    config = tmp_path / "placed.conf"
    config.write_text("[Places]\nLanguage=en\n")
    placed = start_placed("--config", config, static=AT_AGENCY)
    with placed.open() as places, placed.open() as default_watcher, placed.open() as swedish_watcher:
        assert name_of(places.Current()) == AGENCY_NAMES["en"]
        assert name_of(places.Current(language="")) == AGENCY_NAMES["en"], "empty: Language="
        assert name_of(places.Current(language="C")) == AGENCY_NAMES["fi"], "C: the name tags"
        assert name_of(places.Current(language="sv")) == AGENCY_NAMES["sv"], "the call's own wins"
        default, swedish = default_watcher.Watch(_more=True), swedish_watcher.Watch(language="sv", _more=True)
        assert name_of(next(default)) == AGENCY_NAMES["en"] and name_of(next(swedish)) == AGENCY_NAMES["sv"]
        places.Refresh()
        assert name_of(next(default)) == AGENCY_NAMES["en"] and name_of(next(swedish)) == AGENCY_NAMES["sv"]

        # Reloaded: the watcher that asked for no language follows Language=; the other keeps its own.
        config.write_text("[Places]\nLanguage=\n")
        placed.proc.send_signal(signal.SIGHUP)
        assert name_of(next(default)) == AGENCY_NAMES["fi"] and name_of(next(swedish)) == AGENCY_NAMES["sv"]
        assert name_of(places.Current()) == AGENCY_NAMES["fi"]


def test_watchers_of_many_languages_each_get_their_own(start_placed):
    placed = start_placed(static=AT_AGENCY)
    languages = ["sv", "sv_FI.UTF-8", "en", None, "C", "de"]
    with placed.raw() as control:
        watchers = []
        for language in languages:
            raw = placed.raw()
            raw.send(PLACES + ".Watch", {} if language is None else {"language": language}, more=True)
            raw.receive()  # the current state
            watchers.append(raw)
        control.call(PLACES + ".Refresh")
        got = [name_of(raw.receive()["parameters"]) for raw in watchers]
        assert got == [AGENCY_NAMES[k] for k in ("sv", "sv", "en", "fi", "fi", "fi")]
        for raw in watchers:
            raw.close()


def test_map_names_streets_in_the_language_asked(start_placed):
    placed = start_placed()
    with placed.open() as places:
        def streets(**language):
            return {f["properties"].get("name") for f in places.Map(latitude=60.1699, longitude=24.9384, radius=150.0, **language)["features"]
                    if f["properties"]["kind"] == "street"}
        assert "Mannerheimintie" in streets() and "Mannerheimvägen" not in streets()
        assert "Mannerheimvägen" in streets(language="sv_FI.UTF-8") and "Mannerheimintie" not in streets(language="sv")
        assert streets(language="xx") == streets(language="C") == streets()
