"""The io.placed.Placed1 D-Bus object on a private dbus-daemon whose configuration includes the
project's policy file; driven with busctl and gdbus, the tools an operator would use."""
import grp
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import ROOT
from harness import Placed

NAME, PATH, IFACE = "io.placed.Placed1", "/io/placed/Placed1", "io.placed.Placed1"
POLICY = ROOT / "etc" / "dbus-1" / "system.d" / "io.placed.Placed1.conf"
XML = ROOT / "etc" / "dbus-1" / "interfaces" / "io.placed.Placed1.xml"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def reader():
    """setpriv arguments for `nobody` in group placed-read (made if missing)."""
    subprocess.run(["groupadd", "-f", "placed-read"], check=True)
    return ["setpriv", "--reuid=65534", "--regid=65534", "--groups=%d" % grp.getgrnam("placed-read").gr_gid]


@pytest.fixture(params=["policy"])
def bus(request, tmp_path):
    """A private dbus-daemon: everyone may connect and call, then the project's policy applies (or,
    with the "open" parameter, no policy: placed's own check is all there is). Its socket lives
    outside pytest's root-only tmp tree so that `nobody` can reach it."""
    reader()  # placed resolves the group when it starts
    include = "<include>%s</include>" % POLICY if request.param == "policy" else ""
    public = tempfile.mkdtemp(prefix="placed-bus-")
    os.chmod(public, 0o755)
    conf = tmp_path / "bus.conf"
    conf.write_text("""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>placed-test</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
  %s
</busconfig>
""" % (os.path.join(public, "bus"), include))
    proc = subprocess.Popen(["dbus-daemon", "--nofork", "--print-address", "--config-file", str(conf)],
                            stdout=subprocess.PIPE, text=True)
    address = proc.stdout.readline().strip()
    yield address
    proc.kill()
    proc.wait()
    shutil.rmtree(public, ignore_errors=True)


@pytest.fixture
def placed(bus, placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    daemon = Placed(placed_bin, "--bus", "session", "--static", "60.1699,24.9384,10", "--db", tmp_path / "places.db",
                    "--socket", tmp_path / "sock", env={"DBUS_SESSION_BUS_ADDRESS": bus})
    daemon.wait_for(r"ranking 1:")
    yield daemon
    assert daemon.stop() == 0


def busctl(bus, *args, user=None, check=True):
    cmd = (user or []) + ["busctl", "--address=" + bus, "--json=short", *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    if check:
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout) if out.stdout.strip() else None
    return out


def call(bus, method, signature="", *args, **kw):
    return busctl(bus, "call", NAME, PATH, IFACE, method, signature, *args, **kw)


def unwrap(value):
    """busctl's JSON of a{sv}: {"key": {"type": "s", "data": ...}} → {"key": ...}."""
    if isinstance(value, dict) and set(value) == {"type", "data"}:
        return unwrap(value["data"])
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def test_get_places_and_properties(bus, placed):
    reply = call(bus, "GetPlaces", "u", 3)
    assert reply["type"] == "taa{sv}"
    generation, places = reply["data"][0], unwrap(reply["data"][1])
    assert generation == 1 and len(places) == 3
    for place in places:
        assert {"id", "name", "kind", "latitude", "longitude", "distance", "likelihood", "attribution"} <= set(place)
    assert [p["likelihood"] for p in places] == sorted((p["likelihood"] for p in places), reverse=True)
    assert busctl(bus, "get-property", NAME, PATH, IFACE, "SourceState")["data"] == "static"
    assert busctl(bus, "get-property", NAME, PATH, IFACE, "Generation")["data"] == 1
    assert busctl(bus, "get-property", NAME, PATH, IFACE, "DistanceFilter")["data"] == 50.0
    location = unwrap(busctl(bus, "get-property", NAME, PATH, IFACE, "Location")["data"])
    assert location["latitude"] == 60.1699 and location["accuracy"] == 10.0


def test_rank_is_a_what_if(bus, placed):
    places = unwrap(call(bus, "Rank", "dddu", 60.1686, 24.9505, 8, 5)["data"][0])
    assert places and places != unwrap(call(bus, "GetPlaces", "u", 5)["data"][1])
    assert busctl(bus, "get-property", NAME, PATH, IFACE, "Generation")["data"] == 1


def test_select_emits_marker_and_properties_changed(bus, placed, tmp_path):
    monitor = subprocess.Popen(["gdbus", "monitor", "--address", bus, "--dest", NAME, "--object-path", PATH],
                               stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # the monitor has subscribed
        first = unwrap(call(bus, "GetPlaces", "u", 1)["data"][1])[0]
        marker = unwrap(call(bus, "Select", "s", first["id"])["data"][0])
        assert marker["place"]["id"] == first["id"] and marker["selection"] == 1 and marker["generation"] == 1
        call(bus, "Refresh")
        seen = ""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not ("PlacesChanged" in seen and "'Generation'" in seen):
            seen += monitor.stdout.readline()
    finally:
        monitor.kill()
        monitor.wait()
    assert "io.placed.Placed1.MarkerPlaced" in seen and first["id"] in seen
    assert "org.freedesktop.DBus.Properties.PropertiesChanged" in seen and "'Marker'" in seen
    assert "io.placed.Placed1.PlacesChanged (uint64 2," in seen
    history = unwrap(call(bus, "GetHistory", "u", 10)["data"][0])
    assert [m["place"]["id"] for m in history] == [first["id"]]
    assert unwrap(busctl(bus, "get-property", NAME, PATH, IFACE, "Marker")["data"])["selection"] == 1


# At the European Chemicals Agency, first there: its name tag (fi), name:sv and name:en differ.
AGENCY, AT_AGENCY = "osm:node/4989964844", "60.1657943,24.938207,5"
FI, SV, EN = "Euroopan kemikaalivirasto", "Europeiska Kemikaliemyndigheten", "European Chemicals Agency"


def test_names_in_language_setting_or_the_localized_methods_language(bus, placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    daemon = Placed(placed_bin, "--bus", "session", "--static", AT_AGENCY, "--language", "en", "--db",
                    tmp_path / "places.db", "--socket", tmp_path / "sock", env={"DBUS_SESSION_BUS_ADDRESS": bus})
    try:
        daemon.wait_for(r"ranking 1:")

        def name(places):
            return next(p["name"] for p in unwrap(places) if p["id"] == AGENCY)
        assert name(call(bus, "GetPlaces", "u", 5)["data"][1]) == EN, "Language= without a language asked"
        assert name(call(bus, "Rank", "dddu", 60.1657943, 24.938207, 5, 3)["data"][0]) == EN
        for language, expected in [("sv_FI.UTF-8", SV), ("", EN), ("C", FI), ("de", FI)]:
            reply = call(bus, "GetPlacesLocalized", "us", 5, language)
            assert reply["type"] == "taa{sv}" and reply["data"][0] == 1
            assert name(reply["data"][1]) == expected, language
            assert name(call(bus, "RankLocalized", "dddus", 60.1657943, 24.938207, 5, 3, language)["data"][0]) == expected
        assert unwrap(call(bus, "GetPlacesLocalized", "us", 5, "sv")["data"][1])[0]["address_source"] in \
            {"own", "building", "nearby", "street", "none"}
        assert gdbus_error(bus, "GetPlacesLocalized", "uint32 21", "sv") == "io.placed.Placed1.Error.InvalidLimit"

        # PlacesChanged, one signal for every listener, names in Language=.
        monitor = subprocess.Popen(["gdbus", "monitor", "--address", bus, "--dest", NAME, "--object-path", PATH],
                                   stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)
            call(bus, "Refresh")
            seen = ""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "PlacesChanged" not in seen:
                seen += monitor.stdout.readline()
            seen += monitor.stdout.readline()
        finally:
            monitor.kill()
            monitor.wait()
        assert "io.placed.Placed1.PlacesChanged (uint64 2," in seen and EN in seen and SV not in seen, seen
    finally:
        assert daemon.stop() == 0


def gdbus_error(bus, method, *args, user=None):
    """The D-Bus error name of a failing call, as gdbus reports it."""
    out = subprocess.run((user or []) + ["gdbus", "call", "--address", bus, "--dest", NAME, "--object-path", PATH,
                                         "--method", IFACE + "." + method, *map(str, args)],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode != 0, out.stdout
    return re.search(r"GDBus\.Error:([\w.]+)", out.stderr).group(1)


def test_losing_the_bus_ends_placed_with_a_failure_for_systemd_to_restart(bus, placed_bin, places_db, tmp_path):
    # Left running without its connection it was unreachable over D-Bus, and Restart=on-failure never
    # fired. This test's bus is the dbus-daemon started with its own bus.conf.
    shutil.copy(places_db, tmp_path / "places.db")
    daemon = Placed(placed_bin, "--bus", "session", "--static", "60.1699,24.9384,10", "--db", tmp_path / "places.db",
                    "--socket", tmp_path / "sock", env={"DBUS_SESSION_BUS_ADDRESS": bus})
    try:
        daemon.wait_for(r"ranking 1:")
        subprocess.run(["pkill", "-KILL", "-f", str(tmp_path / "bus.conf")], check=True)
        daemon.wait_for(r"the D-Bus connection was lost")
        assert daemon.proc.wait(timeout=10) == 1
    finally:
        daemon.stop()


def test_named_errors(bus, placed):
    assert gdbus_error(bus, "Select", "osm:node/1") == "io.placed.Placed1.Error.UnknownPlace"
    assert gdbus_error(bus, "GetPlaces", "uint32 21") == "io.placed.Placed1.Error.InvalidLimit"
    assert gdbus_error(bus, "Rank", "91.0", "0.0", "5.0", "uint32 5") == "io.placed.Placed1.Error.InvalidPosition"
    # gdbus checks argument types itself; busctl sends them, and sd-bus answers InvalidArgs from the vtable.
    out = busctl(bus, "call", NAME, PATH, IFACE, "GetPlaces", "s", "five", check=False)
    assert out.returncode != 0
    assert "Invalid arguments 's' to call io.placed.Placed1.GetPlaces(), expecting 'u'" in out.stderr, out.stderr
    assert gdbus_error(bus, "Bogus") == "org.freedesktop.DBus.Error.UnknownMethod"
    out = busctl(bus, "set-property", NAME, PATH, IFACE, "DistanceFilter", "d", 10, check=False)
    assert out.returncode != 0
    assert busctl(bus, "get-property", NAME, PATH, IFACE, "DistanceFilter")["data"] == 50.0


def test_refresh_onto_a_file_it_cannot_load_is_store_failed(bus, placed, tmp_path):
    (tmp_path / "broken.db").write_bytes(b"not a database" * 100)
    os.rename(tmp_path / "broken.db", tmp_path / "places.db")
    assert gdbus_error(bus, "Refresh") == "io.placed.Placed1.Error.StoreFailed"
    assert len(unwrap(call(bus, "GetPlaces", "u", 5)["data"][1])) == 5, "the loaded places keep serving"


def test_nobody_may_read_or_select(bus, placed):
    # The bus policy refuses first; placed refuses too from the sender's credentials (the next test).
    for method, args in [("GetPlaces", ["uint32 1"]), ("Rank", ["60.17", "24.94", "5.0", "uint32 5"]),
                         ("GetHistory", ["uint32 5"]), ("Select", ["osm:node/1"]), ("Refresh", [])]:
        assert gdbus_error(bus, method, *args, user=NOBODY) == "org.freedesktop.DBus.Error.AccessDenied", method
    out = busctl(bus, "get-property", NAME, PATH, IFACE, "Location", user=NOBODY, check=False)
    assert out.returncode != 0 and "Access denied" in out.stderr, out.stderr
    introspect = subprocess.run(NOBODY + ["gdbus", "introspect", "--address", bus, "--dest", NAME,
                                          "--object-path", PATH], capture_output=True, text=True, timeout=20)
    assert introspect.returncode == 0 and "GetPlaces" in introspect.stdout, "introspection stays open"
    assert unwrap(call(bus, "GetHistory", "u", 10)["data"][0]) == []


@pytest.mark.parametrize("bus", ["open"], indirect=True)
def test_placed_itself_refuses_nobody_on_a_bus_without_the_policy(bus, placed):
    for method, args in [("GetPlaces", ["uint32 1"]), ("GetHistory", ["uint32 5"])]:
        assert gdbus_error(bus, method, *args, user=NOBODY) == "io.placed.Placed1.Error.PermissionDenied", method
    assert gdbus_error(bus, "Select", "osm:node/1", user=NOBODY) == "io.placed.Placed1.Error.PermissionDenied"
    for member, args in [("Get", [IFACE, "Location"]), ("GetAll", [IFACE])]:
        out = subprocess.run(NOBODY + ["gdbus", "call", "--address", bus, "--dest", NAME, "--object-path", PATH,
                                       "--method", "org.freedesktop.DBus.Properties." + member, *args],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode != 0 and "io.placed.Placed1.Error.PermissionDenied" in out.stderr, out.stderr
    assert unwrap(call(bus, "GetPlaces", "u", 1, user=reader())["data"][1]), "a reader reads"


def test_a_reader_reads_and_hears_but_may_not_select(bus, placed):
    places = unwrap(call(bus, "GetPlaces", "u", 1, user=reader())["data"][1])
    assert places
    # The localized forms are reading too (the policy lets readers call them).
    assert unwrap(call(bus, "GetPlacesLocalized", "us", 1, "sv", user=reader())["data"][1])[0]["id"] == places[0]["id"]
    assert unwrap(call(bus, "RankLocalized", "dddus", 60.1699, 24.9384, 10, 1, "sv", user=reader())["data"][0])
    location = unwrap(busctl(bus, "get-property", NAME, PATH, IFACE, "Location", user=reader())["data"])
    assert location["latitude"] == 60.1699
    assert gdbus_error(bus, "Select", places[0]["id"], user=reader()) == "org.freedesktop.DBus.Error.AccessDenied"
    assert gdbus_error(bus, "Refresh", user=reader()) == "org.freedesktop.DBus.Error.AccessDenied"
    # Signals reach readers and never nobody.
    monitors = {who: subprocess.Popen(user + ["gdbus", "monitor", "--address", bus, "--dest", NAME],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                for who, user in [("reader", reader()), ("nobody", NOBODY)]}
    try:
        time.sleep(0.5)  # the monitors have subscribed
        call(bus, "Refresh")  # ranks again: PlacesChanged, PropertiesChanged
        time.sleep(1.0)
    finally:
        for monitor in monitors.values():
            monitor.kill()
    heard = {who: monitor.communicate()[0] for who, monitor in monitors.items()}
    assert "io.placed.Placed1.PlacesChanged" in heard["reader"], heard
    assert "PlacesChanged" not in heard["nobody"] and "PropertiesChanged" not in heard["nobody"], heard


def test_introspection_is_the_shipped_xml_and_matches_the_live_object(bus, placed):
    out = subprocess.run(["gdbus", "introspect", "--address", bus, "--dest", NAME, "--object-path", PATH, "--xml"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    introspected = busctl(bus, "call", NAME, PATH, "org.freedesktop.DBus.Introspectable", "Introspect")["data"][0]
    shipped_text = re.sub(r"<!--.*?-->\n", "", XML.read_text(), flags=re.S)
    assert introspected == shipped_text, "the shipped XML is not the live object's: run scripts/gen-bus-introspection"
    live = ET.fromstring(out.stdout)
    shipped = ET.parse(XML).getroot()
    iface = lambda root: next(i for i in root.iter("interface") if i.get("name") == IFACE)
    members = lambda i: sorted((m.tag, m.get("name"), tuple(a.get("type") for a in m.iter("arg")) or m.get("type"))
                               for m in i if m.tag in ("method", "signal", "property"))
    assert members(iface(live)) == members(iface(shipped))
    # Every declared property answers with its declared type; every method exists with its signature.
    for prop in iface(shipped).iter("property"):
        assert busctl(bus, "get-property", NAME, PATH, IFACE, prop.get("name"))["type"] == prop.get("type")
    dummy = {"u": 1, "d": 60.17, "s": "osm:node/1", "a{sv}": 0, "as": 0}
    for method in iface(shipped).iter("method"):
        types = [a.get("type") for a in method.iter("arg") if a.get("direction") == "in"]
        out = call(bus, method.get("name"), "".join(types), *[dummy[t] for t in types], check=False)
        assert "Unknown method" not in out.stderr and "InvalidArgs" not in out.stderr, (method.get("name"), out.stderr)


def own_circle(key, lat, lon, radius, **properties):
    return {"type": "Feature", "properties": {"id": "own:" + key, "name": key.capitalize(), "radius": radius,
                                              **properties},
            "geometry": {"type": "Point", "coordinates": [lon, lat]}}


def own_square_with_hole(key, lat, lon, half_degrees):
    def ring(f):
        corners = [[lon - f * half_degrees, lat - f * half_degrees], [lon + f * half_degrees, lat - f * half_degrees],
                   [lon + f * half_degrees, lat + f * half_degrees], [lon - f * half_degrees, lat + f * half_degrees]]
        return corners + corners[:1]
    return {"type": "Feature", "properties": {"id": "own:" + key, "name": key.capitalize(), "kind": "depot"},
            "geometry": {"type": "Polygon", "coordinates": [ring(1), ring(0.5)[::-1]]}}


def own_places(bus, user=None):
    reply = call(bus, "OwnPlaces", "a{sv}", 0, user=user)
    assert reply["type"] == "s"
    collection = json.loads(reply["data"][0])
    assert collection["type"] == "FeatureCollection"
    return {f["properties"]["id"]: f for f in collection["features"]}


def test_own_places_put_list_delete_as_busctl_types_them(bus, placed):
    batch = {"type": "FeatureCollection", "features": [
        own_circle("gate", 60.1699, 24.9384, 30, kind="gate", **{"name:sv": "Port"}),
        own_square_with_hole("yard", 60.1710, 24.9400, 0.001)]}
    reply = call(bus, "PutPlaces", "sa{sv}", json.dumps(batch), 0)
    assert reply == {"type": "u", "data": [2]}
    listed = own_places(bus)
    assert sorted(listed) == ["own:gate", "own:yard"]
    assert listed["own:gate"]["properties"]["name:sv"] == "Port"
    assert listed["own:gate"]["properties"]["radius"] == 30
    assert listed["own:yard"]["geometry"] == batch["features"][1]["geometry"], "the hole comes back as it went"
    # In effect at once: the fix is inside the gate's circle, so a new ranking lists it.
    ranked = unwrap(call(bus, "GetPlacesWith", "a{sv}", 2, "limit", "u", 20, "fields", "as", 2, "id", "distance")
                    ["data"])
    assert ranked[0] >= 2
    assert {"id": "own:gate", "distance": 0.0} in ranked[1]
    details = unwrap(call(bus, "GetDetails", "sa{sv}", "own:gate", 1, "fields", "as", 2, "id", "name")["data"][0])
    assert details == {"id": "own:gate", "name": "Gate"}
    # One Feature alone is a batch of one, and a put replaces the place of its id.
    renamed = own_circle("gate", 60.1699, 24.9384, 40, kind="gate")
    renamed["properties"]["name"] = "Main gate"
    assert call(bus, "PutPlaces", "sa{sv}", json.dumps(renamed), 0)["data"] == [1]
    assert own_places(bus)["own:gate"]["properties"]["name"] == "Main gate"
    # Deleting counts what there was; an id not stored is no error.
    assert call(bus, "DeletePlaces", "asa{sv}", 2, "own:yard", "own:nothing", 0)["data"] == [1]
    assert sorted(own_places(bus)) == ["own:gate"]
    assert call(bus, "DeletePlaces", "asa{sv}", 0, 0)["data"] == [0]


@pytest.mark.parametrize("broken, reason", [
    ("not json", "invalid GeoJSON"),
    (json.dumps({"type": "FeatureCollection", "features": [
        own_circle("fine", 60.17, 24.94, 10), own_circle("far", 60.17, 24.94, 20_000)]}),
     "feature 1 (own:far): radius 20000.0 m out of range"),
    (json.dumps({"type": "FeatureCollection", "features": [
        own_circle("twice", 60.17, 24.94, 10), own_circle("twice", 60.18, 24.94, 10)]}),
     "feature 1 (own:twice): the same id as feature 0"),
    (json.dumps({"type": "FeatureCollection", "features": [
        own_circle("fine", 60.17, 24.94, 10), own_circle("bad key!", 60.17, 24.94, 10)]}),
     "invalid id \"own:bad key!\""),
])
def test_a_bad_batch_is_a_named_error_and_changes_nothing(bus, placed, broken, reason):
    call(bus, "PutPlaces", "sa{sv}", json.dumps(own_circle("kept", 60.17, 24.94, 10)), 0)
    out = call(bus, "PutPlaces", "sa{sv}", broken, 0, check=False)
    assert out.returncode != 0
    assert "io.placed.Placed1.Error.InvalidOwnPlace" in gdbus_error(bus, "PutPlaces", json.dumps(broken), "@a{sv} {}")
    assert reason in out.stderr, out.stderr
    assert sorted(own_places(bus)) == ["own:kept"], "nothing of the batch was applied"
    out = call(bus, "DeletePlaces", "asa{sv}", 2, "own:kept", "osm:node/1", 0, check=False)
    assert out.returncode != 0 and "invalid id" in out.stderr, out.stderr
    assert sorted(own_places(bus)) == ["own:kept"], "nothing of the delete was applied"
    out = call(bus, "OwnPlaces", "a{sv}", 1, "fields", "as", 1, "*", check=False)
    assert out.returncode != 0 and "unknown option 'fields': this method takes none" in out.stderr, out.stderr


def test_a_reader_lists_own_places_but_may_not_change_them(bus, placed):
    call(bus, "PutPlaces", "sa{sv}", json.dumps(own_circle("depot", 60.17, 24.94, 10)), 0)
    assert sorted(own_places(bus, user=reader())) == ["own:depot"]
    feature = json.dumps(own_circle("sneaky", 60.17, 24.94, 10))
    assert gdbus_error(bus, "PutPlaces", feature, "@a{sv} {}", user=reader()) == "org.freedesktop.DBus.Error.AccessDenied"
    assert gdbus_error(bus, "DeletePlaces", "['own:depot']", "@a{sv} {}", user=reader()) == \
        "org.freedesktop.DBus.Error.AccessDenied"
    assert gdbus_error(bus, "OwnPlaces", "@a{sv} {}", user=NOBODY) == "org.freedesktop.DBus.Error.AccessDenied"
    assert sorted(own_places(bus)) == ["own:depot"]


@pytest.mark.parametrize("bus", ["open"], indirect=True)
def test_placed_itself_refuses_a_reader_own_place_changes(bus, placed):
    feature = json.dumps(own_circle("sneaky", 60.17, 24.94, 10))
    assert gdbus_error(bus, "PutPlaces", feature, "@a{sv} {}", user=reader()) == "io.placed.Placed1.Error.PermissionDenied"
    assert gdbus_error(bus, "DeletePlaces", "['own:x']", "@a{sv} {}", user=reader()) == \
        "io.placed.Placed1.Error.PermissionDenied"
    assert gdbus_error(bus, "OwnPlaces", "@a{sv} {}", user=NOBODY) == "io.placed.Placed1.Error.PermissionDenied"
    assert own_places(bus, user=reader()) == {}


def test_placectl_own_over_the_bus(bus, placed, placectl_bin, tmp_path):
    def placectl(*arguments):
        return subprocess.run([placectl_bin, "--bus", "--address", bus, *map(str, arguments)],
                              capture_output=True, text=True, timeout=30)
    out = placectl("own", "add", "dock", "Loading dock", "--at", "60.1701,24.9390", "--radius", 15)
    assert out.returncode == 0 and out.stdout == "put own:dock\n", out.stderr
    path = tmp_path / "sites.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection",
                                "features": [own_square_with_hole("yard", 60.1710, 24.9400, 0.001)]}))
    out = placectl("own", "import", path)
    assert out.returncode == 0 and out.stdout == "put 1 own places from %s\n" % path, out.stderr
    out = placectl("own", "list", "--json")
    assert out.returncode == 0, out.stderr
    assert sorted(f["properties"]["id"] for f in json.loads(out.stdout)["places"]) == ["own:dock", "own:yard"]
    out = placectl("own", "export", tmp_path / "back.geojson")
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "back.geojson").read_text())["features"][1]["geometry"] == \
        json.loads(path.read_text())["features"][0]["geometry"]
    out = placectl("own", "remove", "dock", "own:gone")
    assert out.returncode == 0 and out.stdout == "deleted 1 of 2\n", out.stderr
    out = placectl("own", "import", "/dev/null")
    assert out.returncode == 1 and sorted(own_places(bus)) == ["own:yard"]


def test_only_root_or_placed_may_own_the_name(bus, placed_bin, places_db):
    work = tempfile.mkdtemp(prefix="placed-nobody-")
    try:
        os.chmod(work, 0o777)
        shutil.copy(places_db, os.path.join(work, "places.db"))
        os.chmod(os.path.join(work, "places.db"), 0o644)
        out = subprocess.run(NOBODY + [str(placed_bin), "--bus", "session", "--static", "60.17,24.94",
                                       "--db", os.path.join(work, "places.db"), "--socket", os.path.join(work, "sock")],
                             capture_output=True, text=True, timeout=20,
                             env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": bus})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert out.returncode == 1
    assert "cannot serve io.placed.Placed1 on the session bus" in out.stderr, out.stderr
