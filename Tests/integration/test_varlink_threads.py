"""Rank connections served by request threads (issue 19): after a Rank call the loop hands a connection
with nothing else open to a thread blocked in its recv, which answers Rank calls through the same handler
with the loop's lock held; anything else goes back to the loop with the bytes not yet taken. Replies are
the loop's byte for byte; other calls, bad messages, stalled readers, more clients than threads, a stop
and a Refresh that switches files all go as they do on the loop."""
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

from conftest import HELSINKI
from harness import PLACES

THREADS = 4  # VarlinkAdapter.requestThreads
POSITIONS = [(60.1699, 24.9384), (60.1719, 24.9414), (60.1675, 24.9500), (60.1660, 24.9370), (60.1770, 24.9520),
             (60.1650, 24.9450)]  # inside the extract


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


def threads(placed):
    return len(os.listdir("/proc/%d/task" % placed.proc.pid))


def blocked_in_recv(placed, expected, timeout=5.0):
    """How many of the daemon's threads other than the main one sleep in a socket read: `expected` as soon
    as it is so, else the last count after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        count = 0
        for task in os.listdir("/proc/%d/task" % placed.proc.pid):
            if int(task) == placed.proc.pid:
                continue
            try:
                with open("/proc/%d/task/%s/wchan" % (placed.proc.pid, task)) as f:
                    wchan = f.read()
                with open("/proc/%d/task/%s/stat" % (placed.proc.pid, task)) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                continue
            # wchan: the kernel function it sleeps in (an idle request thread sleeps in a futex wait).
            if state == "S" and "unix_stream_read" in wchan:
                count += 1
        if count == expected or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def rank_until_on_a_thread(placed, raw, tries=20):
    """Ranks on `raw` until a thread holds it, and whether one did. The loop hands a connection over after
    a Rank it answered only when a thread is free then; while every thread is still giving back connections
    their clients just closed (a busy machine), the connection stays on the loop until its next Rank."""
    for _ in range(tries):
        rank_bytes(raw, *POSITIONS[0])
        if blocked_in_recv(placed, 1, timeout=0.5) == 1:
            return True
    return False


def test_rank_replies_from_a_thread_are_the_loops_byte_for_byte(start_placed):
    placed = start_placed()
    assert threads(placed) == 1, "no request thread before a Rank connection"
    loop_served = []
    for lat, lon in POSITIONS:
        # A fresh connection's first call is served on the loop.
        with placed.raw() as fresh:
            loop_served.append(rank_bytes(fresh, lat, lon, accuracy=25.0, language="sv"))
    with placed.raw() as raw:
        assert rank_until_on_a_thread(placed, raw), "the open connection went to a thread, the closed ones came back"
        assert 2 <= threads(placed) <= 1 + THREADS
        for (lat, lon), expected in zip(POSITIONS, loop_served):
            assert rank_bytes(raw, lat, lon, accuracy=25.0, language="sv") == expected
        # Errors by name from the thread as from the loop.
        for bad in [dict(lat=91.0, lon=0.0), dict(lat=60.17, lon=24.94, limit=-1),
                    dict(lat=60.17, lon=24.94, accuracy=-5.0), dict(lat=60.17, lon=24.94, unknown=1)]:
            with placed.raw() as fresh:
                expected = rank_bytes(fresh, **bad)
            assert json.loads(expected)["error"]
            assert rank_bytes(raw, **bad) == expected
        assert json.loads(rank_bytes(raw, *POSITIONS[1]))["parameters"]["places"]


def test_other_calls_after_rank_go_back_to_the_loop_and_are_answered(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        ranked = json.loads(rank_bytes(raw, *POSITIONS[0]))["parameters"]["places"]
        json.loads(rank_bytes(raw, *POSITIONS[0]))  # from the thread
        assert blocked_in_recv(placed, 1) == 1
        # Select on the same connection: the thread hands it back, the loop answers.
        current = raw.call(PLACES + ".Current")
        near = current["places"][0]["id"]
        marker = raw.call(PLACES + ".Select", id=near)["marker"]
        assert marker["place"]["id"] == near
        info = raw.call("org.varlink.service.GetInfo")
        assert PLACES in info["interfaces"]
        # Rank again (to a thread again: the pick now weighs in), then a Watch stream on the same connection.
        # (A pick's weight decays with the wall clock, so likelihoods differ in their last digits from one
        # call to the next: the places and their order are compared.)
        def ids(reply):
            return [p["id"] for p in json.loads(reply)["parameters"]["places"]]

        with placed.raw() as fresh:
            expected = ids(rank_bytes(fresh, *POSITIONS[0]))
        assert json.loads(rank_bytes(raw, *POSITIONS[0]))["parameters"]["places"] != ranked, "the pick weighs in"
        assert ids(rank_bytes(raw, *POSITIONS[0])) == expected
        assert blocked_in_recv(placed, 1) == 1
        raw.send(PLACES + ".Watch", more=True)
        first = raw.receive()
        assert first["continues"] is True and first["parameters"]["marker"]["place"]["id"] == near
        with placed.raw() as control:
            control.call(PLACES + ".Refresh")
        message = raw.receive()
        assert message["continues"] is True and message["parameters"]["generation"] == first["parameters"][
            "generation"] + 1


def test_pipelined_rank_then_other_calls_are_answered_in_order(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        rank_bytes(raw, *POSITIONS[0])
        rank_bytes(raw, *POSITIONS[0])
        # Several calls in one write: the thread answers the Ranks and leaves the rest to the loop.
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


def padded_select(size):
    empty = json.dumps({"method": PLACES + ".Select", "parameters": {"id": ""}}).encode()
    return empty.replace(b'"id": ""', b'"id": "' + b"x" * (size - len(empty)) + b'"')


def test_a_bad_message_after_rank_gets_its_named_error_then_disconnect(start_placed):
    placed = start_placed()
    limit = 64 * 1024
    for message, expected in [
        (padded_select(limit + 1) + b"\0", {"error": PLACES + ".MessageTooLarge", "parameters": {"limit": limit}}),
        (b"x" * (limit + 10), {"error": PLACES + ".MessageTooLarge", "parameters": {"limit": limit}}),
        (b"{nonsense\0", None),
        (b'{"method": "io.placed.Places.Rank", "more": "yes"}\0', None),
    ]:
        with placed.raw() as raw:
            rank_bytes(raw, *POSITIONS[0])
            rank_bytes(raw, *POSITIONS[0])  # on the thread now
            try:
                raw.send_raw(message)
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = raw.receive()
            if expected:
                assert reply == expected
            else:
                assert reply["error"] == PLACES + ".InvalidMessage" and reply["parameters"]["reason"]
            assert raw.is_closed_by_server()
    with placed.raw() as other:
        assert json.loads(rank_bytes(other, *POSITIONS[0]))["parameters"]["places"]


def test_a_rank_client_that_never_reads_is_dropped_and_harms_nobody(start_placed):
    placed = start_placed()
    watch = placed.raw()
    watch.send(PLACES + ".Watch", more=True)
    first = watch.receive()["parameters"]
    good = placed.raw()
    rank_bytes(good, *POSITIONS[0])
    expected = rank_bytes(good, *POSITIONS[1])
    with placed.raw() as flood:
        rank_bytes(flood, *POSITIONS[0])  # on a thread from here
        flood.sock.settimeout(20)
        try:
            flood.send_raw(rank_message(*POSITIONS[1]) * 3000)  # ~5 kB replies each, none read
        except (BrokenPipeError, ConnectionResetError):
            pass
        # Back on the loop once the socket took no more, then dropped when its queue filled.
        assert flood.is_closed_by_server(10)
    assert rank_bytes(good, *POSITIONS[1]) == expected, "another thread's client still served"
    with placed.raw() as control:
        control.call(PLACES + ".Refresh")
    assert watch.receive()["parameters"]["generation"] == first["generation"] + 1
    good.close()
    watch.close()


def test_more_rank_clients_than_threads_are_all_served_right(start_placed):
    placed = start_placed()
    with placed.raw() as reference:
        expected = [rank_bytes(reference, lat, lon) for lat, lon in POSITIONS]
    clients, failures = 12, []

    def client(number):
        try:
            with placed.raw(timeout=30) as raw:
                for n in range(150):
                    k = (number + n) % len(POSITIONS)
                    got = rank_bytes(raw, *POSITIONS[k])
                    if got != expected[k]:
                        failures.append((number, n, got[:200]))
                        return
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append((number, repr(error)))

    workers = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for worker in workers:
        worker.start()
    peak = 0
    while any(w.is_alive() for w in workers):
        peak = max(peak, threads(placed))
        time.sleep(0.01)
    for worker in workers:
        worker.join()
    assert failures == []
    assert 1 < peak <= 1 + THREADS, "threads up to the bound, the other clients on the loop"
    with placed.raw() as raw:
        assert raw.call(PLACES + ".Current")["generation"] == 1


def test_stop_with_thread_held_connections_is_prompt_and_clean(start_placed):
    placed = start_placed()
    held = []
    for n in range(THREADS + 2):
        raw = placed.raw()
        rank_bytes(raw, *POSITIONS[n % len(POSITIONS)])
        held.append(raw)
    assert blocked_in_recv(placed, THREADS) == THREADS
    # One connection half-way through a message on a thread, one idle on the loop.
    held[0].send_raw(rank_message(*POSITIONS[0])[:20])
    idle = placed.raw()
    began = time.monotonic()
    placed.proc.send_signal(signal.SIGTERM)
    placed.proc.wait(timeout=10)
    took = time.monotonic() - began
    assert placed.proc.returncode == 0
    assert took < 2.0, took
    for raw in held + [idle]:
        assert raw.is_closed_by_server(2)
        raw.close()
    assert not any("fatal" in line.lower() or "crash" in line.lower() for line in placed.lines), placed.lines


def test_refresh_switching_files_while_rank_threads_run(start_placed, placectl_bin, tmp_path):
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

    workers = [threading.Thread(target=client, args=(n,)) for n in range(THREADS)]
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


def test_an_idle_daemon_starts_no_thread_and_a_watch_stays_on_the_loop(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        raw.send(PLACES + ".Watch", more=True)
        raw.receive()
        assert threads(placed) == 1
    with placed.raw() as raw:
        raw.call(PLACES + ".Current")
        raw.call(PLACES + ".Status")
        assert threads(placed) == 1, "only Rank connections leave the loop"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as plain:
        plain.connect(str(placed.socket))
    assert threads(placed) == 1


def test_a_quiet_client_gives_its_thread_back_and_is_still_served(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        expected = rank_bytes(raw, *POSITIONS[0])
        assert rank_bytes(raw, *POSITIONS[0]) == expected
        assert blocked_in_recv(placed, 1) == 1
        time.sleep(2.5)  # RequestThreads.idleTimeout: 2 s
        assert blocked_in_recv(placed, 0, timeout=2) == 0, "back on the loop"
        assert rank_bytes(raw, *POSITIONS[0]) == expected
        assert rank_bytes(raw, *POSITIONS[0]) == expected
        assert blocked_in_recv(placed, 1) == 1, "and on a thread again after its next Rank"
