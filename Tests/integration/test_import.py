"""`placectl import`: success, the progress bar only on a terminal, and every failure leaving the
existing database untouched (exit 1, named error) while usage mistakes exit 2; the map layer, the
addresses and multipolygons, and the place count against an independent count by osmium."""
import hashlib
import json
import os
import pty
import re
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import HELSINKI


def run(placectl_bin, *arguments, **options):
    return subprocess.run([placectl_bin, "import", *map(str, arguments)], capture_output=True,
                          text=True, timeout=120, **options)


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def existing_db(tmp_path, places_db):
    """A database from a first, good import: the session's Helsinki import, copied."""
    db = tmp_path / "places.db"
    shutil.copy(places_db, db)
    return db


def test_import_writes_database_and_summary(existing_db, placectl_bin):
    out = run(placectl_bin, HELSINKI, f"--db={existing_db}")
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", "no progress output when stderr is not a terminal"
    lines = out.stdout.splitlines()
    assert lines[0].startswith("imported ") and "from 30,010 elements in " in lines[0]
    assert lines[0].endswith(f"→ {existing_db}")
    places = int(lines[0].split()[1].replace(",", ""))
    assert places > 1500
    addresses = re.fullmatch(r"addresses: ([\d.]+) % of places \(own ([\d.]+) %, building [\d.]+ %, "
                             r"nearby [\d.]+ %, street [\d.]+ %\)", lines[1])
    assert addresses, lines[1]
    assert float(addresses.group(1)) >= 95, 'docs/DESIGN.md "Place data": an address for every place that has one near'
    assert 70 <= float(addresses.group(2)) <= 80, "about three quarters have their own addr:*"
    features = int(re.fullmatch(r"map layer: ([\d,]+) features", lines[2]).group(1).replace(",", ""))
    assert features > 2000
    multipolygons = re.fullmatch(r"multipolygons: (\d+) assembled, (\d+) skipped \(incomplete or rings do not close\):",
                                 lines[3])
    assert multipolygons and int(multipolygons.group(1)) > 50, lines[3]
    skipped = lines[4:4 + int(multipolygons.group(2))]
    details = re.fullmatch(r"details: ([\d.]+) % of places; opening_hours: ([\d,]+), (\d+) not understood "
                           r"\(kept raw, open_now unknown\), e.g.:", lines[4 + len(skipped)])
    assert details, lines[4 + len(skipped)]
    assert float(details.group(1)) > 50 and int(details.group(2).replace(",", "")) > 500, "issue 34: 545 have hours"
    assert int(details.group(3)) * 100 <= int(details.group(2).replace(",", "")), "at least 99 % understood"
    named = lines[5 + len(skipped):]
    assert len(named) == min(5, int(details.group(3))) and all(re.fullmatch(r"  osm:\w+/\d+: '.+': .+", line)
                                                                 for line in named), named
    assert all(re.fullmatch(r"  osm:relation/\d+: .+", line) for line in skipped)
    assert any(line.startswith("  osm:relation/2919185: ") for line in skipped), "Kauppatori, cut by the extract"
    with sqlite3.connect(f"file:{existing_db}?mode=ro", uri=True) as db:
        assert db.execute("select count(*) from places").fetchone()[0] == places
        assert db.execute("select value from meta where key = 'schema_version'").fetchone()[0] == "6"
        assert db.execute("select count(*) from map_features").fetchone()[0] == features
        assert db.execute("select count(*) from map_bounds").fetchone()[0] == features
        sources = dict(db.execute("select address_source, count(*) from places group by 1").fetchall())
        assert set(sources) <= {"own", "building", "nearby", "street", "none"}
        assert sum(sources.values()) == places
        swedish = db.execute("select count(*) from places where names like '%sv' || char(31) || '%'").fetchone()[0]
        assert swedish > 250, "Helsinki is bilingual: name:sv kept"
    assert sorted(p.name for p in existing_db.parent.iterdir()) == ["places.db"], "no temporary files left"


def test_no_map_leaves_the_layer_out_and_the_places_as_they_were(existing_db, placectl_bin, tmp_path):
    bare = tmp_path / "bare.db"
    out = run(placectl_bin, HELSINKI, "--db", bare, "--no-map")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[2] == "map layer: left out (--no-map)"
    assert run(placectl_bin, HELSINKI, "--db", existing_db).returncode == 0
    query = "select id, name, address, address_source, names, latitude, longitude from places order by id"
    with sqlite3.connect(f"file:{bare}?mode=ro", uri=True) as without, \
            sqlite3.connect(f"file:{existing_db}?mode=ro", uri=True) as with_map:
        assert without.execute("select count(*) from map_features").fetchone()[0] == 0
        assert without.execute("select value from meta where key = 'map_layer'").fetchone()[0] == "0"
        assert with_map.execute("select value from meta where key = 'map_layer'").fetchone()[0] == "1"
        assert without.execute(query).fetchall() == with_map.execute(query).fetchall()
    assert bare.stat().st_size < existing_db.stat().st_size


# docs/DESIGN.md, "Place data", written out again here, applied to what osmium reads and assembles.
MAIN_KEYS = [
    ("amenity", lambda v: v not in ("parking_space", "parking_entrance", "waste_disposal", "bench")),
    ("shop", None), ("tourism", None), ("leisure", None), ("office", None), ("craft", None), ("club", None),
    ("emergency", lambda v: v != "fire_hydrant"), ("healthcare", None), ("historic", None),
    ("public_transport", None), ("railway", lambda v: v in ("station", "halt", "tram_stop")),
    ("highway", lambda v: v == "bus_stop"), ("aeroway", lambda v: v in ("aerodrome", "terminal")),
]


def is_place(tags, element):
    if not tags.get("name"):
        return False
    if any(tags.get(key) and (rule is None or rule(tags[key])) for key, rule in MAIN_KEYS):
        return True
    return element != "node" and tags.get("building", "no") not in ("", "no")


def test_place_count_is_within_3_percent_of_osmium_with_multipolygons(placectl_bin, tmp_path):
    """osmium tags-filter and export (its own multipolygon assembly) count the places independently."""
    filtered, exported = tmp_path / "filtered.osm.pbf", tmp_path / "places.geojsonseq"
    keys = [key for key, _ in MAIN_KEYS] + ["building"]
    subprocess.run(["osmium", "tags-filter", HELSINKI, *["nwr/" + key for key in keys], "-o", filtered, "--overwrite"],
                   check=True, capture_output=True, timeout=60)
    subprocess.run(["osmium", "export", filtered, "-f", "geojsonseq", "-a", "type,id", "-o", exported, "--overwrite"],
                   check=True, capture_output=True, timeout=60)
    ids = set()
    for line in exported.read_text().split("\n"):  # not splitlines: it splits at the RS before each record
        if not line.strip("\x1e"):
            continue
        feature = json.loads(line.lstrip("\x1e"))
        properties = feature["properties"]
        tags = {k: v for k, v in properties.items() if not k.startswith("@")}
        if is_place(tags, properties["@type"]):
            ids.add((properties["@type"], properties["@id"]))
    relations = sum(1 for element, _ in ids if element == "relation")
    assert relations >= 8, "multipolygon places counted"

    db = tmp_path / "places.db"
    out = run(placectl_bin, HELSINKI, "--db", db)
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        imported = connection.execute("select count(*) from places").fetchone()[0]
        ours = connection.execute("select count(*) from places where id like 'osm:relation/%'").fetchone()[0]
    assert abs(imported - len(ids)) <= 0.03 * len(ids), (imported, len(ids))
    assert abs(ours - relations) <= max(1, 0.03 * relations), (ours, relations)


def test_progress_bar_on_a_terminal(existing_db, placectl_bin):
    leader, follower = pty.openpty()
    try:
        out = subprocess.run([placectl_bin, "import", HELSINKI, "--db", existing_db],
                             stdout=subprocess.PIPE, stderr=follower, timeout=120)
        os.close(follower)
        follower = None
        written = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            written += chunk
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    assert out.returncode == 0
    assert b"elements" in written and b"ETA" in written and b"/s" in written
    assert written.endswith(b"\r\x1b[K"), "the bar is cleared before the summary"


@pytest.mark.parametrize("damage", ["text", "truncated", "corrupt", "missing", "empty"])
def test_bad_input_leaves_database_untouched(existing_db, placectl_bin, tmp_path, damage):
    bad = tmp_path / "bad.osm.pbf"
    original = HELSINKI.read_bytes()
    expected = {
        "text": ("<osm version='0.6'/>\n", "not an OSM PBF file"),
        "truncated": (original[: len(original) // 2], "truncated"),
        "corrupt": (original[:300_000] + bytes(b ^ 0x5A for b in original[300_000:300_050])
                    + original[300_050:], "corrupt blob at byte"),
        "missing": (None, "no such file"),
        "empty": (b"", "not an OSM PBF file"),
    }
    content, message = expected[damage]
    if isinstance(content, str):
        bad.write_text(content)
    elif content is not None:
        bad.write_bytes(content)
    before = digest(existing_db)
    out = run(placectl_bin, bad, "--db", existing_db)
    assert out.returncode == 1
    assert out.stderr.startswith("placectl import: ") and message in out.stderr
    assert str(bad) in out.stderr
    assert digest(existing_db) == before
    assert out.stdout == ""
    assert sorted(p.name for p in existing_db.parent.iterdir()) == sorted(
        ["places.db"] + (["bad.osm.pbf"] if content is not None else []))


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_import_leaves_nothing_behind(existing_db, placectl_bin, tmp_path, sent):
    # Ctrl-C, or a service manager's stop, in an import of many minutes left its named file of up to
    # gigabytes beside the database; only a later import of the same pid removed it.
    before = digest(existing_db)
    # As from an interactive shell: a script's background job (CI started with `&`) inherits SIGINT
    # ignored, and placectl rightly keeps an inherited ignore.
    importing = subprocess.Popen([placectl_bin, "import", HELSINKI, "--db", existing_db],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=lambda: signal.signal(sent, signal.SIG_DFL))
    temporary = tmp_path / ("places.db.new-%d" % importing.pid)
    deadline = time.monotonic() + 30
    while not temporary.exists():
        assert importing.poll() is None and time.monotonic() < deadline, "no temporary file seen"
        time.sleep(0.01)
    importing.send_signal(sent)  # while it reads the extract: the whole import takes a second or two
    assert importing.wait(timeout=30) == -sent, "ended by the signal, as it would have been"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["places.db"]
    assert digest(existing_db) == before


def test_an_import_killed_with_sigkill_is_swept_by_the_next(existing_db, placectl_bin, tmp_path):
    # SIGKILL (or a power cut) gives an import no chance to remove its file: each one left a file as
    # large as the places file until the disk filled. The next import removes those of dead processes
    # and keeps one whose process still runs (pid 1 here: another import, as far as it can tell).
    before = digest(existing_db)
    importing = subprocess.Popen([placectl_bin, "import", HELSINKI, "--db", existing_db],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    temporary = tmp_path / ("places.db.new-%d" % importing.pid)
    deadline = time.monotonic() + 30
    while not temporary.exists():
        assert importing.poll() is None and time.monotonic() < deadline, "no temporary file seen"
        time.sleep(0.01)
    importing.kill()
    importing.wait(timeout=30)
    assert temporary.exists() and digest(existing_db) == before
    alive = tmp_path / "places.db.new-1"
    alive.write_text("another import's work in progress")
    assert run(placectl_bin, HELSINKI, "--db", existing_db).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["places.db", "places.db.new-1"]


def test_an_import_run_under_nohup_ignores_sighup(existing_db, placectl_bin, tmp_path):
    # A signal inherited as ignored stays ignored: `nohup placectl import` outlives its terminal.
    importing = subprocess.Popen([placectl_bin, "import", HELSINKI, "--db", existing_db],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    temporary = tmp_path / ("places.db.new-%d" % importing.pid)
    deadline = time.monotonic() + 30
    while not temporary.exists():
        assert importing.poll() is None and time.monotonic() < deadline, "no temporary file seen"
        time.sleep(0.01)
    importing.send_signal(signal.SIGHUP)
    assert importing.wait(timeout=120) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["places.db"]


def test_unwritable_target(existing_db, placectl_bin, tmp_path):
    # A directory where the database should be: the final rename fails, nothing changes.
    target = tmp_path / "db-is-a-directory"
    target.mkdir()
    (target / "keep").write_text("x")
    out = run(placectl_bin, HELSINKI, "--db", target)
    assert out.returncode == 1
    assert "cannot write" in out.stderr
    assert [p.name for p in target.iterdir()] == ["keep"]
    assert not [p for p in tmp_path.iterdir() if ".new-" in p.name], "the temporary file is removed"

    out = run(placectl_bin, HELSINKI, "--db", tmp_path / "no-such-dir" / "places.db")
    assert out.returncode == 1
    assert "cannot write" in out.stderr


@pytest.mark.parametrize("arguments", [[], ["--db"], ["--frobnicate", "x.osm.pbf"], ["a.pbf", "b.pbf"]])
def test_usage_errors_exit_2(placectl_bin, arguments):
    out = run(placectl_bin, *arguments)
    assert out.returncode == 2
    assert "usage: placectl import" in out.stderr


def test_help(placectl_bin):
    out = run(placectl_bin, "--help")
    assert out.returncode == 0
    assert "usage: placectl import FILE.osm.pbf [--db PATH] [--no-map]" in out.stdout
    assert "--no-map" in out.stdout
