"""`placectl import`: success, the progress bar only on a terminal, and every failure leaving the
existing database untouched (exit 1, named error) while usage mistakes exit 2."""
import hashlib
import os
import pty
import shutil
import sqlite3
import subprocess

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


def test_import_writes_database_and_one_line_summary(existing_db, placectl_bin):
    out = run(placectl_bin, HELSINKI, f"--db={existing_db}")
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", "no progress output when stderr is not a terminal"
    lines = out.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("imported ") and "from 30,010 elements in " in lines[0]
    assert lines[0].endswith(f"→ {existing_db}")
    places = int(lines[0].split()[1].replace(",", ""))
    assert places > 1500
    with sqlite3.connect(f"file:{existing_db}?mode=ro", uri=True) as db:
        assert db.execute("select count(*) from places").fetchone()[0] == places
    assert sorted(p.name for p in existing_db.parent.iterdir()) == ["places.db"], "no temporary files left"


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
    assert "usage: placectl import FILE.osm.pbf [--db PATH]" in out.stdout
