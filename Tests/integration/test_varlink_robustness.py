"""Misbehaving varlink peers on raw sockets — oversized messages, malformed JSON, a client that stops
reading, a thousand clients at once — each get a named error or are dropped, while other clients and
fix handling carry on as if nothing happened; and all of it on the daemon's one thread."""
import json
import os
import resource
import select
import signal
import socket
import threading
import time

import pytest

import nmea
from harness import PLACES, GpsFake, free_port
from conftest import ROOT
from test_gpsd import assert_same_moves
from test_varlink import POSITIONS, rank_bytes, rank_message

# The tests connect as root, a writer: messages up to 16 MiB (a PutPlaces of thousands of own
# places), 8 MiB of replies queued (VarlinkAdapter.writerLimits); others keep 64 KiB and 2 MiB.
LIMIT = 16 * 1024 * 1024
QUEUE = 8 * 1024 * 1024
DRIVE = ROOT / "data" / "helsinki-drive.nmea"


def watcher(placed):
    """A well-behaved raw Watch client, with its first reply (the current state) already read."""
    watch = placed.raw()
    watch.send(PLACES + ".Watch", more=True)
    first = watch.reply()
    return watch, first


def assert_unharmed(placed, watch, generation):
    """A bystander watcher gets the next ranking and a fresh client is served."""
    with placed.raw() as other:
        other.call(PLACES + ".Refresh")
        assert other.call(PLACES + ".Current")["generation"] == generation + 1
    message = watch.receive()
    assert message["continues"] is True and message["parameters"]["generation"] == generation + 1


def padded_call(size):
    """A Select call of exactly `size` bytes (before the NUL): the id pads it."""
    empty = json.dumps({"method": PLACES + ".Select", "parameters": {"id": ""}}).encode()
    return empty.replace(b'"id": ""', b'"id": "' + b"x" * (size - len(empty)) + b'"')


def test_a_message_of_the_limit_is_served(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        # Padded with blanks, which JSON allows anywhere between tokens: the reply stays small.
        call = json.dumps({"method": PLACES + ".Select", "parameters": {"id": "osm:node/1"}}).encode()
        raw.send_raw(call[:-1] + b" " * (LIMIT - len(call)) + b"}\0")
        reply = raw.receive()
        assert reply["error"] == PLACES + ".UnknownPlace", "parsed and answered"
        assert raw.call(PLACES + ".Current")["generation"] == 1


@pytest.mark.parametrize("terminated", [True, False], ids=["with-nul", "without-nul"])
def test_a_larger_message_gets_message_too_large_then_disconnect(start_placed, terminated):
    placed = start_placed()
    watch, first = watcher(placed)
    with placed.raw() as raw:
        try:
            raw.send_raw(padded_call(LIMIT + 1) + (b"\0" if terminated else b"x" * 10000))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may close before it read everything we sent
        reply = raw.receive()
        assert reply == {"error": PLACES + ".MessageTooLarge", "parameters": {"limit": LIMIT}}
        assert raw.is_closed_by_server()
    assert_unharmed(placed, watch, first["generation"])
    watch.close()


@pytest.mark.parametrize("message", [
    b'{"method":',
    b'{"method": "io.placed.Places.Current"',
    b"[1, 2]",
    b'"io.placed.Places.Current"',
    b"",
    b'{"parameters": {}}',
    b'{"method": 17}',
    b'{"method": "io.placed.Places.Current", "parameters": [5]}',
    b'{"method": "io.placed.Places.Current", "more": "yes"}',
    b'{"method": "io.placed.\xff\xfe"}',
    b'{"method": "io.placed.Places.Current"} trailing',
], ids=lambda m: m.decode(errors="replace")[:40] or "empty")
def test_malformed_messages_get_invalid_message_then_disconnect(start_placed, message):
    placed = start_placed()
    watch, first = watcher(placed)
    with placed.raw() as raw:
        raw.send_raw(message + b"\0" + b'{"method": "io.placed.Places.Current"}\0')
        reply = raw.receive()
        assert reply["error"] == PLACES + ".InvalidMessage", reply
        assert isinstance(reply["parameters"]["reason"], str) and reply["parameters"]["reason"]
        assert raw.is_closed_by_server(), "the call after the bad message is not served"
    assert_unharmed(placed, watch, first["generation"])
    watch.close()


@pytest.mark.parametrize("served_first", [False, True], ids=["alone", "after-a-call"])
def test_a_client_that_hangs_up_within_a_message_gets_invalid_message_then_disconnect(start_placed, served_first):
    # Shut down for writing with half a message sent, it waited forever for an answer that never came,
    # holding its descriptor, and a call before it was still owed its reply.
    placed = start_placed()
    with placed.raw() as raw:
        if served_first:
            raw.send(PLACES + ".Status")
        raw.send_raw(b'{"method": "io.placed.Places.Current"')
        raw.sock.shutdown(socket.SHUT_WR)
        if served_first:
            assert raw.receive()["parameters"]["source"] == "static"
        reply = raw.receive()
        assert reply == {"error": PLACES + ".InvalidMessage",
                         "parameters": {"reason": "the connection ended within a message"}}
        assert raw.is_closed_by_server()


def peer_closed(sock):
    """Whether the server closed its end (unread data may still wait on ours)."""
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP)
    return any(event & (select.POLLRDHUP | select.POLLHUP) for _, event in poller.poll(0))


def peer_closed_within(sock, timeout):
    deadline = time.monotonic() + timeout
    while not peer_closed(sock):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_watcher_that_stops_reading_is_dropped_when_its_queue_fills(start_placed):
    placed = start_placed()
    good, first = watcher(placed)
    stalled = placed.raw()
    stalled.send(PLACES + ".Watch", more=True)
    refreshes = 0
    with placed.raw() as control:
        # Each Refresh broadcasts ~1.6 kB to both watchers; the stalled one reads nothing.
        while not peer_closed(stalled.sock) and refreshes < 12000:
            control.call(PLACES + ".Refresh")
            refreshes += 1
            message = good.receive()
            assert message["parameters"]["generation"] == first["generation"] + refreshes
        assert peer_closed(stalled.sock), "dropped after %d rankings" % refreshes
        size = len(json.dumps(message, separators=(",", ":")))
        # Dropped once its queue (room for a whole Map or OwnPlaces reply) plus the kernel's socket
        # buffer was full, not before.
        assert QUEUE < refreshes * size < QUEUE + 2 * 1024 * 1024, (refreshes, size)

        # What the stalled client did get is an unbroken prefix of the stream, then the end.
        generations = []
        stalled.sock.settimeout(5)
        try:
            while True:
                generations.append(stalled.receive()["parameters"]["generation"])
        except EOFError:
            pass
        assert generations == list(range(1, len(generations) + 1)) and len(generations) < refreshes

        assert control.call(PLACES + ".Current")["generation"] == first["generation"] + refreshes
    assert_unharmed(placed, good, first["generation"] + refreshes)
    good.close()


def open_descriptors(pid, settle=None, timeout=5.0):
    """How many descriptors `pid` holds; with `settle`, waits (up to `timeout`) until it is back to that."""
    deadline = time.monotonic() + timeout
    while True:
        count = len(os.listdir("/proc/%d/fd" % pid))
        if settle is None or count <= settle or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def raise_open_file_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, needed), hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= needed, "cannot open enough descriptors"


def test_a_thousand_concurrent_clients(start_placed):
    raise_open_file_limit(1200)
    placed = start_placed()
    baseline = open_descriptors(placed.proc.pid)
    clients = [placed.raw() for _ in range(1000)]
    try:
        for client in clients:  # all requests out before any reply is read
            client.send(PLACES + ".Current", {"limit": 1})
        assert {client.reply()["generation"] for client in clients} == {1}
        for client in clients:
            client.send(PLACES + ".Watch", more=True)
        assert all(client.reply()["generation"] == 1 for client in clients)
        with placed.open() as places:
            places.Refresh()
            assert places.Current()["generation"] == 2
        assert [client.reply()["generation"] for client in clients] == [2] * 1000
        assert open_descriptors(placed.proc.pid) >= baseline + 1000
    finally:
        for client in clients:
            client.close()
    assert open_descriptors(placed.proc.pid, settle=baseline) == baseline, "every connection closed"


def test_connecting_and_leaving_leaks_nothing(start_placed):
    placed = start_placed()
    baseline = open_descriptors(placed.proc.pid)
    for n in range(2000):
        with placed.raw() as client:
            if n % 2:  # half of them leave in the middle of a call
                client.send(PLACES + ".Watch", more=True)
    assert open_descriptors(placed.proc.pid, settle=baseline) == baseline
    with placed.raw() as client:
        assert client.call(PLACES + ".Current")["generation"] == 1


def test_a_message_in_pieces_is_served(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        message = json.dumps({"method": PLACES + ".Current", "parameters": {"limit": 2}}).encode() + b"\0"
        for piece in (message[:1], message[1:20], message[20:-1], message[-1:]):
            raw.send_raw(piece)
            time.sleep(0.05)
        assert len(raw.reply()["places"]) == 2


def test_a_client_that_pipelines_without_reading_is_dropped(start_placed):
    placed = start_placed()
    good, first = watcher(placed)
    with placed.raw() as flood:
        calls = (json.dumps({"method": PLACES + ".Current", "parameters": {"limit": 20}}).encode() + b"\0") * 5000
        flood.sock.settimeout(10)
        try:
            flood.send_raw(calls)  # ~5 kB replies each: far more than its queue holds
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert peer_closed_within(flood.sock, 5)
    assert_unharmed(placed, good, first["generation"])
    good.close()


def test_a_rank_client_that_never_reads_is_dropped_and_harms_nobody(start_placed):
    placed = start_placed()
    watch = placed.raw()
    watch.send(PLACES + ".Watch", more=True)
    first = watch.receive()["parameters"]
    good = placed.raw()
    rank_bytes(good, *POSITIONS[0])
    expected = rank_bytes(good, *POSITIONS[1])
    with placed.raw() as flood:
        rank_bytes(flood, *POSITIONS[0])
        flood.sock.settimeout(20)
        try:
            flood.send_raw(rank_message(*POSITIONS[1]) * 3000)  # ~5 kB replies each, none read
        except (BrokenPipeError, ConnectionResetError):
            pass
        # Dropped once the socket took no more and its queue filled.
        assert flood.is_closed_by_server(10)
    assert rank_bytes(good, *POSITIONS[1]) == expected, "another client still served"
    with placed.raw() as control:
        control.call(PLACES + ".Refresh")
    assert watch.receive()["parameters"]["generation"] == first["generation"] + 1
    good.close()
    watch.close()


def threads(placed):
    return len(os.listdir("/proc/%d/task" % placed.proc.pid))


def test_many_rank_clients_at_once_are_all_served_right_by_the_one_thread(start_placed):
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
    assert peak == 1, "the daemon serves every client on its one thread"
    with placed.raw() as raw:
        assert raw.call(PLACES + ".Current")["generation"] == 1


def test_stop_with_open_connections_is_prompt_and_clean(start_placed):
    placed = start_placed()
    held = []
    for n in range(6):
        raw = placed.raw()
        rank_bytes(raw, *POSITIONS[n % len(POSITIONS)])
        held.append(raw)
    # One connection half-way through a message, one that never called.
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


def short_drive(path, fix_epochs):
    """The Helsinki drive cut after `fix_epochs` epochs with a fix (the no-fix preamble kept)."""
    lines, fixes = [], 0
    for line in DRIVE.read_text().splitlines():
        if line.startswith("$GPRMC"):
            if ",A," in line:
                fixes += 1
            if fixes > fix_epochs:
                break
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_abuse_during_a_drive_disturbs_neither_fixes_nor_watchers(start_placed, tmp_path):
    raise_open_file_limit(1200)
    log = short_drive(tmp_path / "drive.nmea", 80)
    port = free_port()
    gps = GpsFake(log, port)
    placed = start_placed("--gpsd", "localhost:%d" % port, "--gpsd-timeout", 2, static=None)
    try:
        good = placed.raw(timeout=30)
        good.send(PLACES + ".Watch", more=True)
        seen = [good.reply()]
        placed.wait_for(r"ranking 1:", timeout=30)
        baseline = open_descriptors(placed.proc.pid)  # the watcher and gpsd connected
        done = threading.Event()

        def abuse():
            stalled, idle = [], []
            while not done.is_set():
                for message in (padded_call(LIMIT + 1) + b"\0", b"{nonsense\0"):
                    with placed.raw() as bad:
                        try:
                            bad.send_raw(message)
                            bad.is_closed_by_server(2)
                        except OSError:
                            pass
                if len(stalled) < 20:  # watchers that never read
                    stalled.append(placed.raw())
                    stalled[-1].send(PLACES + ".Watch", more=True)
                if len(idle) < 1000:  # clients that connect and say nothing
                    idle += [placed.raw() for _ in range(100)]
                done.wait(0.02)
            for sock in stalled + idle:
                sock.close()

        abuser = threading.Thread(target=abuse)
        abuser.start()
        try:
            placed.wait_for_end_of_replay(timeout=60)
        finally:
            done.set()
            abuser.join()
        while good.buffer or select.select([good.sock], [], [], 0.2)[0]:
            seen.append(good.reply())
    finally:
        gps.stop()
    expected = nmea.moves(nmea.fixes(log), 50)
    assert len(expected) >= 8
    assert_same_moves(placed.moves(), expected)
    # The watcher saw every move's ranking, in order, each with the location it was made at.
    rankings = [m for m in seen if m.get("places")]  # generation 0 has none
    assert [m["generation"] for m in rankings] == list(range(1, len(expected) + 1))
    for ranking, (_, lat, lon) in zip(rankings, expected):
        assert ranking["places"], "places near every point of the drive"
        assert abs(ranking["location"]["latitude"] - lat) < 2e-7
        assert abs(ranking["location"]["longitude"] - lon) < 2e-7
    assert seen[-1]["stale"] is True, "the end of the drive reached the watcher"
    # Give or take the gpsd connection, which placed drops and reopens after the silence.
    assert open_descriptors(placed.proc.pid, settle=baseline + 1) <= baseline + 1, "no client connection leaked"
