"""Place details (issue 34) with the real binaries: Details over varlink (the PyPI client) and its D-Bus
twin GetDetails (busctl), field masks on Current, Rank, Watch and the D-Bus *With methods, the named
errors for unknown fields, an empty mask, unknown ids and bad times, the default replies unchanged, and
`placectl details`. The import of an extract with a megabyte of opening_hours drops the value by name."""
import json
import shutil
import struct
import subprocess
import zlib

import pytest
import varlink

from harness import PLACES
from harness import Placed
from test_dbus import IFACE, NAME, NOBODY, PATH, bus, busctl, gdbus_error, reader  # noqa: F401 (bus: a fixture)

# Robert's Coffee in Forum, Helsinki: opening_hours "Mo-Fr 07:00-19:00; Sa 10:00-18:00".
CAFE = "osm:node/1381017836"
STANDARD = {"id", "name", "kind", "address", "address_source", "latitude", "longitude", "distance", "likelihood",
            "attribution"}
MONDAY_10 = "2026-12-07T10:00:00+02:00"
SUNDAY_NOON = "2026-12-06T12:00:00+02:00"


@pytest.fixture
def helsinki(start_placed):
    return start_placed("--time-zone", "Europe/Helsinki")


def error_of(call):
    with pytest.raises(varlink.VarlinkError) as raised:
        call()
    return raised.value.error(), raised.value.parameters()


def test_details_evaluates_the_hours_at_the_time_asked(helsinki):
    with helsinki.open() as places:
        monday = places.Details(id=CAFE, time=MONDAY_10)["place"]
        assert monday["opening_hours"] == "Mo-Fr 07:00-19:00; Sa 10:00-18:00"
        assert monday["open_now"] is True
        assert monday["next_change"] == "2026-12-07T19:00:00+02:00"
        assert monday["intervals"] == [{"start": "07:00", "end": "19:00", "state": "open"}]
        assert monday["phone"] == ["+358 44 972 2058"] and monday["wheelchair"] == "limited"
        assert monday["cuisine"] == ["coffee_shop"] and monday["name"] == "Robert's Coffee"
        assert "likelihood" not in monday and "distance" not in monday, "Details ranks nothing"
        sunday = places.Details(id=CAFE, time=SUNDAY_NOON)["place"]
        assert sunday["open_now"] is False and sunday["intervals"] == []
        assert sunday["next_change"] == "2026-12-07T07:00:00+02:00"
        assert places.Details(id=CAFE, time="2026-12-07T08:00:00Z") == places.Details(id=CAFE, time=MONDAY_10)
        masked = places.Details(id=CAFE, time=MONDAY_10, fields=["open_now", "website"])["place"]
        assert masked == {"open_now": True, "website": ["https://www.robertscoffee.com/cafe/forum/"]}
        # A place far from the position, in no ranking, has its details too.
        far = places.Rank(latitude=60.1675, longitude=24.9500, limit=1, fields=["id"])["places"][0]["id"]
        assert places.Details(id=far, fields=["id"])["place"] == {"id": far}


def test_masks_choose_the_keys_and_no_mask_changes_nothing(helsinki):
    with helsinki.open() as places:
        current = places.Current()
        assert current["places"] and all(set(p) <= STANDARD and {"id", "likelihood"} <= set(p)
                                          for p in current["places"])
        assert places.Current(fields=sorted(STANDARD))["places"] == current["places"]
        ranked = places.Rank(latitude=60.1699, longitude=24.9384, limit=20)
        assert all(set(p) <= STANDARD for p in ranked["places"])
        lean = places.Rank(latitude=60.1699, longitude=24.9384, limit=20, fields=["id", "likelihood"])
        assert lean["places"] == [{"id": p["id"], "likelihood": p["likelihood"]} for p in ranked["places"]]
        every = places.Rank(latitude=60.1699, longitude=24.9384, limit=20, fields=["*"])["places"]
        assert [p["id"] for p in every] == [p["id"] for p in ranked["places"]]
        # At the café itself: the closed factor may rank it below twenty others from the centre.
        spot = places.Details(id=CAFE, fields=["latitude", "longitude"])["place"]
        near = places.Rank(latitude=spot["latitude"], longitude=spot["longitude"], accuracy=5, limit=20,
                           fields=["*"])["places"]
        cafe = next(p for p in near if p["id"] == CAFE)
        assert cafe["opening_hours"] and isinstance(cafe.get("open_now", False), bool)
        assert cafe["phone"] == ["+358 44 972 2058"]
    with helsinki.raw() as raw:
        raw.send(PLACES + ".Watch", {"fields": ["id"]}, more=True)
        first = raw.receive()
        assert first["continues"] is True
        assert first["parameters"]["places"] and all(p == {"id": p["id"]} for p in first["parameters"]["places"])


def test_bad_masks_ids_and_times_are_named_errors_that_change_nothing(helsinki):
    with helsinki.open() as places:
        before = dict(places.Status(), location=None)
        position = dict(latitude=60.1699, longitude=24.9384)
        for call in [lambda f: places.Current(fields=f), lambda f: places.Rank(fields=f, **position),
                     lambda f: places.Details(id=CAFE, fields=f)]:
            assert error_of(lambda: call(["id", "colour"])) == (PLACES + ".InvalidField", {"field": "colour"})
            assert error_of(lambda: call([])) == (PLACES + ".InvalidField", {"field": ""})
        assert error_of(lambda: places.Details(id="osm:node/1")) == (PLACES + ".UnknownPlace", {"id": "osm:node/1"})
        for time in ["2026-12-07T10:00:00", "2026-12-07", "9999-12-07T10:00:00Z", "1800-01-01T00:00:00Z",
                     "2026-02-30T10:00:00Z", "soon", "2026-12-07T10:00:00+24:00", "x" * 70]:
            name, parameters = error_of(lambda: places.Details(id=CAFE, time=time))
            assert name == PLACES + ".InvalidTime" and parameters["time"] == time[:64], time
        assert dict(places.Status(), location=None) == before
    with helsinki.raw() as raw:
        raw.send(PLACES + ".Watch", {"fields": ["nope"]}, more=True)
        reply = raw.receive()
        assert reply["error"] == PLACES + ".InvalidField" and reply["parameters"] == {"field": "nope"}
        raw.send(PLACES + ".Details", {"id": CAFE, "fields": [1]})
        assert raw.receive()["error"] == "org.varlink.service.InvalidParameter"


def test_the_interface_describes_details_and_every_field(helsinki):
    with helsinki.open("org.varlink.service") as service:
        text = service.GetInterfaceDescription(PLACES)["description"]
    assert "method Details(id: string, fields: ?[]string, language: ?string, time: ?string) -> (place: Place)" in text
    assert "error InvalidField (field: string)" in text and "error InvalidTime (time: string)" in text
    for field in ["opening_hours", "open_now", "next_change", "intervals", "phone", "website", "email", "wheelchair",
                  "cuisine", "brand", "brand_wikidata", "operator", "level", "description", "internet_access",
                  "outdoor_seating", "takeaway", "diet", "payment"]:
        assert "\n  %s: ?" % field in text and text.count(field) >= 2, "%s is declared and explained" % field


# --- D-Bus -------------------------------------------------------------------------------------------

def bus_call(bus, member, signature, *arguments, user=None, check=True):
    return busctl(bus, "call", NAME, PATH, IFACE, member, signature, *arguments, user=user, check=check)


@pytest.fixture
def on_bus(bus, placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    daemon = Placed(placed_bin, "--bus", "session", "--static", "60.1699,24.9384,10", "--db", tmp_path / "places.db",
                    "--socket", tmp_path / "sock", "--time-zone", "Europe/Helsinki",
                    env={"DBUS_SESSION_BUS_ADDRESS": bus})
    daemon.wait_for(r"ranking 1:")
    yield daemon
    assert daemon.stop() == 0


def test_dbus_details_and_options(bus, on_bus):
    reply = bus_call(bus, "GetDetails", "sa{sv}", CAFE, 2, "fields", "as", 3, "open_now", "next_change", "phone",
                     "time", "s", MONDAY_10)
    place = reply["data"][0]
    assert place["open_now"] == {"type": "b", "data": True}
    assert place["next_change"] == {"type": "s", "data": "2026-12-07T19:00:00+02:00"}
    assert place["phone"] == {"type": "as", "data": ["+358 44 972 2058"]}
    assert set(place) == {"open_now", "next_change", "phone"}
    every = bus_call(bus, "GetDetails", "sa{sv}", CAFE, 0)["data"][0]
    assert every["opening_hours"]["data"] == "Mo-Fr 07:00-19:00; Sa 10:00-18:00" and "likelihood" not in every

    ranked = bus_call(bus, "RankWith", "ddda{sv}", 60.1699, 24.9384, "nan", 2, "limit", "u", 3, "fields", "as", 2,
                      "id", "likelihood")["data"][0]
    assert len(ranked) == 3 and all(set(p) == {"id", "likelihood"} for p in ranked)
    old = bus_call(bus, "Rank", "dddu", 60.1699, 24.9384, "nan", 3)["data"][0]
    assert [p["id"]["data"] for p in old] == [p["id"]["data"] for p in ranked]
    assert all(set(p) <= STANDARD for p in old), "the old method is as it was"
    generation, places = bus_call(bus, "GetPlacesWith", "a{sv}", 2, "fields", "as", 1, "*", "limit", "u", 20)["data"]
    assert generation >= 1 and len(places) > 5 and any("opening_hours" in p for p in places)
    standard = bus_call(bus, "GetPlacesWith", "a{sv}", 0)["data"]
    assert standard == bus_call(bus, "GetPlaces", "u", 0)["data"], "no options: GetPlaces' reply"

    for arguments, error in [
        (("GetDetails", "osm:node/1", "@a{sv} {}"), "io.placed.Placed1.Error.UnknownPlace"),
        (("GetDetails", CAFE, "{'time': <'2026-12-07T10:00:00'>}"), "io.placed.Placed1.Error.InvalidTime"),
        (("GetDetails", CAFE, "{'fields': <['colour']>}"), "io.placed.Placed1.Error.InvalidField"),
        (("GetDetails", CAFE, "{'fields': <@as []>}"), "io.placed.Placed1.Error.InvalidField"),
        (("GetDetails", CAFE, "{'limit': <uint32 3>}"), "org.freedesktop.DBus.Error.InvalidArgs"),
        (("GetPlacesWith", "{'fields': <'id'>}"), "org.freedesktop.DBus.Error.InvalidArgs"),
        (("RankWith", "60.1699", "24.9384", "10.0", "{'colour': <'red'>}"), "org.freedesktop.DBus.Error.InvalidArgs"),
    ]:
        assert gdbus_error(bus, *arguments) == error, arguments


def test_dbus_details_need_the_reader_group(bus, on_bus):
    assert bus_call(bus, "GetDetails", "sa{sv}", CAFE, 0, user=reader())["data"][0]["id"]["data"] == CAFE
    out = bus_call(bus, "GetDetails", "sa{sv}", CAFE, 0, user=NOBODY, check=False)
    assert out.returncode != 0 and "Access denied" in out.stderr, out.stderr


# --- placectl -----------------------------------------------------------------------------------------

def test_placectl_details(helsinki, placectl_bin):
    def run(*arguments, check=True):
        out = subprocess.run([placectl_bin, "--socket", helsinki.socket, *arguments], capture_output=True, text=True,
                             timeout=20)
        if check:
            assert out.returncode == 0, out.stderr
        return out

    text = run("details", CAFE, "--at", MONDAY_10).stdout
    assert text.startswith("open now, closes at 19:00 on 2026-12-07\n"), text
    assert "opening_hours   Mo-Fr 07:00-19:00; Sa 10:00-18:00\n" in text and "phone           +358 44 972 2058\n" in text
    document = json.loads(run("details", CAFE, "--at", SUNDAY_NOON, "--fields", "id,open_now", "--json").stdout)
    assert document == {"place": {"id": CAFE, "open_now": False}}
    ranked = json.loads(run("rank", "60.1699", "24.9384", "--fields", "id,likelihood", "--json", "-n", "3").stdout)
    assert [set(p) for p in ranked["places"]] == [{"id", "likelihood"}] * 3
    listed = run("places", "--fields", "id,name").stdout
    assert "  id    " in listed and "LIKELY" not in listed
    out = run("details", "osm:node/1", check=False)
    assert out.returncode == 1 and out.stderr.startswith("placectl: no place has the id 'osm:node/1'"), out.stderr
    out = run("details", CAFE, "--at", "tomorrow", check=False)
    assert out.returncode == 1 and "invalid time 'tomorrow'" in out.stderr
    out = run("places", "--fields", "colour", check=False)
    assert out.returncode == 1 and out.stderr.startswith("placectl: no place field is named 'colour'"), out.stderr


# --- a hostile extract ---------------------------------------------------------------------------------

def pbf_with_node(tags):
    """A .osm.pbf of one node at 60.17, 24.94 with `tags`: protobuf written by hand, zlib-compressed."""
    def varint(value):
        out = b""
        while value >= 0x80:
            out += bytes([value & 0x7F | 0x80])
            value >>= 7
        return out + bytes([value])

    def field(number, payload):
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def blob(kind, data):
        body = varint(2 << 3) + varint(len(data)) + field(3, zlib.compress(data))  # raw_size, zlib_data
        header = field(1, kind.encode()) + varint(3 << 3) + varint(len(body))  # type, datasize
        return struct.pack(">I", len(header)) + header + body

    strings = [b""] + [s.encode() for pair in tags for s in pair]
    keys_vals = []
    for index in range(len(tags)):
        keys_vals += [1 + 2 * index, 2 + 2 * index]
    zigzag = lambda v: (v << 1) ^ (v >> 63)
    dense = (field(1, varint(zigzag(7))) + field(8, varint(zigzag(601_700_000))) + field(9, varint(zigzag(249_400_000)))
             + field(10, b"".join(varint(v) for v in keys_vals + [0])))
    block = field(1, b"".join(field(1, s) for s in strings)) + field(2, field(2, dense))
    header = field(4, b"OsmSchema-V0.6") + field(4, b"DenseNodes")
    return blob("OSMHeader", header) + blob("OSMData", block)


def test_an_extract_with_a_megabyte_of_opening_hours_imports_without_it(placectl_bin, start_placed, tmp_path):
    huge = "Mo-Fr 08:00-18:00; " * 55_189
    source = tmp_path / "huge.osm.pbf"
    source.write_bytes(pbf_with_node([("name", "Huge"), ("amenity", "cafe"), ("opening_hours", huge),
                                      ("phone", "+358 1")]))
    directory = tmp_path / "daemon"
    directory.mkdir()
    out = subprocess.run([placectl_bin, "import", source, "--db", directory / "places.db"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "details dropped as longer than 4096 bytes: 1, e.g.:\n  osm:node/7: opening_hours: %d bytes\n" % len(
        huge) in out.stdout, out.stdout
    placed = start_placed("--static", "60.17,24.94,10", directory=directory, static=None)
    with placed.open() as places:
        place = places.Details(id="osm:node/7")["place"]
    assert place["name"] == "Huge" and place["phone"] == ["+358 1"] and "opening_hours" not in place
