"""Power cuts (issue 36): placed killed with SIGKILL at random moments while clients select and the
fleet export flushes to mosquitto, and `placectl import` killed at random points while placed serves
the file it replaces. Used by test_power_cut.py (a few cycles in every test run) and run by hand for
the long loop:

    .build/venv/bin/python Tests/integration/power_cut.py --cycles 1000 --imports 100

After every restart: every acknowledged selection is in the log, SQLite's integrity_check is ok.
At the end: the broker received every acknowledged selection's marker, the events' sequence numbers
have no gap, and every copy of an event sent again is the first copy byte for byte (same id)."""
import argparse
import json
import pathlib
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fleet import FleetPlaced, Ledger, Mosquitto, Subscriber, wait_until  # noqa: E402
from harness import VarlinkSocket, bin_path, end  # noqa: E402

DEVICE = "cut"


def integrity(path):
    """SQLite's own verdict on a database file, read as placed's next start would find it."""
    with sqlite3.connect(path, timeout=10) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def logged_selections(path):
    with sqlite3.connect(path, timeout=10) as db:
        return {row[0]: row[1] for row in db.execute("SELECT id, place_id FROM selections")}


class Selector(threading.Thread):
    """Selects the current top place, a few calls in flight on one connection, until the connection
    breaks; `acknowledged` holds (selection number, place id) of every reply received."""

    def __init__(self, socket_path):
        super().__init__(daemon=True)
        self.socket_path = socket_path
        self.acknowledged = []
        self.error = None

    def run(self):
        try:
            with VarlinkSocket(self.socket_path, timeout=10) as connection:
                places = connection.call("io.placed.Places.Current")["places"]
                place = places[0]["id"]
                request = json.dumps({"method": "io.placed.Places.Select", "parameters": {"id": place}}).encode()
                while True:
                    connection.send_raw((request + b"\0") * 4)
                    for _ in range(4):
                        reply = connection.receive()
                        if reply.get("error"):
                            self.error = reply
                            return
                        self.acknowledged.append((reply["parameters"]["marker"]["selection"], place))
        except (OSError, ConnectionError, ValueError, EOFError, AssertionError):
            return  # the daemon was killed: what was acknowledged is recorded


def selection_cuts(placed_bin, places_db, work, cycles, seed, report=print):
    """`cycles` SIGKILLs of placed under selection load with the fleet export on; returns figures."""
    rng = random.Random(seed)
    work = pathlib.Path(work)
    broker = Mosquitto(work / "broker", extra=["autosave_interval 1"])
    subscriber = Subscriber("127.0.0.1", broker.port, "placed/%s/#" % DEVICE, client_id="power-cut")
    directory = work / "placed"
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(places_db, directory / "places.db")
    fleet = {"Broker": broker.url, "DeviceId": DEVICE, "KeepAlive": 5}
    acknowledged = {}
    problems = []
    started = time.monotonic()
    try:
        for cycle in range(cycles):
            placed = FleetPlaced(placed_bin, directory, fleet).wait_ready()
            selector = Selector(placed.socket)
            selector.start()
            time.sleep(rng.uniform(0.02, 0.5))
            placed.kill()
            selector.join(10)
            if selector.error:
                problems.append("cycle %d: %s" % (cycle, selector.error))
            acknowledged.update(selector.acknowledged)
            verdict = integrity(directory / "selections.db")
            if verdict != "ok":
                problems.append("cycle %d: integrity_check says %s" % (cycle, verdict))
            logged = logged_selections(directory / "selections.db")
            lost = [number for number in acknowledged if logged.get(number) != acknowledged[number]]
            if lost:
                problems.append("cycle %d: acknowledged selections lost: %s" % (cycle, lost[:10]))
            if problems:
                break
            if (cycle + 1) % 100 == 0:
                report("%d cuts, %d selections acknowledged, %.0f s" % (
                    cycle + 1, len(acknowledged), time.monotonic() - started))
        # The last start drains the outbox to the broker.
        placed = FleetPlaced(placed_bin, directory, fleet).wait_ready()
        try:
            placed.wait_fleet(lambda f: f.get("state") == "connected" and f.get("backlog") == 0
                              and f.get("inFlight") == 0, 120, "the outbox drained")
            dropped = placed.fleet().get("dropped", 0)
            try:
                wait_until(lambda: not Ledger(subscriber.received(), DEVICE).missing(acknowledged), 60,
                           "%d markers at the subscriber" % len(acknowledged))
            except AssertionError:
                pass  # counted below
        finally:
            placed.stop()
        messages = subscriber.received()
        ledger = Ledger(messages, DEVICE)
        problems += ledger.problems
        missing = ledger.missing(sorted(acknowledged))
        if missing:
            problems.append("markers never sent: %s" % missing[:10])
        # Every event's first copy: its sequence number, once; together without a gap.
        first = {}
        for topic, payload in messages:
            if topic.endswith("/status"):
                continue  # the connection's state and last will: plain words, no sequence
            body = json.loads(payload)
            if "seq" not in body:
                continue
            if body["seq"] in first and first[body["seq"]] != payload:
                problems.append("seq %d sent as two different events" % body["seq"])
            first.setdefault(body["seq"], payload)
        sequence = sorted(first)
        gaps = [n for n in range(sequence[0], sequence[-1] + 1) if n not in first] if sequence else []
        # The outbox drops superseded state updates past its bound (Status: fleet.dropped), their
        # numbers with them; anything more missing is an event skipped.
        if len(gaps) > dropped:
            problems.append("sequence numbers skipped beyond the dropped updates: %s" % gaps[:10])
        return {"cuts": cycles, "acknowledged": len(acknowledged), "events": len(first),
                "duplicates": ledger.duplicates, "gaps": len(gaps), "dropped": dropped,
                "seconds": round(time.monotonic() - started, 1), "problems": problems}
    finally:
        subscriber.stop()
        broker.kill()


def rank(socket_path):
    with VarlinkSocket(socket_path, timeout=10) as connection:
        reply = connection.call("io.placed.Places.Rank", latitude=60.1699, longitude=24.9384, accuracy=20, limit=5)
    return [(p["id"], round(p["likelihood"], 9)) for p in reply["places"]]


def import_cuts(placed_bin, placectl_bin, extract, places_db, work, cycles, seed, report=print):
    """`cycles` runs of `placectl import` over the file placed serves, each killed at a random point of
    a full import's duration: placed keeps answering as before, and the file stays whole."""
    rng = random.Random(seed)
    work = pathlib.Path(work)
    directory = work / "imports"
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "places.db"
    shutil.copy(places_db, target)
    placed = FleetPlaced(placed_bin, directory, {}).wait_ready()
    problems = []
    started = time.monotonic()
    try:
        before = rank(placed.socket)
        clock = time.monotonic()
        subprocess.run([placectl_bin, "import", extract, "--db", work / "timing.db"], check=True,
                       capture_output=True)
        duration = time.monotonic() - clock
        completed = 0
        for cycle in range(cycles):
            proc = subprocess.Popen([placectl_bin, "import", extract, "--db", target],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0, duration * 1.1))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            else:
                completed += 1
            proc.wait()
            verdict = integrity(target)
            if verdict != "ok":
                problems.append("import %d: integrity_check says %s" % (cycle, verdict))
            if rank(placed.socket) != before:
                problems.append("import %d: placed's ranking changed" % cycle)
            placed.call("Refresh")
            if rank(placed.socket) != before:
                problems.append("import %d: the ranking after Refresh changed" % cycle)
            if problems:
                break
        # The last import killed may have left its file; the next import removes it.
        leftovers = sorted(p.name for p in directory.iterdir()
                           if p.name not in ("places.db", "selections.db", "sock", "placed.conf")
                           and not p.name.startswith("selections.db-") and not p.name.startswith("places.db-"))
        if len(leftovers) > 1:
            problems.append("killed imports' files pile up: %s" % leftovers)
        return {"imports": cycles, "completed": completed, "full import seconds": round(duration, 2),
                "leftover files": leftovers, "seconds": round(time.monotonic() - started, 1), "problems": problems}
    finally:
        placed.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--imports", type=int, default=100)
    parser.add_argument("--seed", type=int, default=36)
    args = parser.parse_args()
    placed_bin, placectl_bin = bin_path("release", "placed"), bin_path("release", "placectl")
    extract = HERE.parents[1] / "data" / "helsinki-center.osm.pbf"
    with tempfile.TemporaryDirectory(prefix="placed-power-cut-") as tmp:
        work = pathlib.Path(tmp)
        places_db = work / "helsinki.db"
        subprocess.run([placectl_bin, "import", extract, "--db", places_db], check=True, capture_output=True)
        figures = selection_cuts(placed_bin, places_db, work, args.cycles, args.seed)
        print(json.dumps(figures))
        figures_import = import_cuts(placed_bin, placectl_bin, extract, places_db, work, args.imports, args.seed)
        print(json.dumps(figures_import))
    return 1 if figures["problems"] or figures_import["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
