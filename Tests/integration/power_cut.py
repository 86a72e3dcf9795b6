"""Power cuts (issue 36): placed killed with SIGKILL at random moments while clients select, put and
delete own places, and the fleet export flushes to mosquitto, and `placectl import` killed at random points while placed serves
the file it replaces. Used by test_power_cut.py (a few cycles in every test run) and run by hand for
the long loop:

    .build/venv/bin/python Tests/integration/power_cut.py --cycles 1000 --imports 100

After every kill: every acknowledged selection is in the log, the own places are exactly those the
acknowledged puts and deletes leave (a batch in flight at the kill wholly applied or wholly not),
SQLite's integrity_check is ok; after every restart placed serves exactly those own places.
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
from harness import VarlinkReplyError, VarlinkSocket, bin_path, end  # noqa: E402

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


def hours_of(details):
    """The opening_hours of a row's stored details (`key U+001F value`, joined by U+001E)."""
    entries = dict(entry.split("\x1f", 1) for entry in (details or "").split("\x1e") if "\x1f" in entry)
    return entries.get("opening_hours")


def stored_own_places(path):
    """id → (name, opening_hours) of the own places in the selection log, as placed's next start would
    load them."""
    with sqlite3.connect(path, timeout=10) as db:
        try:
            return {id: (name, hours_of(details))
                    for id, name, details in db.execute("SELECT id, name, details FROM own_places")}
        except sqlite3.OperationalError:
            return {}  # killed before the first put made the table


class OwnLedger:
    """What the acknowledged own-place changes leave: id → (name, opening_hours). Every put uses new
    ids or renames present ones, so each batch's effect can be told from the file alone; the hours
    check that the details column survives a kill too."""

    def __init__(self):
        self.present = {}
        self.puts = self.deletes = self.in_flight_applied = self.in_flight_not = 0
        self.serial = 0

    def apply(self, operation):
        kind, batch = operation
        if kind == "put":
            self.present.update(batch)
            self.puts += 1
        else:
            for id in batch:
                self.present.pop(id, None)
            self.deletes += 1

    def settle(self, operation, stored):
        """The batch in flight at the kill: applied wholly (then it counts) or not at all; else a problem."""
        kind, batch = operation
        if kind == "put":
            applied = [stored.get(id) == value for id, value in batch.items()]
        else:
            applied = [id not in stored for id in batch]
        if all(applied):
            self.apply(operation)
            self.in_flight_applied += 1
        elif not any(applied):
            self.in_flight_not += 1
        else:
            return "a %s batch in flight was partly applied: %s" % (kind, batch)
        return None


class OwnPlacer(threading.Thread):
    """Puts and deletes own places in small batches on its own connection, one at a time, until the
    connection breaks: `loaded` is what OwnPlaces said first; each acknowledged batch is applied to the
    ledger, and `pending` is the batch sent and not acknowledged."""

    def __init__(self, socket_path, ledger, rng):
        super().__init__(daemon=True)
        self.socket_path = socket_path
        self.ledger = ledger
        self.rng = rng
        self.loaded = None
        self.pending = None
        self.error = None

    def feature(self, id, value):
        # Some 10 km from the static position: the rankings the selector picks from stay the same.
        name, hours = value
        return {"type": "Feature",
                "properties": {"id": id, "name": name, "kind": "depot", "radius": 25, "opening_hours": hours},
                "geometry": {"type": "Point", "coordinates": [24.80 + self.rng.random() * 0.01, 60.25]}}

    def next_operation(self):
        ledger, rng = self.ledger, self.rng
        present = sorted(ledger.present)
        # Mostly one to three places; now and then 20 to 60, so a kill lands inside a batch's transaction.
        size = rng.randint(1, 3) if rng.random() < 0.85 else rng.randint(20, 60)
        if len(present) < 8 or rng.random() < 0.55:
            batch = {}
            for _ in range(size):
                ledger.serial += 1
                hours = "Mo-Fr 08:00-%02d:00" % (12 + ledger.serial % 10)
                if present and rng.random() < 0.3:
                    batch[rng.choice(present)] = ("renamed %d" % ledger.serial, hours)
                else:
                    batch["own:cut-%d" % ledger.serial] = ("site %d" % ledger.serial, hours)
            return ("put", batch)
        return ("delete", rng.sample(present, min(len(present), size)))

    def run(self):
        try:
            with VarlinkSocket(self.socket_path, timeout=10) as connection:
                places = connection.call("io.placed.Places.OwnPlaces")["places"]
                self.loaded = {p["properties"]["id"]: (p["properties"]["name"], p["properties"].get("opening_hours"))
                               for p in places}
                while True:
                    operation = self.next_operation()
                    kind, batch = operation
                    self.pending = operation
                    if kind == "put":
                        connection.call("io.placed.Places.PutPlaces",
                                        places=[self.feature(id, name) for id, name in batch.items()])
                    else:
                        connection.call("io.placed.Places.DeletePlaces", ids=batch)
                    self.pending = None
                    self.ledger.apply(operation)
                    time.sleep(self.rng.uniform(0.005, 0.03))
        except VarlinkReplyError as error:
            self.error = error
        except (OSError, ConnectionError, ValueError, EOFError, AssertionError):
            return  # the daemon was killed: what was acknowledged is in the ledger


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
    own = OwnLedger()
    problems = []
    started = time.monotonic()
    try:
        for cycle in range(cycles):
            placed = FleetPlaced(placed_bin, directory, fleet).wait_ready()
            expected = dict(own.present)
            selector = Selector(placed.socket)
            placer = OwnPlacer(placed.socket, own, random.Random(rng.random()))
            selector.start()
            placer.start()
            time.sleep(rng.uniform(0.02, 0.5))
            placed.kill()
            selector.join(10)
            placer.join(10)
            if selector.error:
                problems.append("cycle %d: %s" % (cycle, selector.error))
            if placer.error:
                problems.append("cycle %d: own places: %s" % (cycle, placer.error))
            if placer.loaded is not None and placer.loaded != expected:
                problems.append("cycle %d: placed started with own places %s, not the %d acknowledged" % (
                    cycle, sorted(set(placer.loaded.items()) ^ set(expected.items()))[:10], len(expected)))
            acknowledged.update(selector.acknowledged)
            stored = stored_own_places(directory / "selections.db")
            if placer.pending and (problem := own.settle(placer.pending, stored)):
                problems.append("cycle %d: %s" % (cycle, problem))
            if stored != own.present:
                problems.append("cycle %d: own places on disk differ from the acknowledged: %s" % (
                    cycle, sorted(set(stored.items()) ^ set(own.present.items()))[:10]))
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
                report("%d cuts, %d selections and %d own-place batches acknowledged, %.0f s" % (
                    cycle + 1, len(acknowledged), own.puts + own.deletes, time.monotonic() - started))
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
        return {"cuts": cycles, "acknowledged": len(acknowledged), "own puts": own.puts,
                "own deletes": own.deletes, "own in flight applied": own.in_flight_applied,
                "own in flight not applied": own.in_flight_not, "own places at the end": len(own.present),
                "events": len(first),
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
        # The faster of two: a first import from a cold page cache is slower, and kills timed by it
        # would mostly come after the later imports were done.
        durations = []
        for _ in range(2):
            clock = time.monotonic()
            subprocess.run([placectl_bin, "import", extract, "--db", work / "timing.db"], check=True,
                           capture_output=True)
            durations.append(time.monotonic() - clock)
        duration = min(durations)
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
        if figures["own in flight applied"] == 0 or figures["own in flight not applied"] == 0:
            figures["problems"].append("no kill landed in an own-place batch both ways: the loop tested less")
        print(json.dumps(figures))
        figures_import = import_cuts(placed_bin, placectl_bin, extract, places_db, work, args.imports, args.seed)
        print(json.dumps(figures_import))
    return 1 if figures["problems"] or figures_import["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
