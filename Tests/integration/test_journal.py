"""placed under a real systemd-journald: its messages arrive with priorities, and a selection is one
structured entry with its own MESSAGE_ID (docs/DESIGN.md, "Selections and the marker").

No journald runs on a machine without systemd as PID 1, so the test starts one in a private mount
namespace: a fresh tmpfs over /run (journald's sockets) with the journal directory bound from the
test's tmp_path, where journalctl reads it from outside. placed's stderr is a journal stream and
$JOURNAL_STREAM names it, as systemd sets them up for a service.
"""
import pytest

from harness import JournaledPlaced, open_varlink

SELECTION_MESSAGE_ID = "5d1b7e4c2a9f4b8e8c3f6a0d9e2b7c41"

@pytest.fixture
def journaled(placed_bin, places_db, tmp_path):
    placed = JournaledPlaced(placed_bin, places_db, tmp_path)
    yield placed
    assert placed.stop() == 0


def test_messages_arrive_with_priorities(journaled):
    started = journaled.entries("SYSLOG_IDENTIFIER=placed", "PRIORITY=6")
    assert any(e["MESSAGE"].startswith("started: ") for e in started), [e["MESSAGE"] for e in started]
    assert all(e["_TRANSPORT"] == "journal" for e in started), "structured entries, not stream lines"
    assert all(str(journaled.proc.pid) == e["_PID"] for e in started)


def test_a_selection_is_one_structured_entry(journaled):
    places = open_varlink(journaled.socket)
    first = places.Current()["places"][0]
    marker = places.Select(first["id"])["marker"]
    entries = journaled.entries("MESSAGE_ID=%s" % SELECTION_MESSAGE_ID)
    assert len(entries) == 1, entries
    entry = entries[0]
    assert entry["PRIORITY"] == "5" and entry["SYSLOG_IDENTIFIER"] == "placed"
    assert entry["PLACE_ID"] == first["id"] and entry["PLACE_NAME"] == first["name"]
    assert entry["SELECTION"] == str(marker["selection"]) == "1"
    assert entry["GENERATION"] == str(marker["generation"])
    assert float(entry["LATITUDE"]) == pytest.approx(60.1699) and float(entry["LONGITUDE"]) == pytest.approx(24.9384)
    assert entry["MESSAGE"].startswith("selected %s (%s)" % (first["name"], first["id"]))
