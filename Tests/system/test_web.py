"""The kiosk page's package (placed-web) beside placed's, under a booted systemd: placed-web.socket
listens on the loopback once installed, the first request starts placed-web as its own user with group
placed, a tap from the page's own origin selects through placed, other origins are refused, and the
live unit is hardened as placed's."""
import json
import re

import pytest

from conftest import set_up_service

WEB_UNITS = ("placed-web.socket", "placed-web.service")
PAGE = "http://127.0.0.1:8080"


@pytest.fixture(scope="module")
def kiosk(container, deb):
    set_up_service(container, deb)
    web_deb = deb.parent / deb.name.replace("placed_", "placed-web_", 1)
    assert web_deb.is_file(), "scripts/build-deb puts placed-web's package beside placed's: %s" % web_deb
    out, _ = container.install(web_deb)
    assert out.returncode == 0, out
    return container


def curl(container, *arguments):
    """(status, body) of a request inside the container."""
    out = container.run("curl", "-s", "-o", "/dev/stdout", "-w", "\n%{http_code}", *arguments, check=False)
    body, _, status = out.stdout.rpartition("\n")
    return int(status or 0), body


def test_the_socket_listens_and_the_first_request_starts_placed_web(kiosk):
    assert kiosk.active("placed-web.socket") == ["active"]
    assert kiosk.run("systemctl", "is-enabled", "placed-web.socket").stdout.strip() == "enabled"
    status, page = curl(kiosk, PAGE + "/")
    assert status == 200 and 'name="placed-token"' in page
    assert kiosk.active(*WEB_UNITS) == ["active", "active"]
    for path in ("/app.js", "/leaflet/leaflet.js", "/leaflet/images/marker-icon.png"):
        out = kiosk.run("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", PAGE + path, check=False)
        assert out.stdout == "200", path
    state = kiosk.wait_for(lambda: (lambda s: s if s["upstream"] == "connected" else None)(
        json.loads(curl(kiosk, PAGE + "/state")[1])), 10, "placed-web to follow placed")
    assert state["places"], "the ranking at the static position"


def test_placed_web_runs_as_its_own_user_in_group_placed(kiosk):
    pid = kiosk.show("placed-web.service", "MainPID")["MainPID"]
    assert pid != "0"
    status = kiosk.run("cat", "/proc/%s/status" % pid).stdout
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
    groups = re.search(r"^Groups:\s*(.*)$", status, re.M).group(1).split()
    assert kiosk.run("id", "-un", uid).stdout.strip() == "placed-web"
    placed_gid = kiosk.run("getent", "group", "placed").stdout.split(":")[2]
    assert placed_gid in groups


def test_a_tap_from_the_page_selects_and_other_origins_are_refused(kiosk):
    page = curl(kiosk, PAGE + "/")[1]
    token = re.search(r'name="placed-token" content="([0-9a-f]{32})"', page).group(1)
    place = json.loads(curl(kiosk, PAGE + "/state")[1])["places"][1]
    body = json.dumps({"id": place["id"]})
    status, reply = curl(kiosk, "-X", "POST", "-H", "Origin: http://evil.example", "-H", "X-Placed-Token: " + token,
                         "-H", "Content-Type: application/json", "--data", body, PAGE + "/select")
    assert (status, json.loads(reply)["error"]) == (403, "forbidden-origin")
    status, reply = curl(kiosk, "-X", "POST", "-H", "Origin: " + PAGE, "-H", "X-Placed-Token: " + token,
                         "-H", "Content-Type: application/json", "--data", body, PAGE + "/select")
    assert status == 200, reply
    history = json.loads(kiosk.run("placectl", "--json", "history").stdout)["markers"]
    assert history[0]["place"]["id"] == place["id"], "selected by placed-web as a member of group placed"


def test_the_live_unit_is_hardened(kiosk):
    out = kiosk.run("systemd-analyze", "security", "--no-pager", "placed-web.service")
    score = float(re.search(r"Overall exposure level for placed-web.service: ([\d.]+)", out.stdout).group(1))
    assert score <= 2.0, out.stdout
