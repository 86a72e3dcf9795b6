"""placed under a booted systemd, installed from the package: enable --now and both activations, the
watchdog, reload of a drop-in, the live unit's hardening, a selection's journal entry, and fleet export
under the hardened unit."""
import json
import re
import time

import pytest

from conftest import EXTRACT_PLACES, HELSINKI_CENTER, UNITS, set_up_service, write_drop_in

SELECTION_MESSAGE_ID = "5d1b7e4c2a9f4b8e8c3f6a0d9e2b7c41"
NAME, OBJECT, INTERFACE = "io.placed.Placed1", "/io/placed/Placed1", "io.placed.Placed1"


@pytest.fixture(scope="module")
def service(container, deb):
    set_up_service(container, deb)
    return container


def seconds(timespan):
    """A systemd timespan as `systemctl show` prints it (30s, 1min 30s, 500ms) in seconds."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)(us|ms|s|min|h)", timespan))


def passed_socket_lines(service, cursor):
    """placed's journal lines since `cursor` saying it serves the socket systemd passed, once there
    (journald takes them in asynchronously)."""
    return service.wait_for(lambda: [e["MESSAGE"] for e in service.journal("_SYSTEMD_UNIT=placed.service",
                                                                           cursor=cursor)
                                     if "the socket systemd passed" in e["MESSAGE"]], 5, "placed's socket line")


def stop_placed_only(service):
    service.run("systemctl", "stop", "placed.service")
    assert service.active(*UNITS) == ["active", "inactive"], "the socket stays, listening"


def test_enable_now_starts_the_socket_too_and_activation_is_in_force(service):
    service.run("systemctl", "disable", "--now", *UNITS)
    assert service.active(*UNITS) == ["inactive", "inactive"]
    cursor = service.cursor()
    service.run("systemctl", "enable", "--now", "placed")  # the README's step, without naming the socket
    assert service.active(*UNITS) == ["active", "active"]
    assert passed_socket_lines(service, cursor)  # placed serves the socket systemd holds
    assert service.run("systemctl", "is-enabled", "placed.socket").stdout.strip() == "enabled"
    # Socket activation without a reboot: placed stopped, the socket still listens and starts it.
    stop_placed_only(service)
    assert service.run("placectl", "status").returncode == 0
    assert service.active(*UNITS) == ["active", "active"]


def test_socket_activation_answers_the_call_that_started_placed(service):
    stop_placed_only(service)
    cursor = service.cursor()
    out = service.run("placectl", "--json", "status")
    assert json.loads(out.stdout)["places"] == EXTRACT_PLACES
    assert service.active("placed.service") == ["active"]
    assert passed_socket_lines(service, cursor)


def test_dbus_activation_answers_the_call_that_started_placed(service):
    stop_placed_only(service)
    out = service.run("busctl", "--json=short", "call", NAME, OBJECT, INTERFACE, "GetPlaces", "u", "1")
    generation, places = json.loads(out.stdout)["data"]
    assert generation >= 1 and len(places) == 1
    assert service.active(*UNITS) == ["active", "active"]


def test_a_drop_in_and_reload_apply_a_change(service):
    before = service.show("placed.service", "MainPID")["MainPID"]
    cursor = service.cursor()
    write_drop_in(service, "50-filter.conf", "[Location]\nDistanceFilter=20\n")
    try:
        service.run("systemctl", "reload", "placed")
        got = service.run("busctl", "--json=short", "get-property", NAME, OBJECT, INTERFACE, "DistanceFilter")
        assert json.loads(got.stdout)["data"] == 20.0
        assert json.loads(service.run("placectl", "--json", "status").stdout)["distance_filter"] == 20
        assert service.show("placed.service", "MainPID")["MainPID"] == before, "reloaded, not restarted"
        service.wait_for(lambda: [e for e in service.journal("_SYSTEMD_UNIT=placed.service", cursor=cursor)
                                  if "distance filter now 20.0 m" in e["MESSAGE"]], 5, "the reload's log line")
    finally:
        (service.root / "etc/placed/placed.conf.d/50-filter.conf").unlink()
        service.run("systemctl", "reload", "placed")


def test_the_live_unit_is_exposed_at_most_2(service):
    out = service.run("systemd-analyze", "security", "--no-pager", "placed.service")
    score = float(re.search(r"Overall exposure level for placed.service: ([\d.]+)", out.stdout).group(1))
    assert score <= 2.0, out.stdout


def test_a_selection_is_in_the_journal_with_its_message_id_and_fields(service):
    cursor = service.cursor()
    first = json.loads(service.run("placectl", "--json", "places").stdout)["places"][0]
    marker = json.loads(service.run("placectl", "--json", "select", first["id"]).stdout)["marker"]
    entries = service.wait_for(lambda: service.journal("MESSAGE_ID=" + SELECTION_MESSAGE_ID, cursor=cursor), 5,
                               "the selection's journal entry")
    assert len(entries) == 1, entries
    entry = entries[0]
    assert entry["_SYSTEMD_UNIT"] == "placed.service" and entry["PRIORITY"] == "5"
    assert entry["PLACE_ID"] == first["id"] and entry["PLACE_NAME"] == first["name"]
    assert entry["SELECTION"] == str(marker["selection"]) and entry["GENERATION"] == str(marker["generation"])
    latitude, longitude, _ = map(float, HELSINKI_CENTER.split(","))
    assert float(entry["LATITUDE"]) == pytest.approx(latitude) and float(entry["LONGITUDE"]) == pytest.approx(longitude)
    shown = service.run("journalctl", "--no-pager", "-o", "cat", "MESSAGE_ID=" + SELECTION_MESSAGE_ID).stdout
    assert "selected %s (%s)" % (first["name"], first["id"]) in shown


def test_the_watchdog_restarts_a_hung_placed(service):
    state = service.show("placed.service", "MainPID", "NRestarts", "WatchdogUSec", "RestartUSec")
    watchdog, restart = seconds(state["WatchdogUSec"]), seconds(state["RestartUSec"])
    assert 0 < watchdog <= 60, state
    cursor = service.cursor()
    stopped = time.monotonic()
    service.run("kill", "-STOP", state["MainPID"])
    margin = 10
    service.wait_for(lambda: int(service.show("placed.service", "NRestarts")["NRestarts"]) > int(state["NRestarts"]),
                     watchdog + restart + margin, "the watchdog's restart", interval=0.5)
    elapsed = time.monotonic() - stopped
    assert watchdog - 1 <= elapsed <= watchdog + restart + margin, elapsed
    service.wait_for(lambda: service.active("placed.service") == ["active"], 15, "placed active again")
    assert service.show("placed.service", "MainPID")["MainPID"] != state["MainPID"]
    service.wait_for(lambda: [e for e in service.journal("_PID=1", "UNIT=placed.service", cursor=cursor)
                              if "Watchdog timeout" in e["MESSAGE"]], 5, "systemd's watchdog message")
    assert service.run("placectl", "status").returncode == 0


def test_fleet_export_under_the_hardened_unit(service):
    """A mosquitto on the container's localhost (which the unit allows) and a [Fleet] drop-in naming it
    by host name: placed, under its system call filter, MemoryDenyWriteExecute= and ProtectClock=, loads
    libmosquitto, looks the name up on a thread of its own, connects, and exports a selection, saying
    whether the clock was synchronized (timesyncd's word: adjtimex is filtered)."""
    port = 18830
    conf = service.root / "etc" / "fleet-test-mosquitto.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\n" % port)
    service.run("systemd-run", "--unit", "fleet-test-broker", "mosquitto", "-c", "/etc/fleet-test-mosquitto.conf")
    subscribe = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-i", "fleet-office", "-c", "-q", "1",
                 "-t", "placed/in-the-unit/marker"]
    try:
        service.wait_for(lambda: service.run(*subscribe, "-E", check=False).returncode == 0, 10,
                         "the broker and a persistent session")
        write_drop_in(service, "60-fleet.conf", "[Fleet]\nBroker=mqtt://localhost:%d\nDeviceId=in-the-unit\n" % port)
        service.run("systemctl", "reload", "placed")
        status = service.wait_for(lambda: (json.loads(service.run("placectl", "--json", "status").stdout)
                                           .get("fleet", {}).get("state") == "connected") or None, 15,
                                  "placed connected to the broker")
        assert status
        first = json.loads(service.run("placectl", "--json", "places").stdout)["places"][0]
        marker = json.loads(service.run("placectl", "--json", "select", first["id"]).stdout)["marker"]
        out = service.run(*subscribe, "-C", "1", "-W", "20")
        body = json.loads(out.stdout)
        assert body["selection"] == marker["selection"] and body["place"]["id"] == first["id"]
        assert body["id"] == "in-the-unit:%d" % body["seq"] and isinstance(body["clockSynchronized"], bool)
        shown = service.run("placectl", "status").stdout
        assert re.search(r"^fleet\s+connected to mqtt://localhost:%d as in-the-unit" % port, shown, re.M), shown
    finally:
        drop_in = service.root / "etc/placed/placed.conf.d/60-fleet.conf"
        if drop_in.exists():
            drop_in.unlink()
        service.run("systemctl", "reload", "placed", check=False)
        service.run("systemctl", "stop", "fleet-test-broker", check=False)
        conf.unlink()
