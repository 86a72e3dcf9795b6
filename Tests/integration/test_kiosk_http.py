"""placed-web at the HTTP level (http.client, no browser): the page and its files, the named errors for
bad input, the same-origin and token checks on POST /select, the bounds on bodies and event clients,
and what placed-web does while placed is away."""
import http.client
import json
import re
import socket
import subprocess
import time

import pytest

import kiosk
from harness import bin_path, free_port, open_varlink


@pytest.fixture(scope="session")
def placed_web_bin():
    path = bin_path("release", "placed-web")
    assert path.exists(), "build placed-web first: swift build -c release --product placed-web"
    return path


@pytest.fixture
def gateway(placed_web_bin, start_placed):
    placed = start_placed()
    web = kiosk.PlacedWeb(placed_web_bin, placed.socket, "--max-event-clients", 3)
    web.placed = placed
    yield web
    assert web.stop() == 0


def request(web, method, path, body=None, headers=None, host=None):
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", host or "127.0.0.1:%d" % web.port)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read()
        return response.status, dict(response.getheaders()), data
    finally:
        connection.close()


def page_token(web):
    status, _, body = request(web, "GET", "/")
    assert status == 200
    return re.search(rb'name="placed-token" content="([0-9a-f]{32})"', body).group(1).decode()


def select(web, place_id, token, origin=None, content_type="application/json", body=None):
    headers = {"Origin": origin or web.origin, "Content-Type": content_type}
    if token is not None:
        headers["X-Placed-Token"] = token
    return request(web, "POST", "/select", body if body is not None else json.dumps({"id": place_id}).encode(),
                   headers)


def error_name(data):
    return json.loads(data)["error"]


def second_place(web):
    with open_varlink(web.placed.socket) as client:
        return client.Current()["places"][1]


def test_page_carries_a_fresh_token_and_the_security_headers(gateway):
    status, headers, body = request(gateway, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert b"<script>" not in body and b"style=" not in body, "no inline script or style"
    assert page_token(gateway) != page_token(gateway), "each page gets its own token"
    for path, kind in [("/app.js", "text/javascript"), ("/app.css", "text/css"), ("/favicon.svg", "image/svg+xml"),
                       ("/leaflet/leaflet.js", "text/javascript"), ("/leaflet/leaflet.css", "text/css"),
                       ("/leaflet/images/marker-icon.png", "image/png")]:
        status, headers, body = request(gateway, "GET", path)
        assert status == 200 and headers["Content-Type"].startswith(kind) and body, path
    assert request(gateway, "GET", "/leaflet/leaflet.js")[2] == (kiosk.LEAFLET / "leaflet.js").read_bytes()


def test_select_from_the_page_is_recorded(gateway):
    place = second_place(gateway)
    status, _, data = select(gateway, place["id"], page_token(gateway))
    assert status == 200, data
    assert json.loads(data)["marker"]["place"]["id"] == place["id"]
    with open_varlink(gateway.placed.socket) as client:
        assert client.History(1)["markers"][0]["place"]["id"] == place["id"]


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "https://127.0.0.1"])
def test_select_from_another_origin_is_forbidden(gateway, origin):
    status, _, data = select(gateway, second_place(gateway)["id"], page_token(gateway), origin=origin)
    assert (status, error_name(data)) == (403, "forbidden-origin")


def test_select_without_origin_is_forbidden(gateway):
    token = page_token(gateway)
    status, _, data = request(gateway, "POST", "/select", b'{"id":"osm:node/1"}',
                              {"Content-Type": "application/json", "X-Placed-Token": token})
    assert (status, error_name(data)) == (403, "forbidden-origin")


@pytest.mark.parametrize("token", [None, "", "0" * 32, "not-a-token"])
def test_select_without_a_page_token_is_forbidden(gateway, token):
    page_token(gateway)  # tokens exist, just not this one
    status, _, data = select(gateway, second_place(gateway)["id"], token)
    assert (status, error_name(data)) == (403, "bad-token")
    with open_varlink(gateway.placed.socket) as client:
        assert client.History(1)["markers"] == [], "nothing was selected"


def test_oversized_bodies_are_refused(gateway):
    token = page_token(gateway)
    status, _, data = select(gateway, None, token, body=b"{" + b" " * 5000 + b"}")
    assert (status, error_name(data)) == (413, "too-large")
    # Declared small, sent chunked: refused as it arrives.
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    connection.request("POST", "/select", body=iter([b"x" * 3000, b"y" * 3000]),
                       headers={"Origin": gateway.origin, "Content-Type": "application/json",
                                "X-Placed-Token": token}, encode_chunked=True)
    response = connection.getresponse()
    assert (response.status, error_name(response.read())) == (413, "too-large")
    connection.close()


@pytest.mark.parametrize("body,content_type,status,name", [
    (b"not json", "application/json", 400, "bad-request"),
    (b'{"id": 5}', "application/json", 400, "bad-request"),
    (b'{"id": ""}', "application/json", 400, "bad-request"),
    (b'{"id": "osm:node/1"}', "text/plain", 415, "unsupported-media-type"),
    (b'id=osm:node/1', "application/x-www-form-urlencoded", 415, "unsupported-media-type"),
    (b'{"id": "osm:node/1"}', "application/json", 409, "not-in-ranking"),
])
def test_bad_select_bodies_are_named_errors(gateway, body, content_type, status, name):
    got, _, data = select(gateway, None, page_token(gateway), content_type=content_type, body=body)
    assert (got, error_name(data)) == (status, name)


@pytest.mark.parametrize("method,path,status,name", [
    ("GET", "/nothing", 404, "not-found"),
    ("GET", "/../etc/passwd", 404, "not-found"),
    ("GET", "/leaflet/../../../../etc/passwd", 404, "not-found"),
    ("GET", "/select", 405, "method-not-allowed"),
    ("DELETE", "/", 405, "method-not-allowed"),
    ("POST", "/events", 405, "method-not-allowed"),
    ("GET", "/map?latitude=91&longitude=24.9&radius=100", 400, "bad-request"),
    ("GET", "/map?latitude=60.17&longitude=24.9&radius=5000", 400, "bad-request"),
    ("GET", "/map?latitude=60.17&longitude=24.9", 400, "bad-request"),
    ("GET", "/map?latitude=nan&longitude=24.9&radius=10", 400, "bad-request"),
])
def test_bad_requests_are_named_errors(gateway, method, path, status, name):
    got, headers, data = request(gateway, method, path)
    assert (got, error_name(data)) == (status, name)
    assert headers["Content-Type"] == "application/json"
    if status == 405:
        assert headers["Allow"]


@pytest.mark.parametrize("host", ["evil.example:8080", "evil.example", "127.0.0.2:80", ""])
def test_other_hosts_are_refused(gateway, host):
    """A page on another name rebound to 127.0.0.1 (DNS rebinding) cannot read the state."""
    status, _, data = request(gateway, "GET", "/state", host=host or " ")
    assert (status, error_name(data)) == (403, "forbidden-host")


def test_localhost_is_the_same_host(gateway):
    assert request(gateway, "GET", "/state", host="localhost:%d" % gateway.port)[0] == 200


def test_a_wildcard_address_still_checks_the_host(placed_web_bin, start_placed):
    """Listening on 0.0.0.0 the page answers to any IP address, localhost and the machine's name, and
    still refuses another name: DNS rebinding works against every address the machine has."""
    placed = start_placed()
    port = free_port()
    web = kiosk.PlacedWeb(placed_web_bin, placed.socket, "--listen", "0.0.0.0:%d" % port, port=port)
    try:
        for host in ["127.0.0.1", "192.0.2.7", "[::1]", "localhost", socket.gethostname()]:
            assert request(web, "GET", "/state", host="%s:%d" % (host, port))[0] == 200, host
        for host in ["evil.example:%d" % port, "192.0.2.7:%d" % (port + 1)]:
            status, _, data = request(web, "GET", "/state", host=host)
            assert (status, error_name(data)) == (403, "forbidden-host"), host
    finally:
        assert web.stop() == 0


def test_map_answers_the_map_layers_features(gateway):
    status, _, data = request(gateway, "GET", "/map?latitude=60.1699&longitude=24.9384&radius=200&language=sv")
    assert status == 200
    features = json.loads(data)["features"]
    with open_varlink(gateway.placed.socket) as client:
        direct = client.Map(latitude=60.1699, longitude=24.9384, radius=200, language="sv")["features"]
    assert features == direct and {f["properties"]["kind"] for f in features} >= {"street", "building"}


def test_details_answers_placeds_details_and_names_bad_input(gateway):
    # The card of the selected place: GET /details, placed's Details through placed-web.
    with open_varlink(gateway.placed.socket) as client:
        place = client.Current()["places"][0]
    status, headers, body = request(gateway, "GET", "/details?id=%s&language=fi" % place["id"])
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["place"]["id"] == place["id"]
    status, _, body = request(gateway, "GET", "/details?id=%s&time=2026-07-01T12:00:00.000Z" % place["id"])
    assert status == 200 and json.loads(body)["place"]["id"] == place["id"]
    for path, expected, name in [("/details", 400, "bad-request"), ("/details?id=", 400, "bad-request"),
                                 ("/details?id=osm:node/1", 404, "unknown-place"),
                                 ("/details?id=%s&time=noon" % place["id"], 400, "bad-request"),
                                 ("/details?id=%s&language=%%3Cx%%3E" % place["id"], 400, "bad-request")]:
        status, _, body = request(gateway, "GET", path)
        assert (status, json.loads(body)["error"]) == (expected, name), (path, body)
    assert request(gateway, "POST", "/details?id=" + place["id"], b"")[0] == 405


def test_no_map_layer_is_no_features_and_says_why(placed_web_bin, placectl_bin, placed_bin, tmp_path):
    """A places file imported with --no-map: the page gets no features, a reason, and no error status."""
    from conftest import HELSINKI
    from harness import PlacedService
    subprocess.run([placectl_bin, "import", HELSINKI, "--no-map", "--db", tmp_path / "places.db"], check=True,
                   capture_output=True, timeout=120)
    placed = PlacedService(placed_bin, tmp_path)
    placed.wait_ready()
    web = kiosk.PlacedWeb(placed_web_bin, placed.socket)
    try:
        status, _, data = request(web, "GET", "/map?latitude=60.1699&longitude=24.9384&radius=200")
        assert status == 200
        assert json.loads(data) == {"features": [], "unavailable": "io.placed.Places.NoMapLayer"}
    finally:
        web.stop()
        placed.stop()


def read_event(response):
    """The next `state` event on an open event stream: its data, parsed."""
    lines = []
    while True:
        line = response.fp.readline()
        assert line, "the stream ended"
        line = line.decode().rstrip("\r\n")
        if line == "" and any(l.startswith("data: ") for l in lines):
            data = [l[6:] for l in lines if l.startswith("data: ")]
            return json.loads(data[0])
        if line:
            lines.append(line)


def read_connected(response):
    """The first event once placed-web hears placed (a gateway just started may still be connecting)."""
    while (event := read_event(response))["upstream"] != "connected":
        assert event["upstream"] == "connecting", event
    return event


def open_events(web):
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    connection.request("GET", "/events", headers={"Accept": "text/event-stream"})
    response = connection.getresponse()
    return connection, response


def test_events_carry_the_state_and_markers(gateway):
    connection, response = open_events(gateway)
    try:
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
        first = read_connected(response)
        assert first["generation"] == 1 and first["places"]
        place = second_place(gateway)
        assert select(gateway, place["id"], page_token(gateway))[0] == 200
        event = read_event(response)
        assert event["marker"]["place"]["id"] == place["id"]
    finally:
        connection.close()


def test_too_many_event_clients_are_refused(gateway):
    open_streams = [open_events(gateway) for _ in range(3)]
    try:
        for _, response in open_streams:
            assert response.status == 200
        status, headers, data = request(gateway, "GET", "/events")
        assert (status, error_name(data)) == (503, "too-many-event-clients")
        assert headers["Retry-After"]
        # The page itself still loads: event streams cannot take every connection.
        assert request(gateway, "GET", "/")[0] == 200
    finally:
        for connection, _ in open_streams:
            connection.close()
    # Pages that left free their places.
    kiosk.wait_until("a free event place", lambda: open_events(gateway)[1].status == 200)


def test_placed_away_is_unreachable_and_comes_back(gateway, start_placed):
    connection, response = open_events(gateway)
    try:
        read_connected(response)
        gateway.placed.stop()
        lost = read_event(response)
        assert lost["upstream"] == "unreachable" and lost["reason"]
        assert lost["places"], "the last places are kept"
        status, _, data = select(gateway, "osm:node/1", page_token(gateway))
        assert (status, error_name(data)) == (503, "placed-unreachable")
        placed = start_placed(directory=gateway.placed.directory)
        back = read_event(response)
        assert back["upstream"] == "connected" and back["generation"] == 1
        gateway.placed = placed
        assert select(gateway, second_place(gateway)["id"], page_token(gateway))[0] == 200
    finally:
        connection.close()


def test_connections_are_bounded(placed_web_bin, start_placed):
    placed = start_placed()
    web = kiosk.PlacedWeb(placed_web_bin, placed.socket, "--max-connections", 4, "--max-event-clients", 2)
    held = []
    try:
        for _ in range(4):
            held.append(socket.create_connection(("127.0.0.1", web.port)))
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", web.port), timeout=1)
        extra.sendall(b"GET /state HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % web.port)
        with pytest.raises(socket.timeout):  # waits in the backlog, not served, while four are open
            extra.recv(100)
        for s in held:
            s.close()
        extra.settimeout(10)
        assert extra.recv(100).startswith(b"HTTP/1.1 200"), "served once the others left"
        extra.close()
    finally:
        for s in held:
            s.close()
        assert web.stop() == 0


def test_socket_passed_by_systemd_is_served(placed_web_bin, start_placed, tmp_path):
    placed = start_placed()
    port = free_port()
    proc = subprocess.Popen(
        ["systemd-socket-activate", "-l", "127.0.0.1:%d" % port, str(placed_web_bin), "--socket", str(placed.socket),
         "--web-dir", str(kiosk.WEB)], stderr=subprocess.PIPE, text=True)
    try:
        web = type("Passed", (), {"port": port, "origin": "http://127.0.0.1:%d" % port})()
        status, _, data = kiosk.wait_until("the passed socket", lambda: (lambda r: r if r[0] == 200 else None)(
            request(web, "GET", "/state")))
        assert json.loads(data)["upstream"] in ("connected", "connecting")
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        assert "serving http://127.0.0.1:%d/" % port in proc.stderr.read()


@pytest.mark.parametrize("arguments,message", [
    (["--listen", "8080"], "expected ADDRESS:PORT"),
    (["--listen", "127.0.0.1:0"], "the port must be 1 to 65535"),
    (["--listen", "example.com:80"], "not an IPv4 address"),
    (["--max-event-clients", "0"], "--max-event-clients 0"),
    (["--max-connections", "4", "--max-event-clients", "4"], "below --max-connections"),
    (["--frobnicate"], "unknown option --frobnicate"),
    (["--socket"], "--socket needs a value"),
])
def test_usage_errors(placed_web_bin, arguments, message):
    out = subprocess.run([placed_web_bin, *arguments], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and message in out.stderr


def test_listen_address_in_use_is_an_error(placed_web_bin, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([placed_web_bin, "--socket", tmp_path / "none", "--listen", "127.0.0.1:%d" % port],
                             capture_output=True, text=True, timeout=10)
    assert out.returncode == 1 and "Address already in use" in out.stderr
