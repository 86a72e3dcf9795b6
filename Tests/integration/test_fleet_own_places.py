"""Own places and the fleet, with the real placed, mosquitto and paho-mqtt: a gpsfake drive through three
sites publishes each enter and leave on placed's transition topic and as OwnTracks transitions; the fleet's
commands (placed's own and OwnTracks' setWaypoints), each delivered more than once, are applied once, across
a restart too, and a malformed or oversized one gets an error result and changes nothing."""
import json
import time

import paho.mqtt.client as mqtt

import nmea
from fleet import Mosquitto, Subscriber, wait_until
from harness import GpsFake, free_port
from test_fleet import cleanup, start  # noqa: F401
from test_own_places import circle


def test_a_drive_through_three_sites_is_published_on_placeds_and_owntracks_topics(tmp_path, start, cleanup):  # noqa: F811
    """gpsfake drives east at 5 m/s through three own places of 100 m radius (the drive of
    test_own_places): each enter and leave reaches a mosquitto subscriber on placed/<device>/transition
    and as an OwnTracks transition on owntracks/<user>/<device>/event, in order, with the keys OwnTracks'
    apps read; the place a setWaypoints made carries its waypoint's tst as wtst."""
    device, user = "van-7", "fleet"
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "#", client_id="transition-consumer")
    cleanup.append(subscriber.stop)
    begin = (60.1699, 24.93)
    drive = tmp_path / "drive.nmea"
    nmea.stop_and_go(drive, begin, [("stop", 30), ("go", 640, 90, 5), ("stop", 60)])
    sites = [circle(key, *_east(begin, metres), 100) for key, metres in [("a", 600), ("b", 1400), ("c", 2400)]]
    port = free_port()
    # gpsfake replays 50 epochs a second: the drive's 20 s inside a site pass in 0.4 s, so no dwell.
    placed = start({"Broker": broker.url, "DeviceId": device, "OwnTracks": "yes", "OwnTracksUser": user,
                    "AcceptCommands": "yes"},
                   "--gpsd", "localhost:%d" % port, "--gpsd-timeout", "5", static=None,
                   config="[OwnPlaces]\nBoundaryMargin=5\nBoundaryDwell=0\n")
    placed.wait_for("accepting commands", timeout=30)
    assert placed.call("PutPlaces", places=sites[:2]) == {"count": 2}
    # The third site comes from the fleet, as an OwnTracks waypoint: its tst is the transitions' wtst.
    lat, lon = _east(begin, 2400)
    _publish("127.0.0.1", broker.port, "owntracks/%s/%s/cmd" % (user, device), {
        "_type": "cmd", "action": "setWaypoints", "waypoints": {"_type": "waypoints", "waypoints": [
            {"_type": "waypoint", "desc": "C", "lat": lat, "lon": lon, "rad": 100, "tst": 1700000000, "rid": "c"}]}})
    wait_until(lambda: len(placed.call("OwnPlaces")["places"]) == 3, 20, "the waypoint as an own place")
    gps = GpsFake(drive, port)
    cleanup.append(gps.stop)

    placed_topic, owntracks_topic = "placed/%s/transition" % device, "owntracks/%s/%s/event" % (user, device)

    def of(topic):
        bodies = [json.loads(payload) for t, payload in subscriber.received() if t == topic]
        # A visit is an OwnTracks transition too (without a rid): only the own places' count here.
        return [b for b in bodies if topic == placed_topic or "rid" in b]
    wait_until(lambda: len(of(placed_topic)) >= 6 and len(of(owntracks_topic)) >= 6, 120,
               "six transitions on each topic")
    expected = [("enter", "a"), ("leave", "a"), ("enter", "b"), ("leave", "b"), ("enter", "c"), ("leave", "c")]
    ours = of(placed_topic)
    assert [(m["event"], m["place"]) for m in ours] == [(e, "own:" + k) for e, k in expected], ours
    for message in ours:
        assert message["type"] == "transition" and message["device"] == device
        assert message["id"] == "%s:%d" % (device, message["seq"])
        assert message["name"] == message["place"][4:].capitalize() or message["name"] == "C"
        assert 60.16 < message["location"]["latitude"] < 60.18, message
    assert [m["seq"] for m in ours] == sorted(m["seq"] for m in ours)
    theirs = of(owntracks_topic)
    assert [(m["event"], m["rid"]) for m in theirs] == expected, theirs
    for message, mine in zip(theirs, ours):
        assert message["_type"] == "transition" and message["t"] == "c" and message["tid"] == device[-2:]
        assert message["desc"] == mine["name"]
        assert abs(message["lat"] - mine["location"]["latitude"]) < 1e-9, (message, mine)
        assert abs(message["lon"] - mine["location"]["longitude"]) < 1e-9
        # The drive's fixes carry an accuracy: OwnTracks' consumers need acc, and drop 0.
        assert isinstance(message["tst"], int) and message["acc"] >= 1, message
        assert message["wtst"] == (1700000000 if message["rid"] == "c" else 0), message


def test_commands_are_applied_once_and_bad_ones_change_nothing(tmp_path, start, cleanup):  # noqa: F811
    """A paho-mqtt client sends placed's own command and OwnTracks' setWaypoints, each twice with the
    same id, and once more while placed is stopped (the broker delivers it from placed's persistent
    session at the restart): each is applied once, a change made in between is not undone, and every
    delivery gets its result. A malformed, an invalid and an oversized command get an error result and
    change nothing."""
    device, user = "van-8", "fleet"
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    results = Subscriber("127.0.0.1", broker.port, "placed/%s/cmd/result" % device, client_id="back-office")
    cleanup.append(results.stop)
    fleet = {"Broker": broker.url, "DeviceId": device, "OwnTracks": "yes", "OwnTracksUser": user,
             "AcceptCommands": "yes"}
    placed = start(fleet)
    placed.wait_for("accepting commands on placed/%s/cmd, owntracks/%s/%s/cmd" % (device, user, device), timeout=30)
    command_topic, waypoints_topic = "placed/%s/cmd" % device, "owntracks/%s/%s/cmd" % (user, device)
    put = {"id": "req-1", "put": [circle("a", 60.17, 24.94, 50), circle("b", 60.171, 24.941, 50)]}
    set_waypoints = {"_type": "cmd", "action": "setWaypoints", "waypoints": [
        {"_type": "waypoint", "desc": "Gate", "lat": 60.172, "lon": 24.942, "rad": 30, "tst": 1437552714,
         "rid": "gate"}]}

    def result_bodies():
        return [json.loads(payload) for _, payload in results.received()]

    def results_of(request, count):
        wait_until(lambda: len([r for r in result_bodies() if r["request"] == request]) >= count, 30,
                   "%d result(s) of %s" % (count, request))
        return [r for r in result_bodies() if r["request"] == request]

    def own_ids():
        return sorted(p["properties"]["id"] for p in placed.call("OwnPlaces")["places"])

    _publish("127.0.0.1", broker.port, command_topic, put)
    first = results_of("req-1", 1)[0]
    assert first["ok"] and first["put"] == 2 and not first["duplicate"] and first["source"] == "placed", first
    assert own_ids() == ["own:a", "own:b"]
    # A change in between: the command delivered again must not undo it.
    assert placed.call("DeletePlaces", ids=["own:a"]) == {"count": 1}
    _publish("127.0.0.1", broker.port, command_topic, put)
    again = results_of("req-1", 2)[1]
    assert again["ok"] and again["duplicate"] and again["put"] == 2, again
    assert own_ids() == ["own:b"]

    _publish("127.0.0.1", broker.port, waypoints_topic, set_waypoints)
    _publish("127.0.0.1", broker.port, waypoints_topic, set_waypoints)
    waypoint_results = []
    wait_until(lambda: len([r for r in result_bodies() if r["source"] == "owntracks"]) >= 2, 30,
               "two setWaypoints results")
    waypoint_results = [r for r in result_bodies() if r["source"] == "owntracks"]
    assert [r["duplicate"] for r in waypoint_results] == [False, True], waypoint_results
    assert waypoint_results[0]["request"] == waypoint_results[1]["request"]
    assert own_ids() == ["own:b", "own:gate"]
    gate = next(p for p in placed.call("OwnPlaces")["places"] if p["properties"]["id"] == "own:gate")
    assert gate["properties"]["name"] == "Gate" and gate["properties"]["radius"] == 30
    assert gate["geometry"]["coordinates"] == [24.942, 60.172]
    assert len(placed.wait_for(r"fleet command .*applied before, not again", count=2)) == 2

    # Delivered while placed is down: the broker keeps it for placed's session and delivers it at the
    # restart, where the request id is still remembered.
    placed.call("DeletePlaces", ids=["own:gate"])
    assert placed.stop() == 0
    _publish("127.0.0.1", broker.port, command_topic, put)
    _publish("127.0.0.1", broker.port, waypoints_topic, set_waypoints)
    placed = start(fleet)
    results_of("req-1", 3)
    wait_until(lambda: len([r for r in result_bodies() if r["source"] == "owntracks"]) >= 3, 30,
               "the third setWaypoints result")
    assert [r["duplicate"] for r in result_bodies() if r["request"] == "req-1"] == [False, True, True]
    assert own_ids() == ["own:b"], "nothing applied twice, nothing undone"

    # Bad commands: an error result each, nothing changed, each logged.
    before = placed.call("OwnPlaces")
    _publish("127.0.0.1", broker.port, command_topic, b"{not json")
    bad_place = circle("c", 60.17, 24.94, 0)
    _publish("127.0.0.1", broker.port, command_topic, {"id": "req-bad", "put": [bad_place, circle("d", 60.1, 24.9, 5)]})
    _publish("127.0.0.1", broker.port, command_topic, {"id": "req-big", "delete": ["own:b"], "pad": "x" * (16 << 20)})
    _publish("127.0.0.1", broker.port, waypoints_topic, {"_type": "cmd", "action": "reportLocation"})
    wait_until(lambda: len([r for r in result_bodies() if not r["ok"]]) >= 4, 60, "four error results")
    errors = [r for r in result_bodies() if not r["ok"]]
    assert [(r["request"], r["error"]) for r in errors[:2]] == [(None, "malformed"), ("req-bad", "invalidOwnPlace")]
    assert "radius 0" in errors[1]["reason"] and "feature 0" in errors[1]["reason"], errors[1]
    assert errors[2]["error"] == "tooLarge" and errors[2]["request"] is None, errors[2]
    assert errors[3]["error"] == "unsupported" and errors[3]["source"] == "owntracks", errors[3]
    assert placed.call("OwnPlaces") == before
    assert len(placed.wait_for(r"fleet: command on .* refused, nothing changed", count=4)) == 4


def test_without_accept_commands_nothing_is_subscribed(tmp_path, start, cleanup):  # noqa: F811
    """AcceptCommands= is off by default: a command published to the device changes nothing and gets
    no result."""
    device = "van-9"
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    results = Subscriber("127.0.0.1", broker.port, "placed/%s/cmd/result" % device, client_id="back-office")
    cleanup.append(results.stop)
    placed = start({"Broker": broker.url, "DeviceId": device})
    placed.wait_fleet(lambda f: f.get("state") == "connected", 30, "connected")
    _publish("127.0.0.1", broker.port, "placed/%s/cmd" % device, {"id": "r", "put": [circle("a", 60.17, 24.94, 50)]})
    time.sleep(2)
    assert placed.call("OwnPlaces")["places"] == [] and results.received() == []
    assert not any("accepting commands" in line for line in placed.lines)


def _east(begin, metres):
    point = nmea.WGS84.Direct(*begin, 90, metres)
    return point["lat2"], point["lon2"]


def _publish(host, port, topic, message):
    """Publishes one QoS 1 message from a paho-mqtt client of its own, and waits for the broker's PUBACK."""
    payload = message if isinstance(message, bytes) else json.dumps(message).encode()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="", protocol=mqtt.MQTTv311)
    client.connect(host, port, keepalive=10)
    client.loop_start()
    try:
        info = client.publish(topic, payload, qos=1)
        info.wait_for_publish(30)
        assert info.is_published(), "the broker did not acknowledge the command"
    finally:
        client.disconnect()
        client.loop_stop()
