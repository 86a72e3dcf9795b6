"""Selections end to end over varlink: which ids Select accepts, the marker, durability before the
reply (fdatasync seen by strace, kill -9, restart), 10,000 concurrent selections, counts feeding the
priors, and a full or read-only selection log answered with StoreFailed while rankings go on."""
import os
import re
import sqlite3
import subprocess
import threading

import pytest
import varlink

import nmea
from harness import PLACES, GpsFake, free_port
from test_gpsd import assert_same_moves
from test_varlink_robustness import short_drive


def top_ids(places, limit=20):
    return [p["id"] for p in places.Current(limit=limit)["places"]]


def drain(watch, quiet=0.5):
    """Every message the watcher has been sent, until none comes for `quiet` seconds."""
    messages = []
    watch.sock.settimeout(quiet)
    try:
        while True:
            messages.append(watch.reply())
    except TimeoutError:
        return messages


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs, unmounted at the end (request it before start_placed, so placed stops first)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M,mode=0755", "tmpfs", mount], check=True)
    try:
        yield mount
    finally:
        if subprocess.run(["umount", mount]).returncode != 0:
            subprocess.run(["umount", "-l", mount], check=True)


def fill(directory):
    """Writes a file until the file system is full; returns it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as error:
        assert error.errno == 28, error  # ENOSPC
    finally:
        os.close(fd)
    return filler


def test_select_accepts_the_last_three_rankings_only(start_placed, tmp_path):
    log = short_drive(tmp_path / "drive.nmea", 80)
    port = free_port()
    gps = GpsFake(log, port)
    placed = start_placed("--gpsd", "localhost:%d" % port, "--gpsd-timeout", 2, static=None)
    try:
        watch = placed.raw(timeout=30)
        watch.send(PLACES + ".Watch", more=True)
        placed.wait_for_end_of_replay(timeout=60)
    finally:
        gps.stop()
    rankings = {m["generation"]: m for m in drain(watch) if m.get("places")}
    last = max(rankings)
    assert sorted(rankings) == list(range(1, last + 1)) and last >= 8
    with placed.open() as places:
        # Each ranking's full list (20), recomputed where it was made: Rank is the same model.
        full = {}
        for generation, ranking in rankings.items():
            where = ranking["location"]
            full[generation] = [p["id"] for p in places.Rank(
                where["latitude"], where["longitude"], where.get("accuracy"), 20)["places"]]
            assert full[generation][:5] == [p["id"] for p in ranking["places"]], generation
        recent = set().union(*(full[g] for g in (last, last - 1, last - 2)))

        only_two_back = [i for i in full[last - 2] if i not in full[last] + full[last - 1]]
        assert only_two_back, "the drive moves far enough for the list to change"
        seen = {p["id"]: p for p in rankings[last - 2]["places"]}
        only_two_back.sort(key=lambda i: i not in seen)  # one the watcher saw, if there is one
        marker = places.Select(only_two_back[0])["marker"]
        assert marker["generation"] == last - 2, "the ranking it was picked from"
        if only_two_back[0] in seen:
            ranked = {k: v for k, v in seen[only_two_back[0]].items() if k != "address_source"}
            assert marker["place"] == ranked, "as it stood in that ranking (the log keeps no address source)"

        older = [i for g in range(1, last - 2) for i in full[g] if i not in recent]
        assert older, "places from early in the drive are out of the last three rankings"
        for place in {older[0], older[-1]}:
            with pytest.raises(varlink.VarlinkError) as refused:
                places.Select(place)
            assert refused.value.error() == PLACES + ".NotInRanking"
            assert refused.value.parameters() == {"id": place}
        assert [m["selection"] for m in places.History()["markers"]] == [marker["selection"]]

        # A Refresh is one more ranking: the window moves on by one, no more.
        places.Refresh()
        now = places.Current(limit=20)
        assert now["generation"] == last + 1
        full[last + 1] = [p["id"] for p in now["places"]]
        one_back = [i for i in full[last - 1] if i not in full[last] + full[last + 1]]
        assert one_back, "the last two moves changed the list"
        assert places.Select(one_back[0])["marker"]["generation"] == last - 1
        three_back = [i for i in full[last - 2] if i not in full[last - 1] + full[last] + full[last + 1]]
        assert three_back
        with pytest.raises(varlink.VarlinkError) as refused:
            places.Select(three_back[0])
        assert refused.value.error() == PLACES + ".NotInRanking"


def test_reply_comes_after_the_row_is_synced_and_the_watchers_told(start_placed, tmp_path):
    placed = start_placed()
    watch = placed.raw()
    watch.send(PLACES + ".Watch", more=True)
    watch.reply()
    with placed.raw() as raw:
        place = raw.call(PLACES + ".Current")["places"][0]["id"]
        output = tmp_path / "strace.out"
        trace = subprocess.Popen(
            ["strace", "-f", "-y", "-s", "1000", "-e", "trace=fsync,fdatasync,sendto,sendmsg,write",
             "-o", output, "-p", str(placed.proc.pid)], stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(100):  # strace announces itself once attached
                if "attached" in trace.stderr.readline():
                    break
            marker = raw.call(PLACES + ".Select", id=place)["marker"]
            assert watch.reply()["marker"] == marker
        finally:
            trace.terminate()
            trace.wait(10)
        lines = output.read_text().splitlines()
    synced = next(i for i, line in enumerate(lines) if re.search(r"f(data)?sync\(\d+</.*selections\.db", line))
    logged = next(i for i, line in enumerate(lines) if "selected " in line)
    told = [i for i, line in enumerate(lines) if "sendto(" in line and '"marker' in line]
    assert len(told) == 2, "one to the watcher, one reply"
    assert synced < logged < told[0] < told[1], "\n".join(lines)
    watch.close()


def test_a_selection_survives_kill_9_right_after_its_reply(start_placed):
    placed = start_placed()
    markers = []
    for round in range(3):
        with placed.raw() as raw:
            ids = raw.call(PLACES + ".Current", limit=20)["places"]
            raw.send(PLACES + ".Select", {"id": ids[round]["id"]})
            reply = raw.reply()
            placed.kill()  # at once: no shutdown, no checkpoint
        markers.insert(0, reply["marker"])
        placed = start_placed()
        placed.wait_for(r"last marker %s" % re.escape(markers[0]["place"]["id"]))
        with placed.open() as places:
            assert places.History()["markers"] == markers
            assert places.Status()["marker"] == markers[0]
            assert next(places.Watch(_more=True))["marker"] == markers[0]
    assert [m["selection"] for m in markers] == [3, 2, 1]


def test_ten_thousand_selections_from_ten_clients(start_placed, tmp_path):
    placed = start_placed()
    with placed.raw() as raw:
        ids = [p["id"] for p in raw.call(PLACES + ".Current", limit=20)["places"]]
    replies = [[] for _ in range(10)]
    errors = []

    def client(n):
        try:
            with placed.raw(timeout=30) as raw:
                for i in range(1000):
                    place = ids[(n + i) % len(ids)]
                    replies[n].append((raw.call(PLACES + ".Select", id=place)["marker"]["selection"], place))
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    acknowledged = dict(pair for client_replies in replies for pair in client_replies)
    assert sorted(acknowledged) == list(range(1, 10001)), "unique and contiguous"
    for client_replies in replies:  # each client's own selections in the order it made them
        assert [s for s, _ in client_replies] == sorted(s for s, _ in client_replies)

    # History, paged back with `before`, lists each exactly once, newest first.
    listed, before = [], None
    with placed.open() as places:
        while True:
            page = places.History(1000, before)["markers"] if before else places.History(1000)["markers"]
            if not page:
                break
            listed += [(m["selection"], m["place"]["id"]) for m in page]
            before = page[-1]["selection"]
        assert places.Status()["marker"]["selection"] == 10000
    assert [s for s, _ in listed] == list(range(10000, 0, -1))
    assert dict(listed) == acknowledged

    with sqlite3.connect("file:%s?mode=ro" % (tmp_path / "selections.db"), uri=True) as db:
        assert db.execute("select count(*), count(distinct id), min(id), max(id) from selections").fetchone() == \
            (10000, 10000, 1, 10000)
        assert dict(db.execute("select id, place_id from selections")) == acknowledged


def test_picks_raise_a_place_where_they_were_made(start_placed, tmp_path):
    placed = start_placed()
    with placed.open() as places:
        before = places.Current(limit=20)["places"]
        chosen = before[4]
        for _ in range(30):
            places.Select(chosen["id"])
        places.Refresh()
        after = places.Current(limit=20)["places"]
    ranked = [p["id"] for p in after]
    assert ranked.index(chosen["id"]) < 4, "picked 30 times, it ranks higher"
    boosted = after[ranked.index(chosen["id"])]["likelihood"]
    assert boosted > chosen["likelihood"] * 2
    # The picks come back from the log after a restart: ranking 1 already has them. (Their weights age
    # with the wall clock between the two rankings, by about 1e-9 here.)
    assert placed.stop() == 0
    placed = start_placed()
    with placed.open() as places:
        again = places.Current(limit=20)
        assert again["generation"] == 1 and [p["id"] for p in again["places"]] == ranked
        assert abs(again["places"][ranked.index(chosen["id"])]["likelihood"] - boosted) < 1e-6


def test_a_full_disk_fails_selections_while_fixes_and_rankings_go_on(small_tmpfs, start_placed, tmp_path):
    log = short_drive(tmp_path / "drive.nmea", 80)
    port = free_port()
    gps = GpsFake(log, port, cycle=0.03)
    placed = start_placed("--gpsd", "localhost:%d" % port, "--gpsd-timeout", 2, static=None,
                          selections=small_tmpfs / "selections.db")
    try:
        watch = placed.raw(timeout=30)
        watch.send(PLACES + ".Watch", more=True)
        watch.reply()
        placed.wait_for(r"ranking 2:", timeout=30)
        with placed.open() as places:
            first = places.Select(top_ids(places)[0])["marker"]
            filler = fill(small_tmpfs)
            for _ in range(3):
                with pytest.raises(varlink.VarlinkError) as refused:
                    places.Select(top_ids(places)[1])
                assert refused.value.error() == PLACES + ".StoreFailed"
                assert "full" in refused.value.parameters()["reason"]
            moves = len(placed.moves())
            placed.wait_for(r"move %d at" % (moves + 2), timeout=30)  # fixes keep coming
            assert places.Current()["generation"] >= moves + 2
            assert places.History()["markers"] == [first]
            filler.unlink()
            second = places.Select(top_ids(places)[2])["marker"]
            assert second["selection"] == first["selection"] + 1, "the failed ones used no ids"
        placed.wait_for_end_of_replay(timeout=60)
    finally:
        gps.stop()
    assert_same_moves(placed.moves(), nmea.moves(nmea.fixes(log), 50))
    generations = [m["generation"] for m in drain(watch) if m.get("places")]
    assert generations == list(range(1, len(placed.moves()) + 1)), "the watcher missed no ranking"
    assert placed.stop() == 0
    with sqlite3.connect(small_tmpfs / "selections.db") as db:
        assert db.execute("select id from selections order by id").fetchall() == [(1,), (2,)]


@pytest.mark.parametrize("shutdown", ["clean", "killed"])
def test_a_read_only_selection_log_fails_selections_while_rankings_go_on(small_tmpfs, start_placed, shutdown):
    selections = small_tmpfs / "selections.db"
    placed = start_placed(selections=selections)
    with placed.open() as places:
        marker = places.Select(top_ids(places)[0])["marker"]
    if shutdown == "killed":
        placed.kill()  # leaves the -wal and -shm files
    else:
        assert placed.stop() == 0
        with sqlite3.connect(selections) as db:  # the last connection checkpoints and removes the WAL
            assert db.execute("select count(*) from selections").fetchone() == (1,)
        db.close()
        assert not os.path.exists(str(selections) + "-wal")
    subprocess.run(["mount", "-o", "remount,ro", small_tmpfs], check=True)

    placed = start_placed(selections=selections)
    placed.wait_for(r"read-only")
    with placed.open() as places:
        assert places.Status()["marker"] == marker, "the marker is restored"
        assert places.History()["markers"] == [marker]
        with pytest.raises(varlink.VarlinkError) as refused:
            places.Select(top_ids(places)[0])
        assert refused.value.error() == PLACES + ".StoreFailed"
        assert "read-only" in refused.value.parameters()["reason"]
        places.Refresh()
        assert places.Current()["generation"] == 2, "rankings go on"
        assert places.History()["markers"] == [marker]

        # Writable again: the next selection is taken, without a restart.
        subprocess.run(["mount", "-o", "remount,rw", small_tmpfs], check=True)
        second = places.Select(top_ids(places)[1])["marker"]
        assert second["selection"] == marker["selection"] + 1
        placed.wait_for(r"selection log .* is writable again")
        assert places.History()["markers"] == [second, marker]
    assert placed.stop() == 0
    with sqlite3.connect(selections) as db:
        assert db.execute("select id from selections order by id").fetchall() == [(1,), (2,)]
