"""`placectl upgrade`: a places file an older placed wrote (schema 4, made here by `placed-bench
downgrade-places` with the older code path) is refused by placed, which names the command; the command
rewrites it in place in schema 6 (same places, same rankings, mode kept) and refreshes the running placed.
A file of schema 6 is left alone; a damaged or foreign file is a named error that changes nothing."""
import os
import re
import shutil
import sqlite3
import subprocess

import pytest

from harness import PLACES, bin_path

POSITIONS = [(60.1699, 24.9384), (60.1719, 24.9414), (60.1675, 24.9500), (60.1660, 24.9370)]


@pytest.fixture(scope="module")
def bench_bin():
    path = bin_path("release", "placed-bench")
    assert path.exists(), "build placed-bench first: swift build -c release --product placed-bench"
    return path


def downgrade(bench_bin, source, target):
    out = subprocess.run([bench_bin, "downgrade-places", source, target], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert schema(target) == "4"


def schema(path):
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        db.close()


def upgrade(placectl_bin, path, *arguments):
    return subprocess.run([placectl_bin, "upgrade", "--db", path, *map(str, arguments)], capture_output=True,
                          text=True, timeout=60)


def ranks(raw):
    return [[p["id"] for p in raw.call(PLACES + ".Rank", latitude=lat, longitude=lon, limit=20)["places"]]
            for lat, lon in POSITIONS]


def snapshot(path):
    status = path.stat()
    return path.read_bytes(), status.st_ino, status.st_mtime_ns, status.st_mode


def test_placed_names_the_upgrade_and_the_upgrade_refreshes_it(start_placed, placectl_bin, bench_bin, places_db,
                                                                tmp_path):
    expected = start_placed(directory=tmp_path / "current")
    with expected.raw() as raw:
        before = ranks(raw)
        count = raw.call(PLACES + ".Status")["places"]
    expected.stop()

    path = tmp_path / "places.db"
    downgrade(bench_bin, places_db, path)
    os.chmod(path, 0o640)
    placed = start_placed("--static", "60.1699,24.9384,10", static=None)
    placed.wait_for(r"error: cannot load the places: .* schema version 6 \(found 4\); rankings stay empty until it "
                    r"is upgraded \(placectl upgrade, which refreshes placed\)")
    with placed.raw() as raw:
        assert raw.call(PLACES + ".Status")["places"] == 0
        out = upgrade(placectl_bin, path, "--socket", tmp_path / "sock")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert len(lines) == 2, out.stdout
        assert lines[0].startswith("upgraded %s from schema 4 to 6 (%s places) in " % (path, f"{count:,}"))
        assert lines[1].startswith("refreshed: %s places, ranking " % f"{count:,}")
        assert raw.call(PLACES + ".Status")["places"] == count
        assert ranks(raw) == before, "the upgraded file ranks as the one imported"
    assert schema(path) == "6"
    assert path.stat().st_mode & 0o7777 == 0o640, "the file keeps its mode"
    assert not [name for name in os.listdir(tmp_path) if "upgrading" in name], os.listdir(tmp_path)


def test_without_a_running_placed_the_upgrade_says_so(placectl_bin, bench_bin, places_db, tmp_path):
    path = tmp_path / "places.db"
    downgrade(bench_bin, places_db, path)
    out = upgrade(placectl_bin, path, "--socket", tmp_path / "nobody")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == ["placed is not running: it loads the upgraded database when it starts"]
    assert schema(path) == "6"
    out = upgrade(placectl_bin, path, "--no-refresh")
    assert out.returncode == 0 and out.stdout == "%s is of schema 6 already: nothing to do\n" % path


def test_a_file_of_this_schema_is_left_alone(placectl_bin, places_db, tmp_path):
    path = tmp_path / "places.db"
    shutil.copy(places_db, path)
    before = snapshot(path)
    out = upgrade(placectl_bin, path, "--socket", tmp_path / "nobody")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "%s is of schema 6 already: nothing to do\n" % path, "no refresh either"
    assert snapshot(path) == before
    assert os.listdir(tmp_path) == ["places.db"]


def foreign_sqlite(path):
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE notes (text TEXT)")
    db.close()


def truncated_old(bench_bin, places_db, path):
    downgrade(bench_bin, places_db, path)
    os.truncate(path, path.stat().st_size - 4096)


def schema_3(places_db, path):
    shutil.copy(places_db, path)
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.close()


@pytest.mark.parametrize("make, message", [
    (lambda bench, db, path: path.write_bytes(b"not a database" * 100), r"is not an SQLite database"),
    (lambda bench, db, path: foreign_sqlite(path), r"is not a place database of schema version 6 \(found no meta"),
    (lambda bench, db, path: schema_3(db, path), r"is not a place database of schema version 6 \(found 3\)"),
    (lambda bench, db, path: truncated_old(bench, db, path), r"place database .* is damaged: "),
    (lambda bench, db, path: None, r"no place database at "),
])
def test_a_damaged_or_foreign_file_is_a_named_error_that_changes_nothing(placectl_bin, bench_bin, places_db,
                                                                           tmp_path, make, message):
    path = tmp_path / "places.db"
    make(bench_bin, places_db, path)
    before = snapshot(path) if path.exists() else None
    out = upgrade(placectl_bin, path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("placectl upgrade: ") and out.stderr.endswith("; the database is as it was\n")
    assert re.search(message, out.stderr), out.stderr
    assert (snapshot(path) if path.exists() else None) == before
    assert os.listdir(tmp_path) == (["places.db"] if before else [])
