"""placed under a real systemd-journald: its messages arrive with priorities, and a selection is one
structured entry with its own MESSAGE_ID (DESIGN.md, "Selection").

No journald runs on a machine without systemd as PID 1, so the test starts one in a private mount
namespace: a fresh tmpfs over /run (journald's sockets) with the journal directory bound from the
test's tmp_path, where journalctl reads it from outside. placed's stderr is a journal stream and
$JOURNAL_STREAM names it, as systemd sets them up for a service.
"""
import glob
import json
import os
import signal
import subprocess
import time

import pytest

from harness import HELSINKI_CENTER, open_varlink

SELECTION_MESSAGE_ID = "5d1b7e4c2a9f4b8e8c3f6a0d9e2b7c41"

NAMESPACE = r"""
set -e
journal_dir=$1; pid_file=$2; shift 2
mount -t tmpfs tmpfs /run
mkdir -p /run/log/journal
mount --bind "$journal_dir" /run/log/journal
/lib/systemd/systemd-journald &
echo $! > "$pid_file"
for _ in $(seq 100); do [ -S /run/systemd/journal/stdout ] && break; sleep 0.05; done
exec python3 -c "$STREAM" "$@"
"""

# Connects stdout and stderr to journald's stream socket, names it in $JOURNAL_STREAM, and execs.
STREAM = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("/run/systemd/journal/stdout")
s.sendall(b"placed\n\n6\n0\n0\n0\n0\n")  # identifier, unit, priority, level prefix, syslog, kmsg, console
s.shutdown(socket.SHUT_RD)
st = os.fstat(s.fileno())
os.environ["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
os.dup2(s.fileno(), 1)
os.dup2(s.fileno(), 2)
os.execv(sys.argv[1], sys.argv[1:])
"""


class JournaledPlaced:
    def __init__(self, placed_bin, places_db, tmp_path):
        self.journal_dir = tmp_path / "journal"
        self.journal_dir.mkdir()
        self.journald_pid_file = tmp_path / "journald.pid"
        self.socket = tmp_path / "sock"
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", NAMESPACE, "bash",
             str(self.journal_dir), str(self.journald_pid_file), str(placed_bin), "--bus", "none", "--static",
             HELSINKI_CENTER, "--db", str(places_db), "--selections", str(tmp_path / "selections.db"),
             "--socket", str(self.socket)],
            env={**os.environ, "STREAM": STREAM}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 15
        try:
            while not self.socket.exists():
                assert self.proc.poll() is None, "placed or journald did not start: %s" % self.proc.stderr.read()
                assert time.monotonic() < deadline, "placed's socket did not appear"
                time.sleep(0.05)
        except AssertionError:
            self.proc.kill()
            self.stop()
            raise

    def entries(self, *matches, count=1, timeout=5):
        """Journal entries matching `matches` (FIELD=value), once at least `count` are there."""
        deadline = time.monotonic() + timeout
        while True:
            directories = glob.glob(str(self.journal_dir / "*"))
            found = []
            if directories:
                out = subprocess.run(["journalctl", "--directory", directories[0], "--no-pager", "-o", "json",
                                      *matches], capture_output=True, text=True, timeout=10)
                found = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # placed: the wrapper exec'd into it
        status = self.proc.wait(timeout=10)
        if self.journald_pid_file.exists():
            try:
                os.kill(int(self.journald_pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
        return status


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
