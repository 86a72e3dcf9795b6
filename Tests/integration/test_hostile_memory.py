"""Memory under hostile clients, short storms each test run (issue 36; the long ones, 1,000,000 varlink
calls and 100,000 HTTP requests, are hostile.py run by hand, their figures in BENCHMARKS.md): RSS
grows by at most 1 MB from a tenth of the storm to its end, and a well-behaved client is answered
throughout."""
import pytest

import hostile
from test_kiosk_http import placed_web_bin  # noqa: F401 - the fixture


@pytest.fixture
def daemons(placed_bin, placed_web_bin, places_db, tmp_path):  # noqa: F811
    placed, web = hostile.start_daemons(placed_bin, placed_web_bin, places_db, tmp_path)
    yield placed, web
    web.stop()
    placed.stop()


def test_fuzzed_varlink_calls_leave_no_growth_and_harm_no_one(daemons, tmp_path):
    placed, _ = daemons
    tenth, last, witness = hostile.varlink_storm(tmp_path / "sock", placed.proc.pid, calls=50_000, seed=2)
    assert placed.proc.poll() is None
    assert last - tenth <= 1.0, "RSS grew from %.2f to %.2f MB" % (tenth, last)
    assert witness.answers > 0 and witness.failures == [], witness.failures[:3]


def test_random_http_requests_leave_no_growth_and_harm_no_one(daemons):
    _, web = daemons
    tenth, last, witness = hostile.http_storm(web.port, web.proc.pid, requests=1_000, seed=2)
    assert web.proc.poll() is None
    assert last - tenth <= 1.0, "RSS grew from %.2f to %.2f MB" % (tenth, last)
    assert witness.answers > 0 and witness.failures == [], witness.failures[:3]
