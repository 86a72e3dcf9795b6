"""`placectl` against a real placed on its varlink socket: every subcommand, readable and --json
output, selecting by id and by row of the last listing, watch until a signal, and the exit
statuses (0 ok, 1 error named on stderr, 2 usage)."""
import contextlib
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import xml.etree.ElementTree

import pytest

from harness import ROOT, Placed

HELSINKI = "60.1699,24.9384,10"
ERROR = "io.placed.Places."


class Daemon:
    """placed on a static Helsinki position with the bundled extract, and a placectl to talk to it:
    over the varlink socket, or over D-Bus when placed also serves on the bus at `bus_address`."""

    def __init__(self, placed_bin, placectl_bin, places_db, tmp_path, bus_address=None):
        shutil.copy(places_db, tmp_path / "places.db")
        self.socket = tmp_path / "sock"
        self.placectl_bin = placectl_bin
        self.address = bus_address
        # Each test its own runtime directory, so the row cache starts empty; a locale without a
        # language, so names are the name tags whatever the machine's locale.
        self.env = {**{k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES")},
                    "LANG": "C.UTF-8", "XDG_RUNTIME_DIR": str(tmp_path / "run")}
        (tmp_path / "run").mkdir()
        self.connection = ["--address", bus_address] if bus_address else ["--socket", str(self.socket)]
        self.placed = Placed(placed_bin, "--bus", "session" if bus_address else "none", "--static", HELSINKI,
                             "--db", tmp_path / "places.db", "--socket", self.socket,
                             env={"DBUS_SESSION_BUS_ADDRESS": bus_address} if bus_address else None)
        self.placed.wait_for(r"ranking 1: ")

    def ctl(self, *arguments, connect=True, timeout=20, locale=None):
        """placectl ARGUMENTS; `locale`: LANG for this run."""
        env = self.env if locale is None else {**self.env, "LANG": locale}
        return subprocess.run([str(self.placectl_bin), *map(str, arguments), *(self.connection if connect else [])],
                              capture_output=True, text=True, timeout=timeout, env=env)

    def json(self, *arguments, locale=None):
        out = self.ctl(*arguments, "--json", locale=locale)
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("\n") == 1, "one JSON document on one line"
        return json.loads(out.stdout)

    def popen(self, *arguments):
        return subprocess.Popen([str(self.placectl_bin), *arguments, *self.connection],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)


@pytest.fixture
def daemon(placed_bin, placectl_bin, places_db, tmp_path):
    d = Daemon(placed_bin, placectl_bin, places_db, tmp_path)
    yield d
    assert d.placed.stop() == 0


def table_rows(text):
    """The rows under a table's header line (starting with '#' or 'SELECTION')."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith(("#", "SELECTION")))
    return [line.split() for line in lines[header + 1:] if line.strip()]


@contextlib.contextmanager
def running(proc):
    """A placectl watch that is killed if the test leaves it running."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def read_line(proc, timeout=10):
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no line from placectl watch within %d s" % timeout
    return proc.stdout.readline()


def test_status_is_the_default(daemon):
    out = daemon.ctl()
    assert out.returncode == 0, out.stderr
    fields = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.stdout.splitlines())
    assert fields["source"] == "static"
    assert fields["location"] == "60.1699000,24.9384000 ±10 m (2d)"
    assert fields["fix age"].endswith(" s")
    assert fields["generation"] == "1"
    assert fields["places"] == "1,644 loaded"
    assert fields["distance filter"] == "50 m"
    assert fields["marker"] == "none yet"

    status = daemon.json("status")
    assert status["source"] == "static" and status["generation"] == 1 and status["places"] == 1644
    assert status["location"]["latitude"] == pytest.approx(60.1699) and status["location"]["age"] >= 0
    assert status["distance_filter"] == 50 and status["stale"] is False
    assert "marker" not in status


def test_places_table_and_json_agree(daemon):
    out = daemon.ctl("places")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ranking 1 at 60.1699000,24.9384000 ±10 m (2d)")
    header = out.stdout.splitlines()[1].split()
    assert header == ["#", "LIKELY", "DISTANCE", "NAME", "KIND", "ID"]
    rows = table_rows(out.stdout)
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]

    current = daemon.json("places")
    assert current["generation"] == 1 and current["stale"] is False
    assert [r[-1] for r in rows] == [p["id"] for p in current["places"]]
    assert [r[1] for r in rows] == ["%.1f%%" % (p["likelihood"] * 100) for p in current["places"]]
    likelihoods = [p["likelihood"] for p in current["places"]]
    assert likelihoods == sorted(likelihoods, reverse=True)
    assert set(current["places"][0]) >= {"id", "name", "kind", "latitude", "longitude", "distance", "likelihood",
                                          "attribution"}

    assert len(table_rows(daemon.ctl("places", "--limit", "3").stdout)) == 3
    assert len(daemon.json("places", "-n", "12")["places"]) == 12


def test_select_by_row_of_the_last_listing_and_by_id(daemon):
    listed = daemon.json("places")["places"]
    out = daemon.ctl("select", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("selected %s (%s), selection 1" % (listed[1]["name"], listed[1]["id"]))

    marker = daemon.json("select", listed[0]["id"])["marker"]
    assert marker["place"]["id"] == listed[0]["id"]
    assert marker["selection"] == 2 and marker["generation"] == 1
    assert marker["location"]["latitude"] == pytest.approx(60.1699)

    history = daemon.json("history")["markers"]
    assert [m["place"]["id"] for m in history] == [listed[0]["id"], listed[1]["id"]], "newest first"
    rows = table_rows(daemon.ctl("history").stdout)
    assert [r[0] for r in rows] == ["2", "1"]
    assert daemon.json("history", "--limit", "1")["markers"][0]["selection"] == 2
    assert [m["selection"] for m in daemon.json("history", "--before", "2")["markers"]] == [1]

    status = daemon.json("status")
    assert status["marker"]["place"]["id"] == listed[0]["id"]


def test_a_row_without_a_listing_is_an_unknown_id(daemon):
    out = daemon.ctl("select", "2")
    assert out.returncode == 1
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines[0] == "placectl: no place has the id '2' (io.placed.Places.UnknownPlace)"
    assert "not a row of the last 'placectl places' listing" in lines[1]


@pytest.mark.parametrize("arguments,name", [
    (["select", "osm:node/0"], "UnknownPlace"),
    (["places", "--limit", "50"], "InvalidLimit"),
    (["rank", "95", "0"], "InvalidPosition"),
])
def test_daemon_errors_exit_1_with_their_name(daemon, arguments, name):
    out = daemon.ctl(*arguments)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith("placectl: ") and out.stderr.rstrip().endswith("(%s%s)" % (ERROR, name))
    # --json changes only the output of success.
    assert daemon.ctl(*arguments, "--json").stderr == out.stderr


SVG = "{http://www.w3.org/2000/svg}"


def svg_texts(path):
    return ["".join(t.itertext()) for t in xml.etree.ElementTree.parse(path).getroot().iter(SVG + "text")]


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_map_draws_the_ranking_and_marker_svg_and_png(daemon, tmp_path):
    names = [p["name"] for p in daemon.json("places")["places"]][:5]
    assert daemon.ctl("select", "1").returncode == 0
    svg, png = tmp_path / "map.svg", tmp_path / "map.png"
    for path in (svg, png):
        out = daemon.ctl("map", "--output", path)
        assert out.returncode == 0, out.stderr
        assert re.fullmatch(r"map written to %s: 800×480, [\d,]+ features, 5 places, the marker\n" % re.escape(str(path)),
                            out.stdout), out.stdout
    texts = svg_texts(svg)
    assert set(names) <= set(texts) and "© OpenStreetMap contributors" in texts
    assert daemon.json("status")["marker"]["place"]["name"] in texts
    assert "Mannerheimintie" in texts, "street names"
    assert png_size(png) == (800, 480)
    # Standard output without --output; another size and centre.
    out = daemon.ctl("map", "--size", "640x400", "--at", "60.1686,24.9505", "--radius", "80")
    assert out.returncode == 0, out.stderr
    root = xml.etree.ElementTree.fromstring(out.stdout)
    assert (root.get("width"), root.get("height")) == ("640", "400")
    small = tmp_path / "small.png"
    assert daemon.ctl("map", "--size", "320x200", "--output", small).returncode == 0
    assert png_size(small) == (320, 200)


def test_map_outlines_the_own_places_in_view(daemon, tmp_path):
    sites = tmp_path / "sites.geojson"
    lat, lon = (float(x) for x in HELSINKI.split(",")[:2])
    d = 0.0004
    ring = lambda f: [[lon - f * d, lat + 0.001 - f * d], [lon + f * d, lat + 0.001 - f * d],
                      [lon + f * d, lat + 0.001 + f * d], [lon - f * d, lat + 0.001 + f * d],
                      [lon - f * d, lat + 0.001 - f * d]]
    sites.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"id": "own:gate", "name": "Gate Seven", "radius": 30},
         "geometry": {"type": "Point", "coordinates": [lon - 0.002, lat - 0.0005]}},
        {"type": "Feature", "properties": {"id": "own:yard", "name": "Inner Yard"},
         "geometry": {"type": "Polygon", "coordinates": [ring(1), ring(0.4)[::-1]]}},
        {"type": "Feature", "properties": {"id": "own:far", "name": "Far Depot", "radius": 30},
         "geometry": {"type": "Point", "coordinates": [lon + 0.2, lat]}}]}))
    assert daemon.ctl("own", "import", sites).returncode == 0
    svg = tmp_path / "own.svg"
    out = daemon.ctl("map", "--output", svg)
    assert out.returncode == 0, out.stderr
    assert ", 2 own places, " in out.stdout, out.stdout
    root = xml.etree.ElementTree.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    group = next(g for g in root.iter(ns + "g") if g.get("id") == "own-places")
    shapes = {e.find(ns + "title").text: e for e in group}
    assert set(shapes) == {"Gate Seven (own:gate)", "Inner Yard (own:yard)"}
    circle, polygon = shapes["Gate Seven (own:gate)"], shapes["Inner Yard (own:yard)"]
    assert circle.tag == ns + "circle" and float(circle.get("r")) == pytest.approx(30 * 480 / 300, abs=0.1)
    assert polygon.tag == ns + "path" and polygon.get("d").count("Z") == 2, "the outer ring and the hole"
    assert group.get("fill-rule") == "evenodd"
    texts = svg_texts(svg)
    assert "Far Depot" not in " ".join(texts)


def test_map_labels_the_marker_with_its_hours(daemon, tmp_path):
    places = daemon.json("places", "--limit", "20", "--fields", "id,name,open_now,next_change")["places"]
    with_hours = [(rank, p) for rank, p in enumerate(places, 1) if "open_now" in p]
    assert with_hours, "a place with opening hours among the ranked ones: %s" % places
    rank, place = with_hours[0]
    assert daemon.ctl("select", str(rank)).returncode == 0
    svg = tmp_path / "hours.svg"
    assert daemon.ctl("map", "--output", svg).returncode == 0
    lines = [t for t in svg_texts(svg) if t.startswith(("open", "closed"))]
    state = "open" if place["open_now"] else "closed"
    assert len(lines) == 1 and lines[0].startswith(state), lines
    if "next_change" in place:
        assert lines[0].startswith(state + " until ") and lines[0].endswith(place["next_change"][11:16]), lines


def test_map_without_a_map_layer_is_named_and_writes_nothing(placed_bin, placectl_bin, tmp_path):
    out = subprocess.run([placectl_bin, "import", ROOT / "data" / "helsinki-center.osm.pbf", "--db",
                          tmp_path / "bare.db", "--no-map"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    d = Daemon(placed_bin, placectl_bin, tmp_path / "bare.db", tmp_path)
    try:
        out = d.ctl("map", "--output", tmp_path / "map.svg")
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr == "placectl: the places file has no map layer: import it again without --no-map " \
                             "(io.placed.Places.NoMapLayer)\n"
        assert not (tmp_path / "map.svg").exists()
    finally:
        assert d.placed.stop() == 0


# Near the centre: Lasipalatsi (name:sv Glaspalatset); at the European Chemicals Agency: name:sv
# and name:en as well.
AGENCY = ("60.1657943", "24.938207", "osm:node/4989964844")
AGENCY_NAMES = {"fi": "Euroopan kemikaalivirasto", "sv": "Europeiska Kemikaliemyndigheten",
                "en": "European Chemicals Agency"}


def agency_name(d, *options, locale=None):
    ranked = d.json("rank", AGENCY[0], AGENCY[1], "--accuracy", "5", "-n", "3", *options, locale=locale)["places"]
    return next(p["name"] for p in ranked if p["id"] == AGENCY[2])


@pytest.mark.parametrize("options, locale, expected", [
    ([], None, "fi"), (["--language", "sv"], None, "sv"), (["--language=en_GB.UTF-8"], None, "en"),
    ([], "sv_FI.UTF-8", "sv"), ([], "en_US.UTF-8", "en"), ([], "de_DE.UTF-8", "fi"), ([], "POSIX", "fi"),
    (["--language", "C"], "sv_FI.UTF-8", "fi"), (["--language", "en"], "sv_FI.UTF-8", "en"),
])
def test_names_follow_language_else_lang(daemon, options, locale, expected):
    assert agency_name(daemon, *options, locale=locale) == AGENCY_NAMES[expected]


def test_language_reaches_places_watch_and_map(daemon, tmp_path):
    def names(*options, locale=None):
        return {p["name"] for p in daemon.json("places", "-n", "20", *options, locale=locale)["places"]}
    assert "Lasipalatsi" in names() and "Glaspalatset" not in names()
    assert "Glaspalatset" in names("--language", "sv") and "Glaspalatset" in names(locale="sv_FI.UTF-8")
    assert names("--language", "sv") == names(locale="sv_FI.UTF-8")
    assert daemon.json("--language", "sv", "places", "-n", "20")["places"] == \
        daemon.json("places", "-n", "20", "--language", "sv")["places"], "a global option or the command's"
    with running(daemon.popen("watch", "--json", "--language", "sv")) as watch:
        first = json.loads(read_line(watch))
        assert first["places"] == daemon.json("places", "--language", "sv")["places"]
    svg = tmp_path / "sv.svg"
    assert daemon.ctl("map", "--language", "sv", "--output", svg).returncode == 0
    assert "Mannerheimvägen" in svg_texts(svg) and "Mannerheimintie" not in svg_texts(svg)
    assert daemon.ctl("map", "--output", svg, locale="sv_FI.UTF-8").returncode == 0
    assert "Mannerheimvägen" in svg_texts(svg)


def test_rank_is_a_what_if_query(daemon):
    ranked = daemon.json("rank", "60.1710", "24.9410", "--accuracy", "20", "--limit", "4")["places"]
    assert len(ranked) == 4
    assert all(p["distance"] < 200 for p in ranked)
    out = daemon.ctl("rank", "60.1710", "24.9410", "--accuracy=20", "-n", "4")
    assert [r[-1] for r in table_rows(out.stdout)] == [p["id"] for p in ranked]
    # A southern, western position: negative numbers are arguments, not options. No places there.
    far = daemon.ctl("rank", "-33.8568", "-151.2153")
    assert far.returncode == 0, far.stderr
    assert far.stdout == "no places near\n"
    assert daemon.json("status")["generation"] == 1, "ranking changed nothing"


def test_watch_streams_markers_until_sigint(daemon):
    first_id = daemon.json("places")["places"][0]["id"]
    with running(daemon.popen("watch")) as watch:
        line = read_line(watch)
        assert " ranking 1 at 60.1699000,24.9384000" in line and "%" in line
        assert daemon.ctl("select", "1").returncode == 0
        line = read_line(watch)
        assert " marker " in line and "(%s), selection 1" % first_id in line
        watch.send_signal(signal.SIGINT)
        assert watch.wait(10) == 0
        assert watch.stderr.read() == ""


def test_watch_json_one_object_per_line_until_sigterm(daemon):
    with running(daemon.popen("watch", "--json")) as watch:
        first = json.loads(read_line(watch))
        assert first["generation"] == 1 and len(first["places"]) == 5 and first["stale"] is False
        picked = first["places"][2]["id"]
        assert daemon.ctl("select", picked).returncode == 0
        update = json.loads(read_line(watch))
        assert update["marker"]["place"]["id"] == picked
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(10) == 0


def test_watch_ends_with_1_when_placed_goes(daemon):
    with running(daemon.popen("watch")) as watch:
        read_line(watch)
        assert daemon.placed.stop() == 0
        assert watch.wait(10) == 1
        assert "placed closed the connection" in watch.stderr.read()
    # The fixture stops placed again: a no-op.


def test_every_read_command_has_json(daemon):
    for arguments in (["status"], ["places"], ["history"], ["rank", "60.17", "24.94"]):
        reply = daemon.json(*arguments)
        assert isinstance(reply, dict) and reply, arguments


def test_missing_socket_exits_1_with_a_hint(placectl_bin, tmp_path):
    path = tmp_path / "no-such-socket"
    for command in (["status"], ["places"], ["watch"], ["select", "x"]):
        out = subprocess.run([placectl_bin, *command, "--socket", str(path)], capture_output=True, text=True,
                             timeout=10)
        assert out.returncode == 1, command
        assert out.stderr == "placectl: is placed running? socket %s: No such file or directory\n" % path


def test_a_socket_nobody_listens_on(placectl_bin, tmp_path):
    import socket as sockets
    path = tmp_path / "dead"
    s = sockets.socket(sockets.AF_UNIX)
    s.bind(str(path))
    s.close()  # bound, never listening: connection refused
    out = subprocess.run([placectl_bin, "--socket", str(path)], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert out.stderr == "placectl: is placed running? socket %s: Connection refused\n" % path


@pytest.mark.parametrize("arguments", [
    ["frobnicate"], ["places", "--frobnicate"], ["select"], ["select", "a", "b"], ["rank", "60.1"],
    ["rank", "north", "east"], ["places", "--limit", "0"], ["places", "--limit"], ["rank", "1", "2", "--accuracy", "-3"],
    ["--bus", "--socket", "/x", "status"], ["--json", "import", "x.osm.pbf"], ["history", "--before", "x"],
    ["map", "--at", "60.17"], ["map", "--at", "95,24"], ["map", "--radius", "5000"], ["map", "--size", "800"],
    ["map", "--limit", "21"], ["map", "extra"], ["--language", "sv", "status"], ["history", "--language", "sv"],
    ["upgrade", "extra"], ["upgrade", "--db"], ["upgrade", "--db", ""],
])
def test_usage_errors_exit_2(placectl_bin, arguments):
    out = subprocess.run([placectl_bin, *arguments], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines[0].startswith("placectl")
    assert lines[1].startswith("usage: placectl")
    assert lines[2].startswith("Try 'placectl") and lines[2].endswith(" --help'.")


@pytest.mark.parametrize("command", ["status", "places", "select", "watch", "history", "rank", "refresh", "map",
                                     "import", "upgrade"])
def test_help_everywhere(placectl_bin, command):
    for arguments in ([command, "--help"], [command, "-h"], ["--help", command]):
        out = subprocess.run([placectl_bin, *arguments], capture_output=True, text=True, timeout=10)
        assert out.returncode == 0
        assert out.stdout.startswith("usage: placectl %s" % command)
        assert out.stderr == ""


def test_root_help_lists_the_commands_and_version(placectl_bin):
    out = subprocess.run([placectl_bin, "--help"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    for command in ("status", "places", "select", "watch", "history", "rank", "refresh", "map", "import", "upgrade"):
        assert "\n  %s " % command in out.stdout
    version = subprocess.run([placectl_bin, "--version"], capture_output=True, text=True, timeout=10)
    assert version.returncode == 0 and version.stdout.startswith("placectl ")


def test_refresh_after_an_import_serves_the_new_file(daemon, tmp_path):
    count = daemon.json("status")["places"]
    out = daemon.ctl("refresh")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "refreshed: %s places, ranking 2\n" % f"{count:,}", "the same file: ranked again"
    assert not [line for line in daemon.placed.lines if "loaded" in line]

    imported = daemon.ctl("import", ROOT / "data" / "helsinki-center.osm.pbf", "--db", tmp_path / "places.db",
                          connect=False)
    assert imported.returncode == 0, imported.stderr
    status = daemon.json("refresh")
    assert status["generation"] == 3 and status["places"] == count
    daemon.placed.wait_for(r"Refresh: loaded %d places" % count)

    (tmp_path / "broken.db").write_bytes(b"not a database" * 100)
    os.rename(tmp_path / "broken.db", tmp_path / "places.db")
    failed = daemon.ctl("refresh")
    assert failed.returncode == 1 and failed.stdout == ""
    assert re.match(r"placectl: cannot load .*; keeping the %s places loaded" % f"{count:,}", failed.stderr)


def test_bash_completion_offers_commands_options_and_ids(daemon):
    completion = os.path.join(os.path.dirname(__file__), "..", "..", "etc", "bash-completion", "placectl")
    script = """
        source %s
        complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _placectl; echo "${COMPREPLY[*]}"; }
        complete_words placectl pl
        complete_words placectl places --li
        complete_words placectl --socket %s select osm:
    """ % (completion, daemon.socket)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=20,
                         env={**daemon.env, "PATH": "%s:%s" % (daemon.placectl_bin.parent, os.environ["PATH"])})
    assert out.returncode == 0, out.stderr
    commands, options, ids = out.stdout.splitlines()
    assert commands.split() == ["places"]
    assert options.split() == ["--limit"]
    listed = [p["id"] for p in daemon.json("places", "--limit", "20")["places"]]
    assert set(listed) <= set(ids.split())


def test_bash_completion_knows_every_command_and_option_placectl_has(placectl_bin):
    # Written by hand beside the commands: fleet-dropin and import's --memory-limit were missing.
    text = (pathlib.Path(__file__).parent.parent.parent / "etc" / "bash-completion" / "placectl").read_text()
    connection = re.search(r'local connection="([^"]*)"', text).group(1)
    completed = {}
    for names, options in re.findall(r"^\s*([a-z| -]+)\) options=\"([^\"]*)\" ;;", text, re.M):
        for name in names.split("|"):
            completed[name.strip()] = set(options.replace("$connection", connection).split())

    def run(*arguments):
        out = subprocess.run([placectl_bin, *arguments], capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        return out.stdout

    commands = re.findall(r"^  ([a-z-]+)  ", run("--help").split("commands:")[1].split("\n\n")[0], re.M)
    assert commands and re.search(r'local commands="([^"]*)"', text).group(1).split() == commands
    assert set(completed) == set(commands)
    for command in commands:
        offered = set(re.findall(r"^\s+(?:-\w, )?(--[a-z-]+)", run(command, "--help"), re.M))
        assert completed[command] == offered, command


# --- the same commands over D-Bus: placed on a private dbus-daemon ------------------------------


@pytest.fixture
def bus_address(tmp_path):
    """A private session-type dbus-daemon (root may own any name on it); its address."""
    proc = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address",
                             "--address=unix:path=%s" % (tmp_path / "bus")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    address = proc.stdout.readline().strip()
    yield address
    proc.kill()
    proc.wait()


@pytest.fixture
def bus_daemon(placed_bin, placectl_bin, places_db, tmp_path, bus_address):
    """placed serving both interfaces; its `ctl` talks D-Bus at the private bus's address."""
    d = Daemon(placed_bin, placectl_bin, places_db, tmp_path, bus_address=bus_address)
    yield d
    assert d.placed.stop() == 0


def over_socket(d, *arguments):
    out = subprocess.run([str(d.placectl_bin), *arguments, "--json", "--socket", str(d.socket)], capture_output=True,
                         text=True, timeout=20, env=d.env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_bus_status_and_places_match_varlink(bus_daemon):
    status = bus_daemon.json("status")
    assert status["source"] == "static" and status["generation"] == 1 and status["distance_filter"] == 50
    assert status["location"]["latitude"] == pytest.approx(60.1699)
    assert "marker" not in status, "an empty Marker property is no marker"
    readable = bus_daemon.ctl("status")
    assert readable.returncode == 0 and "source           static" in readable.stdout

    places = bus_daemon.json("places", "--limit", "7")
    assert places["generation"] == 1 and places["stale"] is False
    assert [p["id"] for p in places["places"]] == [p["id"] for p in over_socket(bus_daemon, "places", "-n", "7")["places"]]
    assert set(places["places"][0]) >= {"id", "name", "kind", "latitude", "longitude", "distance", "likelihood",
                                         "attribution"}
    # Rank without --accuracy means the same over both (NaN on D-Bus, absent on varlink).
    assert bus_daemon.json("rank", "60.171", "24.941") == over_socket(bus_daemon, "rank", "60.171", "24.941")
    # D-Bus has no map: said so, before anything is asked.
    drawn = bus_daemon.ctl("map")
    assert drawn.returncode == 1 and drawn.stdout == ""
    assert drawn.stderr == "placectl: placectl map needs placed's varlink socket: D-Bus has no map\n"


def test_bus_names_in_the_readers_language_match_varlink(bus_daemon):
    for options, locale in [(["--language", "sv"], None), ([], "en_GB.UTF-8"), (["--language", "C"], "sv_FI.UTF-8")]:
        over_bus = bus_daemon.json("places", "-n", "20", *options, locale=locale)
        env = {**bus_daemon.env, "LANG": locale} if locale else bus_daemon.env
        over = subprocess.run([str(bus_daemon.placectl_bin), "places", "-n", "20", *options, "--json", "--socket",
                               str(bus_daemon.socket)], capture_output=True, text=True, timeout=20, env=env)
        assert over_bus["places"] == json.loads(over.stdout)["places"], (options, locale)
    assert agency_name(bus_daemon, "--language", "sv") == AGENCY_NAMES["sv"]
    assert agency_name(bus_daemon, locale="en_US.UTF-8") == AGENCY_NAMES["en"]
    assert agency_name(bus_daemon) == AGENCY_NAMES["fi"]


def test_bus_select_by_row_history_and_named_error(bus_daemon):
    listed = [r[-1] for r in table_rows(bus_daemon.ctl("places").stdout)]
    out = bus_daemon.ctl("select", "3")
    assert out.returncode == 0, out.stderr
    assert "(%s), selection 1" % listed[2] in out.stdout
    assert [m["place"]["id"] for m in bus_daemon.json("history")["markers"]] == [listed[2]]
    assert over_socket(bus_daemon, "status")["marker"]["place"]["id"] == listed[2]

    bad = bus_daemon.ctl("select", "osm:node/0")
    assert bad.returncode == 1
    assert bad.stderr == "placectl: no place has the id 'osm:node/0' (io.placed.Placed1.Error.UnknownPlace)\n"
    paged = bus_daemon.ctl("history", "--before", "2")
    assert paged.returncode == 1 and "--before needs the varlink socket" in paged.stderr


def test_bus_refresh(bus_daemon):
    out = bus_daemon.ctl("refresh")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "refreshed: ranking 2\n", "D-Bus tells no place count"
    assert over_socket(bus_daemon, "status")["generation"] == 2


def test_bus_watch_until_sigint_and_when_placed_leaves(bus_daemon):
    with running(bus_daemon.popen("watch")) as watch:
        assert " ranking 1 at 60.1699000,24.9384000" in read_line(watch)
        assert bus_daemon.ctl("select", "osm:way/289767497").returncode == 0
        assert " marker Forum (osm:way/289767497), selection 1" in read_line(watch)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(10) == 0, watch.stderr.read()

    with running(bus_daemon.popen("watch", "--json")) as watch:
        assert json.loads(read_line(watch))["marker"]["place"]["id"] == "osm:way/289767497"
        assert bus_daemon.placed.stop() == 0
        assert watch.wait(10) == 1
        assert "placed closed the connection on io.placed.Placed1" in watch.stderr.read()


def test_bus_choices_follow_the_environment(bus_daemon):
    env = {**bus_daemon.env, "DBUS_SYSTEM_BUS_ADDRESS": bus_daemon.address,
           "DBUS_SESSION_BUS_ADDRESS": bus_daemon.address}
    for choice in (["--bus"], ["--bus", "--system"], ["--user"]):
        out = subprocess.run([str(bus_daemon.placectl_bin), "status", "--json", *choice], capture_output=True,
                             text=True, timeout=20, env=env)
        assert out.returncode == 0, (choice, out.stderr)
        assert json.loads(out.stdout)["source"] == "static"


def test_bus_without_placed_exits_1_with_a_hint(placectl_bin, bus_address):
    out = subprocess.run([placectl_bin, "places", "--address", bus_address], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 1
    assert out.stderr.startswith("placectl: is placed running? io.placed.Placed1 on bus %s: " % bus_address)
    nobus = subprocess.run([placectl_bin, "--address", "unix:path=/nonexistent/bus"], capture_output=True,
                           text=True, timeout=20)
    assert nobus.returncode == 1
    assert nobus.stderr == "placectl: is D-Bus running? bus unix:path=/nonexistent/bus: No such file or directory\n"


def test_status_shows_the_marker_restored_after_a_crash(daemon, placed_bin, tmp_path):
    chosen = daemon.json("places")["places"][1]
    assert daemon.ctl("select", chosen["id"]).returncode == 0
    daemon.placed.proc.kill()  # kill -9: nothing gets to tidy up
    daemon.placed.proc.wait()
    daemon.placed = Placed(placed_bin, "--bus", "none", "--static", HELSINKI, "--db", tmp_path / "places.db",
                           "--socket", daemon.socket)
    daemon.placed.wait_for(r"ranking 1: ")
    out = daemon.ctl("status")
    assert out.returncode == 0, out.stderr
    fields = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.stdout.splitlines())
    assert fields["marker"].startswith("%s (%s), selection 1" % (chosen["name"], chosen["id"])), fields["marker"]
