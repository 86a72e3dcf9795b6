"""Who may do what, on the installed package's varlink socket and system-bus name alike: reading is for
root, group placed and group placed-read; Select, Refresh and own places' changes for root and group
placed; nobody else gets anything but a named refusal, not even placed's signals."""
import json
import os
import re
import signal
import threading
import time

import pytest

from conftest import EXTRACT_PLACES, READER, WRITER, set_up_service

PERMISSION_DENIED = "io.placed.Places.PermissionDenied"
ACCESS_DENIED = "org.freedesktop.DBus.Error.AccessDenied"
NAME, OBJECT, INTERFACE = "io.placed.Placed1", "/io/placed/Placed1", "io.placed.Placed1"


@pytest.fixture(scope="module")
def service(container, deb):
    set_up_service(container, deb)
    return container


def placectl(service, *args, user=None):
    return service.run("timeout", "10", "placectl", *args, user=user, check=False)


def first_place(service):
    return json.loads(service.run("placectl", "--json", "places").stdout)["places"][0]["id"]


def busctl(service, *args, user=None):
    return service.run("busctl", "--json=short", *args, user=user, check=False)


def call(service, method, signature="", *args, user=None):
    return busctl(service, "call", NAME, OBJECT, INTERFACE, method, signature, *args, user=user)


def test_status_as_root_and_as_a_member_of_group_placed(service):
    for user in (None, WRITER):
        out = placectl(service, "status", user=user)
        assert out.returncode == 0, out
        assert re.search(r"places\s+%s loaded" % f"{EXTRACT_PLACES:,}", out.stdout), out.stdout
        over_dbus = placectl(service, "--bus", "status", user=user)
        assert over_dbus.returncode == 0 and "static" in over_dbus.stdout, over_dbus


def test_a_member_of_group_placed_may_select_and_refresh_on_both(service):
    place = first_place(service)
    on_socket = placectl(service, "--json", "select", place, user=WRITER)
    assert on_socket.returncode == 0, on_socket
    on_bus = placectl(service, "--bus", "--json", "select", place, user=WRITER)
    assert on_bus.returncode == 0, on_bus
    assert json.loads(on_bus.stdout)["marker"]["selection"] == json.loads(on_socket.stdout)["marker"]["selection"] + 1
    assert placectl(service, "refresh", user=WRITER).returncode == 0
    assert placectl(service, "--bus", "refresh", user=WRITER).returncode == 0


def test_a_member_of_placed_read_may_read_on_both(service):
    for args in (["status"], ["places"], ["history"], ["rank", "60.171", "24.941"]):
        out = placectl(service, "--json", *args, user=READER)
        assert out.returncode == 0, (args, out)
    assert json.loads(placectl(service, "--json", "places", user=READER).stdout)["places"]
    for args in (["status"], ["places"], ["history"]):
        out = placectl(service, "--bus", "--json", *args, user=READER)
        assert out.returncode == 0, (args, out)
    location = busctl(service, "get-property", NAME, OBJECT, INTERFACE, "Location", user=READER)
    assert location.returncode == 0 and json.loads(location.stdout)["data"]["latitude"]["data"] == 60.1699


def test_a_member_of_placed_read_is_refused_select_and_refresh(service):
    place = first_place(service)
    history = service.run("placectl", "--json", "history").stdout
    out = placectl(service, "select", place, user=READER)
    assert out.returncode == 1 and PERMISSION_DENIED in out.stderr, out
    out = placectl(service, "refresh", user=READER)
    assert out.returncode == 1 and PERMISSION_DENIED in out.stderr, out
    for method, signature, args in (("Select", "s", [place]), ("Refresh", "", [])):
        out = call(service, method, signature, *args, user=READER)
        assert out.returncode != 0 and "Access denied" in out.stderr, (method, out)
    assert service.run("placectl", "--json", "history").stdout == history, "nothing was selected"


def test_a_member_of_placed_adds_an_own_place_and_placed_read_is_refused(service):
    # Own places (issue 35) are changes: root and group placed only; the reader group may list them.
    added = placectl(service, "own", "add", "gate-7", "Gate 7", "--at", "60.1699,24.9384", "--radius", "25",
                     "--kind", "gate", user=WRITER)
    assert added.returncode == 0, added
    listed = placectl(service, "--json", "own", "list", user=READER)
    assert listed.returncode == 0, listed
    assert "own:gate-7" in listed.stdout
    refused = placectl(service, "own", "add", "gate-8", "Gate 8", "--at", "60.17,24.94", "--radius", "25",
                       user=READER)
    assert refused.returncode == 1 and PERMISSION_DENIED in refused.stderr, refused
    removed = placectl(service, "own", "remove", "own:gate-7", user=READER)
    assert removed.returncode == 1 and PERMISSION_DENIED in removed.stderr, removed
    assert "own:gate-7" in placectl(service, "--json", "own", "list").stdout, "nothing changed"
    assert placectl(service, "own", "remove", "own:gate-7", user=WRITER).returncode == 0


def test_nobody_is_refused_select_and_refresh_on_both(service):
    place = first_place(service)
    out = placectl(service, "select", place, user="nobody")
    assert out.returncode == 1 and PERMISSION_DENIED in out.stderr, out
    out = placectl(service, "refresh", user="nobody")
    assert out.returncode == 1 and PERMISSION_DENIED in out.stderr, out
    for method, signature, args in (("Select", "s", [place]), ("Refresh", "", [])):
        out = call(service, method, signature, *args, user="nobody")
        assert out.returncode != 0 and "Access denied" in out.stderr, (method, out)


def test_nobody_is_refused_reading_on_dbus_but_may_introspect(service):
    for method, signature, args in (("GetPlaces", "u", [1]), ("Rank", "dddu", [60.17, 24.94, 5, 5]),
                                    ("GetHistory", "u", [1])):
        out = call(service, method, signature, *args, user="nobody")
        assert out.returncode != 0 and "Access denied" in out.stderr, (method, out)
    out = busctl(service, "get-property", NAME, OBJECT, INTERFACE, "Location", user="nobody")
    assert out.returncode != 0 and "Access denied" in out.stderr, out
    out = placectl(service, "--bus", "status", user="nobody")  # GetAll
    assert out.returncode == 1 and ACCESS_DENIED in out.stderr, out
    out = busctl(service, "introspect", "--xml-interface", NAME, OBJECT, user="nobody")
    assert out.returncode == 0 and "GetPlaces" in out.stdout, out
    assert busctl(service, "call", NAME, OBJECT, "org.freedesktop.DBus.Peer", "Ping", user="nobody").returncode == 0


def test_nobody_is_refused_reading_on_the_socket(service):
    """placed's own check of the peer (SO_PEERCRED): the socket is 0666, so this is all that keeps
    the location from anyone on the machine."""
    for args in (["status"], ["places"], ["history"], ["rank", "60.171", "24.941"], ["watch"]):
        out = placectl(service, *args, user="nobody")
        assert out.returncode == 1 and PERMISSION_DENIED in out.stderr, (args, out)


class SignalMonitor:
    """gdbus monitor on placed's object as one user, its lines collected as they come."""

    def __init__(self, service, user):
        self.proc = service.popen("timeout", "--foreground", "15", "gdbus", "monitor", "--system", "--dest", NAME,
                                  "--object-path", OBJECT, user=user)
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.reader.start()

    def wait_subscribed(self, timeout=10):
        deadline = time.monotonic() + timeout
        while not any("is owned by" in line for line in self.lines):
            assert time.monotonic() < deadline, "gdbus monitor did not start: %r" % self.lines
            time.sleep(0.05)

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)  # nsenter and gdbus inside
        self.proc.wait(10)
        self.reader.join(5)
        return "".join(self.lines)


def test_signals_reach_root_and_the_groups_only(service):
    monitors = {user: SignalMonitor(service, user) for user in (None, WRITER, READER, "nobody")}
    try:
        for monitor in monitors.values():
            monitor.wait_subscribed()
        service.run("placectl", "select", first_place(service))
        service.run("placectl", "refresh")
        time.sleep(1)  # the signals are out before refresh answers; give the monitors time to print them
    finally:
        seen = {user: monitor.stop() for user, monitor in monitors.items()}
    for user in (None, WRITER, READER):
        for member in ("io.placed.Placed1.MarkerPlaced", "io.placed.Placed1.PlacesChanged",
                       "org.freedesktop.DBus.Properties.PropertiesChanged"):
            assert member in seen[user], (user, member, seen[user])
    assert "io.placed.Placed1." not in seen["nobody"] and "PropertiesChanged" not in seen["nobody"], seen["nobody"]
