"""Power cuts, a few each test run (issue 36; the 1,000-cut loop is power_cut.py run by hand, its
figures in BENCHMARKS.md): placed killed with SIGKILL at random moments while a client selects, another
puts and deletes own places, and the fleet export flushes to mosquitto, and `placectl import` killed at random points over the file placed
serves. Nothing acknowledged is lost, SQLite finds its files whole, the broker gets every marker once
under one id, and placed keeps serving the places it had."""
from power_cut import import_cuts, selection_cuts
from conftest import HELSINKI


def test_placed_killed_at_random_moments_loses_nothing(placed_bin, places_db, tmp_path):
    figures = selection_cuts(placed_bin, places_db, tmp_path, cycles=20, seed=1)
    assert figures["problems"] == []
    assert figures["acknowledged"] >= 20, "the client had selections acknowledged between cuts: %s" % figures
    assert figures["gaps"] == 0 and figures["dropped"] == 0, figures
    assert figures["own puts"] >= 20 and figures["own deletes"] >= 5, "own places changed between cuts: %s" % figures


def test_imports_killed_at_random_points_never_harm_the_served_file(placed_bin, placectl_bin, places_db,
                                                                     tmp_path):
    figures = import_cuts(placed_bin, placectl_bin, HELSINKI, places_db, tmp_path, cycles=10, seed=1)
    assert figures["problems"] == []
    assert figures["completed"] < 10, "some imports were killed before they finished: %s" % figures
