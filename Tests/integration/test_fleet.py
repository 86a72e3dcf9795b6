"""The fleet export of the real placed against real brokers (mosquitto, a three-node NATS JetStream
cluster) and a persistent QoS 1 subscriber: thousands of selections through broker restarts, a broker
killed before it acknowledged, a long outage with selections and visits, placed killed mid-flush, a
network partition longer than the keepalive, TLS with client certificates and an ACL, a password from a
systemd credential, a cluster losing the node placed is connected to; what every exported event says of
its time; the status on varlink, D-Bus and placectl; fleet export off costing nothing; the unit drop-in.

Selections are pipelined Select calls on one connection (FleetPlaced.select_many): each is still its own
durable transaction, so 10,000 take as long as 10,000 fsyncs."""
import datetime
import json
import pathlib
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest
import varlink

import nmea
from conftest import ROOT
from fleet import (FleetPlaced, Ledger, Mosquitto, NatsCluster, Netns, PKI, Subscriber, clock_synchronized,
                   wait_until)
from harness import GpsFake, bin_path, conforms, free_port, private_bus

INTERFACE = varlink.Interface((ROOT / "etc" / "io.placed.Places.varlink").read_text())


@pytest.fixture
def cleanup():
    """Things to end at the end of the test, last started first."""
    items = []
    yield items
    for item in reversed(items):
        item()


@pytest.fixture
def start(placed_bin, places_db, tmp_path, cleanup):
    """Starts placed with a [Fleet] section on a copy of the places in `directory` (default
    tmp_path/placed) and waits until it serves; it is stopped at the end of the test."""

    def start(fleet, *arguments, directory=None, ready=True, **options):
        directory = pathlib.Path(directory or tmp_path / "placed")
        directory.mkdir(parents=True, exist_ok=True)
        if not (directory / "places.db").exists():
            shutil.copy(places_db, directory / "places.db")
        placed = FleetPlaced(placed_bin, directory, fleet, *arguments, **options)
        cleanup.append(placed.stop)
        return placed.wait_ready() if ready else placed

    return start


def connected(fleet):
    return fleet.get("state") == "connected"


def drained(fleet):
    return fleet.get("state") == "connected" and fleet.get("backlog") == 0 and fleet.get("inFlight") == 0


def received(subscriber, device, count, timeout, kind="marker"):
    """Waits until the subscriber has `count` distinct messages of `kind`; returns the ledger."""
    try:
        wait_until(lambda: len(Ledger(subscriber.received(), device, kind).first) >= count, timeout,
                   "%d %ss" % (count, kind))
    except AssertionError as error:
        raise AssertionError("%s: %d received" % (error, len(Ledger(subscriber.received(), device, kind).first)))
    return Ledger(subscriber.received(), device, kind)


def test_ten_thousand_selections_through_ten_broker_restarts(tmp_path, start, cleanup):
    """mosquitto stopped with SIGTERM (it saves what it acknowledged) and started again ten times while
    placed takes 10,000 selections: the persistent subscriber gets every marker, in order, a duplicate only
    as the same bytes under the same id."""
    device = "restarts"
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "placed/%s/marker" % device)
    cleanup.append(subscriber.stop)
    placed = start({"Broker": broker.url, "DeviceId": device, "KeepAlive": 5})
    placed.wait_fleet(connected, 10, "a connection")
    numbers = []
    for _ in range(10):
        numbers += placed.select_many(500)
        broker.stop()
        numbers += placed.select_many(500)  # with no broker: into the outbox
        broker.start()
    assert numbers == list(range(1, 10001))
    placed.wait_fleet(drained, 120, "the backlog drained")
    ledger = received(subscriber, device, 10000, 60)
    assert ledger.missing(numbers) == []
    assert ledger.problems == []


def test_a_broker_killed_before_it_acknowledged(tmp_path, start, cleanup):
    """A hung broker (SIGSTOP) takes 300 markers into its socket and acknowledges none, then dies
    (kill -9) and comes back: everything placed had not seen acknowledged arrives, and the connection's
    transitions are in the debug log. mosquitto saves every second here, so the subscriber's session
    outlives the kill; what mosquitto acknowledged and had not saved would be the broker's loss, and none
    is acknowledged here."""
    device = "hung"
    broker = Mosquitto(tmp_path / "broker", extra=["autosave_interval 1"])
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "placed/%s/marker" % device)
    cleanup.append(subscriber.stop)
    placed = start({"Broker": broker.url, "DeviceId": device, "KeepAlive": 5}, config="[Logging]\nLogLevel=debug\n")
    placed.wait_fleet(connected, 10, "a connection")
    url = re.escape(broker.url)
    placed.wait_for(r"fleet: stopped → connecting to %s \(started\)" % url)
    placed.wait_for(r"fleet: connecting to %s → connected to %s \(CONNACK\)" % (url, url))
    first = placed.select_many(200)
    received(subscriber, device, 200, 30)
    time.sleep(1.5)  # the session and its subscription saved
    broker.pause()
    second = placed.select_many(300)
    time.sleep(0.5)
    at_kill = placed.fleet()
    assert at_kill["backlog"] >= 600, "the 300 markers and their states are unacknowledged: %s" % at_kill
    broker.kill()
    broker.start()
    placed.wait_fleet(drained, 90, "the backlog drained")
    # Each transition of the connection is logged at debug, with its reason.
    placed.wait_for(r"fleet: connected to %s → (retrying|backing off [\d.]+ s) \(%s: " % (url, url))
    ledger = received(subscriber, device, 500, 60)
    after = [body["selection"] for body in ledger.bodies() if body["seq"] > at_kill["acknowledged"]]
    assert set(second) <= set(after), "every marker after the last acknowledged one arrived"
    assert ledger.missing(first + second) == []
    assert ledger.problems == []


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_long_outage_with_selections_and_visits(tmp_path, start, cleanup):
    """No broker while a gpsfake drive stops for a visit and 2,000 selections are made; then one comes:
    every marker and both visit events arrive, in sequence order. Each says when it was made by both
    clocks: the system time, the fix's GPS time (the drive's own, 2026-12-01 10:00 on), and whether the
    system clock was synchronized."""
    device = "outage"
    port = free_port()
    drive = tmp_path / "visit.nmea"
    nmea.stop_and_go(drive, (60.1675, 24.9384), [("go", 30, 0, 5), ("stop", 350), ("go", 850, 0, 3)])
    drive_start = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.timezone.utc).timestamp()
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "placed/%s/#" % device)
    cleanup.append(subscriber.stop)
    broker.stop()
    began = time.time()
    gps = GpsFake(drive, port)
    cleanup.append(gps.stop)
    placed = start({"Broker": broker.url, "DeviceId": device, "KeepAlive": 5}, "--gpsd", "localhost:%d" % port,
                   "--gpsd-timeout", "5", static=None, config="[Visits]\nDwellTime=10\n")
    placed.wait_for(r"ranking 1:", timeout=30)
    numbers = []
    while not any("visit" in line and "ended" in line for line in placed.lines):
        assert time.time() - began < 150, "no visit ended: %s" % placed.lines[-20:]
        if len(numbers) < 2000:
            numbers += placed.select_many(250)
        time.sleep(1)
    numbers += placed.select_many(2000 - len(numbers)) if len(numbers) < 2000 else []
    assert len(numbers) == 2000
    during = placed.fleet()
    assert during["state"] in ("connecting", "backoff") and during["backlog"] >= 4004, during
    broker.start()
    placed.wait_fleet(drained, 120, "the backlog drained")
    markers = received(subscriber, device, 2000, 60)
    visits = received(subscriber, device, 2, 30, kind="visit")
    assert markers.missing(numbers) == [] and markers.problems == [] and visits.problems == []
    events = visits.bodies()
    assert [v["event"] for v in events] == ["started", "ended"] and events[0]["visit"] == events[1]["visit"]
    assert events[0]["seq"] < events[1]["seq"] and "ended" in events[1]
    synchronized = clock_synchronized()
    for body in markers.bodies() + events:
        assert began - 1 <= parse_time(body["systemTime"]) <= time.time() + 1, body
        assert drive_start <= parse_time(body["gpsTime"]) <= drive_start + 1300, body
        assert body["clockSynchronized"] is synchronized, body
    # A marker's GPS time is its fix's: never after the next marker's, never before the drive.
    gps_times = [parse_time(body["gpsTime"]) for body in markers.bodies()]
    assert gps_times == sorted(gps_times)
    states = [json_body for topic, json_body in subscriber.received() if topic == "placed/%s/state" % device]
    assert states, "the retained state went out too"


def test_owntracks_consumers_see_the_device_and_its_visit(tmp_path, start, cleanup):
    """OwnTracks=yes: a gpsfake drive with a stop gives `_type: location` messages on
    owntracks/<user>/<device> at its moves, and the visit an `enter` and a `leave` transition on
    .../event named after the place, with the keys OwnTracks' apps read."""
    device, user = "tracked", "driver"
    port = free_port()
    drive = tmp_path / "visit.nmea"
    nmea.stop_and_go(drive, (60.1675, 24.9384), [("go", 30, 0, 5), ("stop", 350), ("go", 850, 0, 3)])
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "owntracks/#", client_id="owntracks-recorder")
    cleanup.append(subscriber.stop)
    gps = GpsFake(drive, port)
    cleanup.append(gps.stop)
    placed = start({"Broker": broker.url, "DeviceId": device, "OwnTracks": "yes", "OwnTracksUser": user},
                   "--gpsd", "localhost:%d" % port, "--gpsd-timeout", "5", static=None,
                   config="[Visits]\nDwellTime=10\n")
    wait_until(lambda: any("visit" in line and "ended" in line for line in placed.lines), 150, "the visit's end")
    placed.wait_fleet(drained, 30, "everything out")
    topic = "owntracks/%s/%s" % (user, device)
    # The broker acknowledged it all; the subscriber hears it a moment later.
    wait_until(lambda: sum(t == topic + "/event" for t, _ in subscriber.received()) >= 2, 30, "both transitions heard")
    locations = [json.loads(p) for t, p in subscriber.received() if t == topic]
    transitions = [json.loads(p) for t, p in subscriber.received() if t == topic + "/event"]
    assert locations, "no location on %s: %s" % (topic, [t for t, _ in subscriber.received()])
    # `acc` (the 95 % radius) is there exactly when placed's fixes have an accuracy, as OwnTracks has it.
    has_accuracy = placed.call("Current")["location"].get("accuracy") is not None
    for message in locations:
        assert message["_type"] == "location"
        assert 60.16 < message["lat"] < 60.20 and 24.93 < message["lon"] < 24.95, message
        assert isinstance(message["tst"], int) and message["tid"] == device[-2:], message
        assert message.get("acc", 1) > 0, message
    # gpsd's first fix of a drive has no error estimate yet; the rest have one.
    assert any("acc" in message for message in locations) == has_accuracy
    assert [m["event"] for m in transitions] == ["enter", "leave"], transitions
    for message in transitions:
        assert message["_type"] == "transition" and message["desc"], message
        assert set(message) >= {"lat", "lon", "tst", "tid"} and ("acc" in message) == has_accuracy, message
        # Where a drive's GPS time is hours from the system clock's, both times are on one clock.
        assert message["wtst"] <= message["tst"] and message["tst"] - message["wtst"] < 1200, message
    assert transitions[0]["desc"] == transitions[1]["desc"]
    assert transitions[0]["tst"] <= transitions[1]["tst"]


def test_placed_killed_mid_flush_loses_nothing(tmp_path, start, cleanup):
    """3,000 markers wait for a broker; it comes, and placed is killed (kill -9) as they flow: after a
    restart every marker arrives, the ones resent as the same bytes under the same id. On loopback the
    whole backlog is out in a fraction of a second, too fast to be killed in the middle of it: placed and
    the broker are in network namespaces, and placed's end of their link is held to 4 Mbit/s (tc's token
    bucket) while it drains, so the kill lands after some markers were acknowledged and before most were."""
    device = "killed"
    net = Netns()
    cleanup.append(net.remove)
    broker = Mosquitto(tmp_path / "broker", host=net.right_ip, port=1883, prefix=net.prefix("right"))
    cleanup.append(broker.kill)
    subscriber = Subscriber(net.right_ip, 1883, "placed/%s/marker" % device, prefix=net.prefix("right"))
    cleanup.append(subscriber.stop)
    broker.stop()
    fleet = {"Broker": broker.url, "DeviceId": device, "KeepAlive": 5}
    placed = start(fleet, prefix=net.prefix("left"))
    numbers = placed.select_many(3000)
    assert placed.fleet()["backlog"] >= 6000, "the markers and their states wait in the outbox"
    net.throttle("4mbit")
    broker.start()
    received(subscriber, device, 300, 60)
    time.sleep(1)  # the cursor is written every 0.5 s: some of what was acknowledged is off the outbox
    placed.kill()
    before_restart = len(Ledger(subscriber.received(), device).first)
    net.unthrottle()
    again = start(fleet, prefix=net.prefix("left"))
    # The new placed found events the killed one had not seen acknowledged (it was killed mid-flush), and
    # fewer than there were (the cursor had moved over what was acknowledged).
    waiting = int(again.wait_for(r"fleet: device %s, 1 broker\(s\), (\d+) event\(s\) in the outbox" % device)[0]
                  .group(1))
    assert 0 < waiting < 6000, "killed in the middle of the flush: %d event(s) left of 6,000" % waiting
    assert before_restart < 3000, "every marker was through before the kill: the test tested nothing"
    again.wait_fleet(drained, 60, "the backlog drained")
    ledger = received(subscriber, device, 3000, 60)
    assert ledger.missing(numbers) == []
    assert ledger.problems == []


def test_a_partition_longer_than_the_keepalive_reconnects_and_drains(tmp_path, start, cleanup):
    """placed and mosquitto in network namespaces joined by a veth pair; the broker's end goes down for
    15 s (no RST, no ICMP) with KeepAlive=5 while selections go on: placed notices within two keepalives,
    and once the link is back it reconnects and drains."""
    device = "partitioned"
    net = Netns()
    cleanup.append(net.remove)
    broker = Mosquitto(tmp_path / "broker", host=net.right_ip, port=1883, prefix=net.prefix("right"))
    cleanup.append(broker.kill)
    subscriber = Subscriber(net.right_ip, 1883, "placed/%s/marker" % device, prefix=net.prefix("right"))
    cleanup.append(subscriber.stop)
    placed = start({"Broker": broker.url, "DeviceId": device, "KeepAlive": 5}, prefix=net.prefix("left"))
    placed.wait_fleet(connected, 15, "a connection")
    numbers = []
    stop = threading.Event()

    def select_steadily():
        while not stop.is_set():
            numbers.extend(placed.select_many(5))
            time.sleep(0.1)

    selecting = threading.Thread(target=select_steadily, daemon=True)
    selecting.start()
    try:
        received(subscriber, device, 50, 30)
        net.cut()
        cut_at = time.monotonic()
        placed.wait_fleet(lambda f: f.get("state") in ("connecting", "backoff"), 20, "the lost link noticed")
        noticed = time.monotonic() - cut_at
        time.sleep(max(0, 15 - noticed))
        during = len(Ledger(subscriber.received(), device).first)
        net.mend()
        time.sleep(3)
    finally:
        stop.set()
        selecting.join(30)
    placed.wait_fleet(drained, 90, "reconnected and drained")
    ledger = received(subscriber, device, len(numbers), 30)
    assert ledger.missing(numbers) == []
    assert ledger.problems == []
    # Publishing: the unacknowledged data times out after one keepalive (TCP_USER_TIMEOUT), or the ping
    # unanswered for one gives up; at most two, and a little slack.
    assert noticed <= 2 * 5 + 1, "given up within two keepalives"
    assert during < len(numbers), "everything was through before the cut: the test tested nothing"


TLS_ACL = ["user consumer", "topic read placed/#", "topic read owntracks/#", "", "pattern write placed/%u/#"]


def test_tls_with_a_client_certificate_and_an_acl_and_a_wrong_ca_refused(tmp_path, start, cleanup):
    """mosquitto over TLS with a CA and certificates the test makes, each client's user name its
    certificate's common name, and an ACL letting the device write placed/<device>/# only: the markers
    arrive, the OwnTracks messages the ACL refuses are counted and not sent again. A placed trusting
    another CA refuses the broker, says why, and sends nothing."""
    device = "tlsdev"
    pki = PKI(tmp_path / "pki")
    stranger = PKI(tmp_path / "stranger", name="stranger")
    server, consumer, client = pki.issue("broker", "IP:127.0.0.1"), pki.issue("consumer"), pki.issue(device)
    broker = Mosquitto(tmp_path / "broker", tls=(pki.ca, *server), acl=TLS_ACL)
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "#", client_id="consumer", cafile=pki.ca,
                            certfile=consumer[0], keyfile=consumer[1])
    cleanup.append(subscriber.stop)
    fleet = {"Broker": broker.url, "DeviceId": device, "CAFile": pki.ca, "CertFile": client[0],
             "KeyFile": client[1], "Protocol": 5, "OwnTracks": "yes"}
    placed = start(fleet)
    numbers = placed.select_many(20)
    status = placed.wait_fleet(drained, 60, "the markers through")
    ledger = received(subscriber, device, 20, 30)
    assert ledger.missing(numbers) == [] and ledger.problems == []
    assert status["rejected"] >= 1, "the OwnTracks location the ACL refuses: %s" % status
    assert not [topic for topic, _ in subscriber.received() if topic.startswith("owntracks/")]

    doubtful = start(dict(fleet, CAFile=stranger.ca, DeviceId="tlsother"), directory=tmp_path / "stranger-placed")
    doubtful.select_many(3)
    refused = doubtful.wait_fleet(lambda f: "certificate verify failed" in (f.get("lastError") or ""), 20,
                                  "the broker's certificate refused")
    assert refused["state"] != "connected" and refused["backlog"] >= 6, refused
    doubtful.wait_for(r"fleet: .*certificate verify failed")
    assert not [topic for topic, _ in subscriber.received() if "tlsother" in topic]


def test_the_password_comes_from_a_systemd_credential(tmp_path, start, cleanup):
    """Username= and PasswordCredential=: the password is read from $CREDENTIALS_DIRECTORY, as systemd's
    LoadCredential= provides it, and shown nowhere; a wrong one is refused by the broker, and said."""
    device = "van-17"
    password = "s3cret-Passw0rd"
    broker = Mosquitto(tmp_path / "broker", passwords={device: password, "consumer": "consumer-pw"})
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "placed/%s/marker" % device, username="consumer",
                            password="consumer-pw")
    cleanup.append(subscriber.stop)
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "mqtt-password").write_text(password + "\n")
    fleet = {"Broker": broker.url, "DeviceId": device, "Username": device, "PasswordCredential": "mqtt-password"}
    placed = start(fleet, env={"CREDENTIALS_DIRECTORY": str(credentials)})
    numbers = placed.select_many(5)
    placed.wait_fleet(drained, 30, "the markers through")
    assert received(subscriber, device, 5, 30).missing(numbers) == []
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "mqtt-password").write_text("not-it\n")
    refused = start(fleet, directory=tmp_path / "wrong-placed", env={"CREDENTIALS_DIRECTORY": str(wrong)})
    status = refused.wait_fleet(lambda f: "not authori" in (f.get("lastError") or ""), 20, "the refusal")
    assert status["state"] != "connected"
    for daemon in (placed, refused):
        shown = "\n".join(daemon.lines) + str(daemon.call("Status"))
        assert password not in shown and "not-it" not in shown


def test_a_nats_cluster_node_killed_mid_burst(tmp_path, start, cleanup):
    """Three nats-server nodes (JetStream, R3 streams and consumers, MQTT listeners), placed configured
    with all three: the node it is connected to is killed in the middle of a burst of selections, and
    every marker arrives through the others."""
    if not shutil.which("nats-server"):
        pytest.fail("nats-server is not installed (scripts/packages lists it)")
    device = "clustered"
    cluster = NatsCluster(tmp_path / "nats")
    cleanup.append(cluster.stop)
    # The consumer sits on the third node; placed tries the first, then the others.
    subscriber = Subscriber("127.0.0.1", cluster.mqtt[2], "placed/%s/marker" % device)
    cleanup.append(subscriber.stop)
    placed = start({"Broker": " ".join(cluster.url(i) for i in range(3)), "DeviceId": device, "KeepAlive": 5})
    placed.wait_fleet(lambda f: connected(f) and f.get("broker") == cluster.url(0), 30, "connected to n1")
    numbers = placed.select_many(300)
    received(subscriber, device, 100, 60)
    killed_with = len(Ledger(subscriber.received(), device).first)
    cluster.kill(0)
    numbers += placed.select_many(700)
    # A JetStream cluster that lost a node elects new stream leaders, and a loaded machine can keep it
    # slow for a while: the drain is given minutes.
    try:
        placed.wait_fleet(drained, 240, "drained through the other nodes")
    except AssertionError as error:
        logs = "\n".join("n%d: %s" % (i + 1, cluster.log(i)[-1500:]) for i in (1, 2))
        raise AssertionError("%s\nreceived %d\n%s" % (error, len(Ledger(subscriber.received(), device).first), logs))
    ledger = received(subscriber, device, 1000, 60)
    assert ledger.missing(numbers) == []
    # placed publishes in sequence order on every connection; what the cluster hands the subscriber after
    # losing a node need not be: JetStream redelivers a message it never saw acknowledged (its consumer's
    # leader changed) after later ones. So first copies are in order up to the kill, and every copy after
    # it is accounted for (ids DEVICE:SEQ, duplicates byte for byte the first): consumers order by seq.
    # (placed's own order when it moves to the next broker: MosquittoTests.failsOverToTheNextBrokerWhenOneHangs.)
    assert [p for p in ledger.problems if p != "markers out of order"] == []
    before = ledger.sequences[:killed_with]
    assert before == sorted(before), "out of order before the kill: %s" % [
        (a, b) for a, b in zip(before, before[1:]) if b < a]
    assert killed_with < 1000, "the burst was over before the node died: the test tested nothing"
    assert any(re.search(r"fleet: connected to (%s|%s)" % (cluster.url(1), cluster.url(2)), line)
               for line in placed.lines), "failed over to a live node"


def mapped_libraries(pid):
    return {line.split()[-1] for line in open("/proc/%d/maps" % pid) if "/" in line}


def inet_sockets(pid):
    """The TCP sockets (IPv4 and IPv6) process `pid` holds."""
    inodes = set()
    for fd in pathlib.Path("/proc/%d/fd" % pid).iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = 0
    for table in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        for line in open(table).readlines()[1:]:
            found += line.split()[9] in inodes
    return found


def test_fleet_export_off_costs_nothing_and_sighup_turns_it_on(tmp_path, start, cleanup, placectl_bin):
    """Without Broker=: no fleet in Status, libmosquitto (and libssl) not even loaded, one thread, no TCP
    socket. A Broker= added and SIGHUP: the export starts, and Status, its IDL and placectl show it."""
    device = "reloaded"
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "placed/%s/#" % device)
    cleanup.append(subscriber.stop)
    placed = start({})
    pid = placed.proc.pid
    status = placed.call("Status")
    assert "fleet" not in status
    assert not [lib for lib in mapped_libraries(pid) if "mosquitto" in lib or "libssl" in lib]
    assert len(list(pathlib.Path("/proc/%d/task" % pid).iterdir())) == 1
    assert inet_sockets(pid) == 0
    config = placed.directory / "placed.conf"
    config.write_text(config.read_text() + "Broker=%s\nDeviceId=%s\n" % (broker.url, device))
    placed.proc.send_signal(signal.SIGHUP)
    status = placed.wait_fleet(connected, 15, "the export started by SIGHUP")
    assert status["device"] == device and status["broker"] == broker.url
    reply = placed.call("Status")
    assert conforms(INTERFACE, INTERFACE.members["Status"].out_type, reply, "Status") == []
    assert any("libmosquitto" in lib for lib in mapped_libraries(pid))
    assert inet_sockets(pid) == 1
    placed.select_many(1)
    placed.wait_fleet(drained, 15, "the marker out")
    shown = subprocess.run([placectl_bin, "--socket", placed.socket, "status"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^fleet\s+connected to %s as %s, backlog 0$" % (re.escape(broker.url), device), shown.stdout,
                     re.M), shown.stdout
    as_json = subprocess.run([placectl_bin, "--socket", placed.socket, "status", "--json"], capture_output=True,
                             text=True)
    assert '"fleet":{' in as_json.stdout.replace(" ", "")
    # The state is retained: a subscriber coming later still sees where the device is and its marker.
    wait_until(lambda: any(t == "placed/%s/status" % device and p == "online" for t, p in subscriber.received()),
               10, "online")


def test_the_fleet_status_on_dbus_and_placectl_bus(tmp_path, start, cleanup, placectl_bin):
    """The D-Bus property Fleet (a{sv}, the varlink keys), announced with PropertiesChanged when the broker
    goes away; placectl --bus status shows it."""
    device = "on-the-bus"
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    bus, address = private_bus(tmp_path)
    cleanup.append(bus.kill)
    placed = start({"Broker": broker.url, "DeviceId": device, "KeepAlive": 5}, bus=address)
    placed.wait_fleet(connected, 15, "a connection")

    def fleet_property():
        out = subprocess.run(["busctl", "--address=" + address, "--json=short", "get-property", "io.placed.Placed1",
                              "/io/placed/Placed1", "io.placed.Placed1", "Fleet"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        import json
        return {key: value["data"] for key, value in json.loads(out.stdout)["data"].items()}

    shown = fleet_property()
    assert shown["state"] == "connected" and shown["device"] == device and shown["broker"] == broker.url
    assert set(shown) == {"state", "broker", "device", "backlog", "inFlight", "acknowledged", "dropped", "rejected"}
    monitor = subprocess.Popen(["gdbus", "monitor", "--address", address, "--dest", "io.placed.Placed1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    heard = []
    reader = threading.Thread(target=lambda: heard.extend(monitor.stdout), daemon=True)
    reader.start()
    time.sleep(0.5)
    broker.stop()
    wait_until(lambda: any("PropertiesChanged" in line and "Fleet" in line for line in heard), 15,
               "PropertiesChanged for Fleet")
    monitor.terminate()
    assert fleet_property()["state"] != "connected"
    out = subprocess.run([placectl_bin, "--bus", "--address", address, "status"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^fleet\s+(connecting|backoff) \(%s\) as %s" % (re.escape(broker.url), device), out.stdout,
                     re.M), out.stdout


def test_fleet_dropin_allows_the_brokers_and_keeps_the_unit_under_2(tmp_path, placed_bin, placectl_bin):
    """placectl fleet-dropin reads [Fleet] through placed --check-config and writes IPAddressAllow= for the
    brokers and LoadCredential= for the password; with the drop-in in place, systemd-analyze security
    (offline) still scores placed.service at most 2.0."""
    (tmp_path / "placed.conf").write_text("[Fleet]\nBroker=mqtts://192.0.2.10 mqtts://[2001:db8::10]:8884 "
                                          "mqtt://127.0.0.1\nUsername=van-17\nPasswordCredential=mqtt-password\n")
    out = subprocess.run([placectl_bin, "fleet-dropin", "--config", tmp_path / "placed.conf", "--placed", placed_bin],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    settings = [line for line in out.stdout.splitlines() if line and not line.startswith("#")]
    assert settings == ["[Service]", "IPAddressAllow=192.0.2.10", "IPAddressAllow=2001:db8::10",
                        "LoadCredential=mqtt-password:/etc/placed/credentials/mqtt-password"], out.stdout
    root = tmp_path / "root"
    (root / "etc/systemd/system/placed.service.d").mkdir(parents=True)
    unit = (ROOT / "systemd" / "placed.service").read_text().replace("ExecStart=/usr/bin/placed",
                                                                      "ExecStart=%s" % placed_bin)
    (root / "etc/systemd/system/placed.service").write_text(unit)
    (root / "etc/systemd/system/placed.service.d/fleet.conf").write_text(out.stdout)
    analyzed = subprocess.run(["systemd-analyze", "security", "--offline=true", "--root=%s" % root, "placed.service"],
                              capture_output=True, text=True)
    assert "allow list with non-localhost entries" in analyzed.stdout, "the drop-in was read: " + analyzed.stdout
    score = float(re.search(r"Overall exposure level for placed.service: ([\d.]+)", analyzed.stdout).group(1))
    assert score <= 2.0, analyzed.stdout
    # A bad [Fleet] is placed's own complaint, and no drop-in.
    (tmp_path / "bad.conf").write_text("[Fleet]\nBroker=mqtt://192.0.2.10\nUsername=u\nPasswordCredential=pw\n")
    bad = subprocess.run([placectl_bin, "fleet-dropin", "--config", tmp_path / "bad.conf", "--placed", placed_bin],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "clear text" in bad.stderr and bad.stdout == ""


def test_bench_run_reads_every_fleet_figure():
    """A short `placed-bench fleet`: it measures against a mosquitto of its own, and bench/run reads each
    of its three figures (the idle one judged against the keepalive)."""
    import importlib.machinery
    import importlib.util

    bench = bin_path("release", "placed-bench")
    out = subprocess.run([bench, "fleet", "--markers", "500", "--backlog", "5000", "--idle", "12", "--keepalive", "5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    loader = importlib.machinery.SourceFileLoader("bench_run", str(ROOT / "bench" / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_run", loader))
    loader.exec_module(module)
    rows = {row[0]: row for row in module.rows("fleet", out.stdout)}
    assert set(rows) == {"fleet: markers through the outbox to PUBACK (mosquitto)",
                         "fleet: drain of a 5,000-event backlog", "fleet: idle wake-ups, connected (strace)"}
    assert rows["fleet: idle wake-ups, connected (strace)"][5] == "met", out.stdout
