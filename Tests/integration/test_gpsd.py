"""placed reading real gpsd, fed by gpsfake: moves match an independent reading of the same NMEA,
and placed survives gpsd going away and going silent."""

import os
import shutil
import signal

import pytest

import nmea
from conftest import DATA, ROOT
from harness import GpsFake, Placed, free_port, open_varlink

DRIVE = ROOT / "data" / "helsinki-drive.nmea"
# Named, not globbed: a recording gone from data/gpsd-logs fails its test instead of vanishing from the list.
RECORDINGS = [DATA / "gpsd-logs" / name for name in ("bt451.log", "haicom-305N.log", "nl2008u.log")]


def replay(placed_bin, log, tmp_path, distance_filter=50):
    port = free_port()
    gps = GpsFake(log, port)
    # gpsd says nothing once the log is replayed: placed's silence detection marks the end.
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock", "--gpsd", "localhost:%d" % port,
                    "--distance-filter", distance_filter, "--gpsd-timeout", 2)
    try:
        placed.wait_for_end_of_replay(timeout=180)
        return placed.moves(), nmea.moves(nmea.fixes(log), distance_filter)
    finally:
        gps.stop()
        assert placed.stop() == 0


def assert_same_moves(seen, expected):
    assert [n for n, _, _ in seen] == list(range(1, len(expected) + 1))
    assert len(seen) == len(expected), "placed moved %d times, NMEA says %d" % (len(seen), len(expected))
    for (n, lat, lon), (time, exp_lat, exp_lon) in zip(seen, expected):
        assert abs(lat - exp_lat) < 2e-7 and abs(lon - exp_lon) < 2e-7, \
            "move %d at %f,%f; NMEA epoch %s is at %f,%f" % (n, lat, lon, time, exp_lat, exp_lon)


def test_helsinki_drive_moves_match_the_nmea(placed_bin, tmp_path):
    seen, expected = replay(placed_bin, DRIVE, tmp_path)
    # The drive is ~4.5 km with stops and a gap: many moves, none while stopped.
    assert len(expected) > 50
    assert_same_moves(seen, expected)


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_real_recordings_moves_match_the_nmea(placed_bin, tmp_path, recording):
    log = nmea.with_preamble(recording, tmp_path / recording.name)
    seen, expected = replay(placed_bin, log, tmp_path)
    assert expected, "the recording has fixes"
    assert_same_moves(seen, expected)


def test_every_fix_is_a_move_with_filter_zero(placed_bin, tmp_path):
    log = nmea.with_preamble(DATA / "gpsd-logs" / "haicom-305N.log", tmp_path / "haicom.log")
    seen, expected = replay(placed_bin, log, tmp_path, distance_filter=0)
    assert len(expected) == len(nmea.fixes(log))
    assert_same_moves(seen, expected)


def test_reconnects_after_gpsd_is_killed_and_restarted(placed_bin, tmp_path):
    port = free_port()
    first = GpsFake(DRIVE, port)
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock", "--gpsd", "localhost:%d" % port)
    try:
        placed.wait_for(r"move 3 at", timeout=30)
        first.stop()  # gpsd killed mid-drive
        placed.wait_for(r"gpsd: (stale|connecting): .*retrying", timeout=10)
        moves_before = len(placed.moves())
        second = GpsFake(DRIVE, port)
        try:
            placed.wait_for(r"connected to gpsd", count=2, timeout=60)
            placed.wait_for(r"move %d at" % (moves_before + 3), timeout=60)
        finally:
            second.stop()
        assert placed.proc.poll() is None, "placed survived"
    finally:
        first.stop()
        assert placed.stop() == 0


def test_a_refresh_or_reload_without_fixes_keeps_the_ranking_stale(placed_bin, places_db, tmp_path):
    # A Refresh or SIGHUP ranks at the last fix once more: that ranking said stale: false while the
    # source said stale, as if the device knew where it was.
    shutil.copy(places_db, tmp_path / "places.db")
    port = free_port()
    gps = GpsFake(DRIVE, port)
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock",
                    "--gpsd", "localhost:%d" % port)
    try:
        placed.wait_for(r"ranking 2:", timeout=30)
        places = open_varlink(tmp_path / "sock")
        assert places.Current()["stale"] is False
        gps.stop()
        placed.wait_for(r"gpsd: (stale|connecting): ", timeout=10)
        before = places.Current()
        assert before["stale"] is True and places.Status()["source"] != "fix"
        places.Refresh()
        refreshed = places.Current()
        assert refreshed["generation"] == before["generation"] + 1 and refreshed["stale"] is True
        os.kill(placed.proc.pid, signal.SIGHUP)
        placed.wait_for(r"ranking %d:" % (refreshed["generation"] + 1), timeout=10)
        assert places.Current()["stale"] is True and places.Status()["stale"] is True
    finally:
        gps.stop()
        assert placed.stop() == 0


def test_silent_gpsd_is_detected_and_reconnected(placed_bin, tmp_path):
    port = free_port()
    log = nmea.with_preamble(DATA / "gpsd-logs" / "haicom-305N.log", tmp_path / "short.log")
    gps = GpsFake(log, port)
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock", "--gpsd", "localhost:%d" % port, "--gpsd-timeout", "1")
    try:
        placed.wait_for(r"move 1 at", timeout=30)
        # After the replay gpsd stays up with nothing to say: placed must notice within its timeout.
        placed.wait_for(r"gpsd: stale: no data from gpsd for 1\.\d s", timeout=30)
        placed.wait_for(r"connected to gpsd", count=2, timeout=10)
    finally:
        gps.stop()
        assert placed.stop() == 0


def test_gpsd_not_running_is_retried_with_backoff(placed_bin, tmp_path):
    port = free_port()
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock",
                    "--gpsd", "localhost:%d" % port, env={"PLACED_LOG_TIMESTAMPS": "1"})
    try:
        tries = placed.wait_for(r"^([\d.]+) placed: .*cannot connect to gpsd.*retrying in ([\d.]+) s", count=5,
                                timeout=10)
        delays = [float(m.group(2)) for m in tries[:4]]
        assert delays == [0.25, 0.5, 1.0, 2.0]
        # The retries come when they say: timer slack is a tenth of the delay, not sd-event's 250 ms.
        times = [float(m.group(1)) for m in tries[:5]]
        for delay, (before, after) in zip(delays, zip(times, times[1:])):
            assert delay <= after - before <= delay * 1.1 + 0.1, (delay, after - before)
    finally:
        assert placed.stop() == 0


def test_static_source_moves_once(placed_bin, tmp_path):
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock", "--static", "60.1699,24.9384,15")
    try:
        placed.wait_for(r"move 1 at 60.1699000,24.9384000 ±15.0 m", timeout=5)
    finally:
        assert placed.stop() == 0
    assert len(placed.moves()) == 1


@pytest.mark.parametrize("args,message", [
    (["--static", "91,0"], "latitude must be within"),
    (["--static", "abc"], "--static expects LAT,LON"),
    (["--distance-filter", "-5"], "--distance-filter expects a number"),
    (["--gpsd", "localhost:99999"], "port from 1 to 65535"),
    (["--bus", "bogus"], "--bus must be"),
    (["--frobnicate"], "unknown option"),
])
def test_bad_flags_are_usage_errors(placed_bin, args, message):
    import subprocess
    out = subprocess.run([placed_bin, *args], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2
    assert message in out.stderr
