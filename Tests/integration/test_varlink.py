"""The io.placed.Places varlink interface against the PyPI `varlink` client and raw NUL-framed JSON:
introspection, every method, the Watch stream, named and standard errors, replies that match the
interface definition to the letter."""
import datetime
import math
import os
import re
import shutil
import sqlite3

import pytest
import varlink

from conftest import ROOT
from harness import HELSINKI_CENTER, PLACES, VarlinkReplyError, conforms

IDL = (ROOT / "etc" / "io.placed.Places.varlink").read_text()
INTERFACE = varlink.Interface(IDL)
FAR_AWAY = (60.1656, 24.9510)  # by the Esplanadi, ~900 m south-east: none of its places rank at the centre


def returns(method, reply):
    """Problems with `reply` as the output of `method`."""
    return conforms(INTERFACE, INTERFACE.members[method].out_type, reply, method)


def error_conforms(error):
    name = error.error() if isinstance(error, varlink.VarlinkError) else error.name
    parameters = error.parameters() if isinstance(error, varlink.VarlinkError) else error.parameters
    assert name.startswith(PLACES + "."), name
    member = INTERFACE.members[name.rsplit(".", 1)[1]]
    assert conforms(INTERFACE, member.type, parameters, name) == []
    return name, parameters


def test_introspection_returns_the_shipped_interface(start_placed):
    placed = start_placed()
    with placed.open("org.varlink.service") as service:
        info = service.GetInfo()
        assert info["interfaces"] == ["org.varlink.service", PLACES]
        assert info["product"] == "placed" and info["version"]
        assert service.GetInterfaceDescription(PLACES)["description"] == IDL.rstrip("\n")
        # The service interface itself is described too, and parses.
        described = varlink.Interface(service.GetInterfaceDescription("org.varlink.service")["description"])
        assert {"GetInfo", "GetInterfaceDescription"} <= set(described.members)
        with pytest.raises(varlink.InterfaceNotFound):
            service.GetInterfaceDescription("io.placed.Nothing")
    methods = {name for name, member in INTERFACE.members.items() if isinstance(member, varlink.scanner._Method)}
    assert methods == {"Current", "Rank", "Select", "Refresh", "History", "Status", "Watch", "Map"}


def test_methods_answer_the_pypi_client_as_the_interface_declares(start_placed):
    placed = start_placed()
    with placed.open() as places:
        current = places.Current()
        assert returns("Current", current) == []
        assert current["generation"] == 1 and current["stale"] is False
        assert (current["location"]["latitude"], current["location"]["longitude"]) == (60.1699, 24.9384)
        assert current["location"]["accuracy"] == 10 and current["location"]["age"] >= 0
        ranked = current["places"]
        assert len(ranked) == 5, "the default list length"
        likelihoods = [p["likelihood"] for p in ranked]
        assert likelihoods == sorted(likelihoods, reverse=True)
        assert all(0 <= x <= 1 for x in likelihoods) and sum(likelihoods) <= 1 + 1e-9
        assert all(p["attribution"] == "© OpenStreetMap contributors" for p in ranked)
        assert all(p["id"].startswith(("osm:node/", "osm:way/", "osm:relation/")) for p in ranked)

        longest = places.Current(limit=20)
        assert returns("Current", longest) == []
        assert longest["places"][:5] == ranked and len(longest["places"]) == 20

        elsewhere = places.Rank(FAR_AWAY[0], FAR_AWAY[1], 20.0, 3)
        assert returns("Rank", elsewhere) == []
        assert len(elsewhere["places"]) == 3
        assert not {p["id"] for p in elsewhere["places"]} & {p["id"] for p in longest["places"]}
        assert all(p["distance"] < 250 for p in elsewhere["places"])

        status = places.Status()
        assert returns("Status", status) == []
        assert status["source"] == "static" and status["generation"] == 1 and status["distance_filter"] == 50
        assert status["places"] > 1500 and "marker" not in status
        assert places.Current()["generation"] == 1, "Rank changes nothing"

        assert places.History() == {"markers": []}
        places.Refresh()
        assert places.Current()["generation"] == 2


def test_select_returns_the_marker_and_history_lists_it(start_placed):
    placed = start_placed()
    with placed.open() as places:
        current = places.Current()
        before = datetime.datetime.now(datetime.timezone.utc)
        marker = places.Select(current["places"][1]["id"])["marker"]
        assert returns("Select", {"marker": marker}) == []
        assert marker["place"] == current["places"][1], "the place as it stood in the ranking"
        assert marker["generation"] == 1 and marker["selection"] == 1
        assert {k: marker["location"][k] for k in ("latitude", "longitude", "accuracy")} == \
            {k: current["location"][k] for k in ("latitude", "longitude", "accuracy")}
        when = datetime.datetime.strptime(marker["time"], "%Y-%m-%dT%H:%M:%S.%f%z")
        assert abs((when - before).total_seconds()) < 5
        second = places.Select(current["places"][0]["id"])["marker"]
        assert second["selection"] == 2
        history = places.History()
        assert returns("History", history) == []
        assert history["markers"] == [second, marker], "newest first"
        assert places.Status()["marker"] == second


def test_watch_sends_the_state_then_each_ranking_and_marker(start_placed):
    placed = start_placed()
    with placed.open() as watcher, placed.open() as places:
        stream = watcher.Watch(_more=True)
        first = next(stream)
        assert returns("Watch", first) == []
        assert first["generation"] == 1 and first["places"] == places.Current()["places"]
        assert "marker" not in first

        places.Refresh()
        ranking = next(stream)
        assert returns("Watch", ranking) == []
        assert ranking["generation"] == 2 and ranking["places"] == places.Current()["places"]

        marker = places.Select(ranking["places"][2]["id"])["marker"]
        placed_event = next(stream)
        assert returns("Watch", placed_event) == []
        assert placed_event["marker"] == marker and placed_event["generation"] == 2

        places.Refresh()
        assert next(stream)["generation"] == 3

    # A watcher arriving later learns the marker in its first reply.
    with placed.open() as late:
        state = next(late.Watch(_more=True))
        assert state["generation"] == 3 and state["marker"]["selection"] == marker["selection"]


def test_watch_without_more_is_refused(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(PLACES + ".Watch")
        assert refused.value.name == "org.varlink.service.ExpectedMore"
        assert raw.call(PLACES + ".Current")["generation"] == 1, "the connection still serves"


@pytest.mark.parametrize("method, parameters, error", [
    ("Select", {"id": "osm:node/1"}, ("UnknownPlace", {"id": "osm:node/1"})),
    ("Select", {"id": "nonsense"}, ("UnknownPlace", {"id": "nonsense"})),
    ("Current", {"limit": 0}, ("InvalidLimit", {"limit": 0, "maximum": 20})),
    ("Current", {"limit": 21}, ("InvalidLimit", {"limit": 21, "maximum": 20})),
    ("Rank", {"latitude": 91.0, "longitude": 24.9}, ("InvalidPosition", {"latitude": 91, "longitude": 24.9})),
    ("Rank", {"latitude": 60.17, "longitude": 181.0}, ("InvalidPosition", {"latitude": 60.17, "longitude": 181})),
    ("Rank", {"latitude": 60.17, "longitude": 24.9, "accuracy": -1.0},
     ("InvalidPosition", {"latitude": 60.17, "longitude": 24.9, "accuracy": -1})),
    ("History", {"limit": 0}, ("InvalidLimit", {"limit": 0, "maximum": 1000})),
    ("History", {"limit": 1001}, ("InvalidLimit", {"limit": 1001, "maximum": 1000})),
])
def test_bad_requests_get_named_errors(start_placed, method, parameters, error):
    placed = start_placed()
    with placed.open() as places:
        with pytest.raises(varlink.VarlinkError) as refused:
            getattr(places, method)(**parameters)
        name, got = error_conforms(refused.value)
        assert name == PLACES + "." + error[0]
        if error[1] is not None:
            assert got == error[1]
        assert places.Current()["generation"] == 1, "the connection still serves"
        assert places.History() == {"markers": []}, "nothing was recorded"


def test_select_of_a_place_not_ranked_near_is_not_in_ranking(start_placed):
    placed = start_placed()
    with placed.open() as places:
        far = places.Rank(FAR_AWAY[0], FAR_AWAY[1], None, 1)["places"][0]["id"]
        with pytest.raises(varlink.VarlinkError) as refused:
            places.Select(far)
        assert error_conforms(refused.value) == (PLACES + ".NotInRanking", {"id": far})
        assert places.History() == {"markers": []} and "marker" not in places.Status()


@pytest.mark.parametrize("method, parameters, bad", [
    ("Current", {"limit": "5"}, "limit"),
    ("Current", {"limit": 2.5}, "limit"),
    ("Current", {"count": 5}, "count"),
    ("Select", {"id": 17}, "id"),
    ("Select", {}, "id"),
    ("Select", {"id": None}, "id"),
    ("Rank", {"latitude": "60.17", "longitude": 24.9}, "latitude"),
    ("Rank", {"latitude": 60.17}, "longitude"),
    ("History", {"before": True}, "before"),
    ("Refresh", {"now": True}, "now"),
])
def test_wrong_parameters_are_invalid_parameter(start_placed, method, parameters, bad):
    placed = start_placed()
    with placed.raw() as raw:
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(PLACES + "." + method, **parameters)
        assert (refused.value.name, refused.value.parameters) == \
            ("org.varlink.service.InvalidParameter", {"parameter": bad})
        assert raw.call(PLACES + ".Current")["generation"] == 1, "the connection still serves"
        assert raw.call(PLACES + ".History") == {"markers": []}


@pytest.mark.parametrize("method, error, parameters", [
    (PLACES + ".Nothing", "org.varlink.service.MethodNotFound", {"method": PLACES + ".Nothing"}),
    ("org.varlink.service.Nothing", "org.varlink.service.MethodNotFound", {"method": "org.varlink.service.Nothing"}),
    ("io.placed.Other.Current", "org.varlink.service.InterfaceNotFound", {"interface": "io.placed.Other"}),
    ("Current", "org.varlink.service.InterfaceNotFound", {"interface": ""}),
])
def test_unknown_methods_and_interfaces(start_placed, method, error, parameters):
    placed = start_placed()
    with placed.raw() as raw:
        with pytest.raises(VarlinkReplyError) as refused:
            raw.call(method)
        assert (refused.value.name, refused.value.parameters) == (error, parameters)
        assert raw.call(PLACES + ".Current")["generation"] == 1, "the connection still serves"


def test_oneway_and_pipelined_calls_are_answered_in_order(start_placed):
    placed = start_placed()
    with placed.raw() as raw:
        # Three calls in one write: a oneway Refresh (no reply), then two answered in order.
        raw.send_raw(b"".join(
            (b'{"method":"%s.Refresh","oneway":true}\0' % PLACES.encode(),
             b'{"method":"%s.Current","parameters":{"limit":1}}\0' % PLACES.encode(),
             b'{"method":"%s.Status"}\0' % PLACES.encode())))
        current, status = raw.reply(), raw.reply()
        assert current["generation"] == 2 and len(current["places"]) == 1
        assert status["generation"] == 2 and status["source"] == "static"
        assert not math.isnan(status["distance_filter"])


def test_a_places_file_placed_cannot_load_is_no_reason_to_exit(start_placed, places_db, tmp_path):
    # A file of the schema before this one, as an upgrade leaves it.
    shutil.copy(places_db, tmp_path / "places.db")
    db = sqlite3.connect(tmp_path / "places.db")
    with db:
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    db.close()
    placed = start_placed("--static", HELSINKI_CENTER, static=None)
    placed.wait_for(r"error: cannot load the places: .* schema version 3 \(found 2\); rankings stay empty until "
                    r"a new import \(placectl import, then placectl refresh\)")
    with placed.open() as places:
        assert places.Status()["places"] == 0
        assert places.Current()["places"] == []
        with pytest.raises(varlink.VarlinkError) as empty:
            places.Rank(60.1699, 24.9384, 10)
        assert empty.value.error() == PLACES + ".NoPlaces"

        shutil.copy(places_db, tmp_path / "new.db")
        os.rename(tmp_path / "new.db", tmp_path / "places.db")
        places.Refresh()
        assert places.Status()["places"] > 1000
        assert len(places.Current()["places"]) == 5


def test_refresh_reloads_the_places_only_when_the_file_changed(start_placed, places_db, tmp_path):
    placed = start_placed()
    with placed.open() as places:
        places.Refresh()
        assert places.Current()["generation"] == 2
        assert not [line for line in placed.lines if "loaded" in line], "the same file is not reloaded"

        # An import renames a new file into place: the next Refresh loads it.
        shutil.copy(places_db, tmp_path / "new.db")
        os.rename(tmp_path / "new.db", tmp_path / "places.db")
        places.Refresh()
        placed.wait_for(r"Refresh: loaded \d+ places")
        assert places.Current()["generation"] == 3

        # A broken file is the caller's StoreFailed, and the loaded places keep serving.
        (tmp_path / "broken.db").write_bytes(b"not a database" * 100)
        os.rename(tmp_path / "broken.db", tmp_path / "places.db")
        with pytest.raises(varlink.VarlinkError) as failed:
            places.Refresh()
        assert failed.value.error() == PLACES + ".StoreFailed"
        assert re.search(r"cannot load .*places\.db: .*; keeping the [\d,]+ places loaded",
                         failed.value.parameters()["reason"])
        placed.wait_for(r"Refresh: keeping the \d+ places loaded")
        current = places.Current()
        assert current["generation"] == 3 and len(current["places"]) == 5
