"""The places file (schema 6) under a running daemon: placed maps it read-only and uses it in place, so
what happens to the file while it is mapped matters. Replaced by rename (as placectl import does), the
daemon keeps serving the file it mapped until a Refresh switches; truncated in place, it reports the file
damaged instead of dying of SIGBUS; written over in place, it never crashes. The disk-backed import (node
locations and addresses in temporary files) makes the same file as one read in memory on Helsinki and on
both synthetic shapes."""
import os
import shutil
import sqlite3
import subprocess

import pytest

from conftest import HELSINKI
from harness import PLACES, VarlinkReplyError, bin_path

POSITIONS = [(60.1699, 24.9384), (60.1719, 24.9414), (60.1675, 24.9500), (60.1660, 24.9370), (60.1770, 24.9520),
             (60.1650, 24.9450)]  # inside the extract (60.164…60.179 N, 24.935…24.953 E)


def ranks(raw):
    return [[p["id"] for p in raw.call(PLACES + ".Rank", latitude=lat, longitude=lon, limit=20)["places"]]
            for lat, lon in POSITIONS]


def test_a_file_replaced_by_rename_serves_until_refresh_switches(start_placed, placectl_bin, tmp_path):
    placed = start_placed()
    with placed.raw() as raw:
        before = ranks(raw)
        assert all(before), "Helsinki has places at every position"
        # A file of other places (Helsinki without its map layer, then shifted) renamed into place.
        other = tmp_path / "other.db"
        out = subprocess.run([placectl_bin, "import", HELSINKI, "--db", other, "--no-map"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        os.rename(other, tmp_path / "places.db")
        assert ranks(raw) == before, "the mapped file is the one loaded, whatever the path names now"
        raw.call(PLACES + ".Refresh")
        placed.wait_for(r"Refresh: loaded [\d,]+ places")
        assert ranks(raw) == before, "the same places without a map layer rank the same"
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(PLACES + ".Map", latitude=60.1699, longitude=24.9384, radius=100.0)
        assert refused.value.name == PLACES + ".NoMapLayer", "the new file is the one serving"
    assert placed.proc.poll() is None


@pytest.mark.parametrize("size", [0, 8192, "half"])
def test_a_file_truncated_in_place_is_reported_never_fatal(start_placed, places_db, tmp_path, size):
    placed = start_placed()
    path = tmp_path / "places.db"
    with placed.raw() as raw:
        before = ranks(raw)
        os.truncate(path, path.stat().st_size // 2 if size == "half" else size)
        failures = 0
        for lat, lon in POSITIONS * 3:
            try:
                raw.call(PLACES + ".Rank", latitude=lat, longitude=lon, limit=20)
            except VarlinkReplyError as error:
                assert error.name == PLACES + ".StoreFailed", error
                assert "damaged" in error.parameters["reason"], error.parameters
                failures += 1
            try:
                raw.call(PLACES + ".Map", latitude=lat, longitude=lon, radius=200.0)
            except VarlinkReplyError as error:
                assert error.name == PLACES + ".StoreFailed", error
        assert failures > 0, "reads past the new end are reported"
        assert placed.proc.poll() is None, "no SIGBUS: the daemon lives"
        assert raw.call(PLACES + ".Status")["places"] > 1000
        # The truncated file does not load; the mapped one keeps answering (damaged) until a good file.
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(PLACES + ".Refresh")
        assert refused.value.name == PLACES + ".StoreFailed"
        shutil.copy(places_db, tmp_path / "new.db")
        os.rename(tmp_path / "new.db", path)
        raw.call(PLACES + ".Refresh")
        assert ranks(raw) == before
    assert placed.proc.poll() is None


def test_a_file_written_over_in_place_never_crashes_the_daemon(start_placed, placectl_bin, tmp_path):
    """Not how a places file is replaced (placectl import renames), but a careless cp: the mapping then
    shows the new bytes under the old file's layout. Answers may be wrong or refused; placed lives."""
    other = tmp_path / "other.db"
    out = subprocess.run([placectl_bin, "import", HELSINKI, "--db", other, "--no-map"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    placed = start_placed()
    with placed.raw() as raw:
        ranks(raw)
        with open(tmp_path / "places.db", "r+b") as target:  # cp's way: truncate, then write
            target.truncate(0)
            target.write(other.read_bytes())
        for lat, lon in POSITIONS * 3:
            for method, arguments in ((".Rank", {"limit": 20}), (".Map", {"radius": 300.0})):
                try:
                    raw.call(PLACES + method, latitude=lat, longitude=lon, **arguments)
                except VarlinkReplyError as error:
                    assert error.name in (PLACES + ".StoreFailed", PLACES + ".NoMapLayer"), error
        assert placed.proc.poll() is None
        raw.call(PLACES + ".Status")


def dump(path):
    db = sqlite3.connect(path)
    try:
        places = db.execute("SELECT * FROM places ORDER BY rowid").fetchall()
        features = db.execute("SELECT * FROM map_features ORDER BY rowid").fetchall()
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key NOT IN ('imported_at', 'pack_id')"))
    finally:
        db.close()
    return places, features, meta


def import_both_ways(placectl_bin, pbf, tmp_path, *options):
    """The places file from one read (a memory limit it fits) and from disk (one it does not)."""
    files, sizes = {}, {}
    for passes, limit in (("one", "64G"), ("two", "1K")):
        db = tmp_path / ("%s.db" % passes)
        out = subprocess.run([placectl_bin, "import", pbf, "--db", db, "--memory-limit", limit, *options],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        files[passes] = dump(db)
        sizes[passes] = db.stat().st_size
    # The same bytes but for the file's id and date: the same size.
    assert sizes["two"] == sizes["one"]
    return files


@pytest.mark.parametrize("options", [(), ("--no-map",)])
def test_two_pass_import_makes_the_same_file_as_one_read_on_helsinki(placectl_bin, tmp_path, options):
    files = import_both_ways(placectl_bin, HELSINKI, tmp_path, *options)
    assert len(files["one"][0]) > 1000
    assert files["two"] == files["one"]


@pytest.mark.parametrize("shape", ["city", "countryside"])
def test_two_pass_import_makes_the_same_file_as_one_read_on_the_synthetic_shapes(placectl_bin, tmp_path, shape):
    bench = bin_path("release", "placed-bench")
    assert bench.exists(), "build placed-bench first: swift build -c release"
    pbf = tmp_path / ("%s.osm.pbf" % shape)
    out = subprocess.run([bench, "synthesize", "--shape", shape, "--places", "20000", "--out", pbf],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    files = import_both_ways(placectl_bin, pbf, tmp_path)
    assert len(files["one"][0]) > 15_000 and len(files["one"][1]) > 10_000
    assert files["two"] == files["one"]
