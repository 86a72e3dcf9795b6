"""The kiosk page in Debian's Chromium, with placed fed by gpsfake: the list matches placed's ranking,
a tap selects, moves arrive live, and the banners tell a stale source and an unreachable placed."""
import subprocess
import time

import pytest

import kiosk
from harness import HELSINKI_CENTER, GpsFake, Placed, bin_path, free_port, open_varlink
from test_visits import spot  # noqa: F401 (a fixture: a place ranked first at its own position)

SECOND = 1  # the list must follow a move within a second


@pytest.fixture(scope="session")
def placed_web_bin():
    path = bin_path("release", "placed-web")
    assert path.exists(), "build placed-web first: swift build -c release --product placed-web"
    return path


def realtime_of(line):
    """The wall-clock time PLACED_LOG_TIMESTAMPS puts first on a log line."""
    return float(line.split(" ", 1)[0])


def test_page_follows_placed_fed_by_gpsfake(placed_bin, placed_web_bin, places_db, tmp_path):
    import shutil
    shutil.copy(places_db, tmp_path / "places.db")
    points = kiosk.drive_points(3)
    log = kiosk.hold_log(tmp_path / "hold.nmea", points, seconds_each=15)
    port = free_port()
    socket_path = tmp_path / "sock"
    arguments = ["--bus", "none", "--db", tmp_path / "places.db", "--socket", socket_path,
                 "--selections", tmp_path / "selections.db"]
    placed = Placed(placed_bin, *arguments, "--gpsd", "localhost:%d" % port, env={"PLACED_LOG_TIMESTAMPS": "1"})
    web = kiosk.PlacedWeb(placed_web_bin, socket_path)
    browser = None
    gps = None
    try:
        browser = kiosk.chromium(800, 480, user_data_dir=tmp_path / "chromium")
        kiosk.requested_urls(browser)  # what the browser did before the page is not the page's
        browser.get(web.url())
        browser.execute_script(kiosk.OBSERVE_SCRIPT)
        gps = GpsFake(log, port)
        placed.wait_for(r"ranking 1:", timeout=30)
        kiosk.wait_until("ranking 1 on the page", lambda: kiosk.shown_generation(browser) == 1)

        # The list is placed's ranking, in its order, with its likelihoods.
        with open_varlink(socket_path) as client:
            current = client.Current()
        assert current["generation"] == 1
        shown = browser.execute_script(kiosk.LIST_SCRIPT)
        assert [p["id"] for p in shown] == [p["id"] for p in current["places"]]
        assert len(shown) >= 2
        for row, place in zip(shown, current["places"]):
            assert row["name"] == place["name"]
            assert row["likelihood"] == place["likelihood"]
            assert row["shown"] == kiosk.likelihood_text(place["likelihood"])
            assert abs(row["width"] - place["likelihood"]) < 0.01, "the bar is as long as the likelihood"
            assert row["height"] >= 48, "touch target"
        assert browser.execute_script(
            "return document.querySelector('.leaflet-control-attribution').textContent").endswith(
                "© OpenStreetMap contributors")
        # The circle is drawn for the location of the ranking the page shows (Current's moves on with
        # every fix, moves or not): the state placed-web sends the page.
        import json
        import urllib.request
        shown_state = json.load(urllib.request.urlopen(web.url("/state"), timeout=5))
        assert shown_state["generation"] == 1
        assert_accuracy_circle(browser, shown_state["location"])
        assert browser.execute_script("return document.querySelectorAll('path.likely-place').length") == len(shown)

        # Tap the second place: it is selected in placed and the marker shows its name and address.
        second = current["places"][1]
        browser.find_elements("css selector", "#places .place")[1].click()
        popup = kiosk.wait_until("the marker's popup", lambda: browser.execute_script(
            "const p = document.querySelector('.leaflet-popup-content'); return p && p.textContent"))
        assert second["name"] in popup
        if second.get("address"):
            assert second["address"] in popup
        assert browser.execute_script("return document.querySelectorAll('.leaflet-marker-icon').length") == 1
        with open_varlink(socket_path) as client:
            assert client.History(1)["markers"][0]["place"]["id"] == second["id"]
        time.sleep(0.5)  # Leaflet fades the popup in
        kiosk.keep(_screenshot(browser, tmp_path / "kiosk-800x480.png"), "kiosk-800x480.png")

        # The next move updates the list within a second of placed's ranking.
        ranked = placed.wait_for(r"^([\d.]+) placed: ranking 2:", timeout=30)[0]
        kiosk.wait_until("ranking 2 on the page", lambda: kiosk.shown_generation(browser) == 2, timeout=5)
        rendered = browser.execute_script("return window.__rendered['2']") / 1000
        latency = rendered - realtime_of(ranked.string)
        assert 0 <= latency < SECOND, "the list showed ranking 2 %.3f s after placed ranked" % latency
        with open_varlink(socket_path) as client:
            assert [p["id"] for p in client.Current()["places"]] == \
                [p["id"] for p in browser.execute_script(kiosk.LIST_SCRIPT)]
        assert kiosk.banner(browser) is None

        kiosk.resize(browser, 1920, 1080)
        time.sleep(0.3)
        kiosk.keep(_screenshot(browser, tmp_path / "kiosk-1920x1080.png"), "kiosk-1920x1080.png")
        rows = browser.execute_script(kiosk.LIST_SCRIPT)
        assert all(row["height"] >= 48 for row in rows)
        kiosk.resize(browser, 800, 480)

        # gpsd stops: the ranking turns stale and the page says so.
        gps.stop()
        kiosk.wait_until("the stale banner", lambda: kiosk.banner(browser) == "stale", timeout=10)

        # placed stops: the page says it is unreachable, keeps the last list, and recovers.
        assert placed.stop() == 0
        kiosk.wait_until("the unreachable banner", lambda: kiosk.banner(browser) == "unreachable", timeout=10)
        assert browser.execute_script(kiosk.LIST_SCRIPT), "the last places stay on screen"
        lat, lon = points[-1]
        placed = Placed(placed_bin, *arguments, "--static", "%.7f,%.7f,10" % (lat, lon))
        kiosk.wait_until("recovery", lambda: kiosk.banner(browser) is None, timeout=15)
        kiosk.wait_until("the new placed's ranking", lambda: kiosk.shown_generation(browser) == 1)

        # All along: no console errors, nothing asked of any machine but this one.
        assert kiosk.console_errors(browser) == []
        urls = kiosk.requested_urls(browser)
        assert any(url.endswith("/leaflet/leaflet.js") for url in urls)
        assert kiosk.off_machine(urls) == []
    finally:
        if browser:
            browser.quit()
        if gps:
            gps.stop()
        web.stop()
        placed.stop()


def assert_accuracy_circle(browser, location):
    """The circle around the position is the 95 % radius: its diameter in pixels is twice the accuracy
    in metres at the map's scale (Web Mercator: 156543.03 m per pixel at zoom 0 on the equator)."""
    import math
    width, zoom = browser.execute_script(
        "return [document.querySelector('path.accuracy').getBoundingClientRect().width,"
        " Number(document.getElementById('map').dataset.zoom)]")
    metres_per_pixel = 156543.03392 * math.cos(math.radians(location["latitude"])) / 2 ** zoom
    expected = 2 * location["accuracy"] / metres_per_pixel
    assert location["accuracy"] > 0
    assert abs(width - expected) <= max(2, 0.05 * expected), (width, expected)


def _screenshot(browser, path):
    browser.save_screenshot(str(path))
    return path


def test_page_draws_the_map_layer_without_errors(placed_bin, placed_web_bin, start_placed, tmp_path):
    placed = start_placed()
    web = kiosk.PlacedWeb(placed_web_bin, placed.socket)
    browser = None
    try:
        browser = kiosk.chromium(1920, 1080, user_data_dir=tmp_path / "chromium")
        kiosk.requested_urls(browser)
        browser.get(web.url())
        kiosk.wait_until("the list", lambda: kiosk.shown_generation(browser) == 1)
        features = int(kiosk.wait_until("the map's reply", lambda: browser.execute_script(
            "return document.getElementById('map').dataset.features")))
        assert features > 100, "the map layer around central Helsinki"
        assert browser.execute_script("return document.querySelectorAll('.leaflet-overlay-pane canvas').length")
        # Leaflet's own controls are touch-sized too.
        sizes = browser.execute_script(
            "return Array.from(document.querySelectorAll('.leaflet-bar a')).map(a => "
            "[a.getBoundingClientRect().width, a.getBoundingClientRect().height])")
        assert sizes and all(w >= 48 and h >= 48 for w, h in sizes)
        assert kiosk.console_errors(browser) == []
        assert kiosk.off_machine(kiosk.requested_urls(browser)) == []
    finally:
        if browser:
            browser.quit()
        web.stop()


def test_page_shows_a_visit_while_it_lasts(placed_bin, placed_web_bin, places_db, tmp_path, spot):
    """A gpsfake drive that stops at a place for longer than DwellTime= (see test_visits): the page
    says the device is visiting it, and no more once it has left."""
    import shutil
    import nmea
    lat, lon, top = spot
    approach = nmea.WGS84.Direct(lat, lon, 180, 150)
    drive = tmp_path / "stop.nmea"
    nmea.stop_and_go(drive, (approach["lat2"], approach["lon2"]), [("go", 30, 0, 5), ("stop", 350), ("go", 1100, 90, 3)])
    conf = tmp_path / "placed.conf"
    conf.write_text("[Visits]\nDwellTime=10\n")
    shutil.copy(places_db, tmp_path / "places.db")
    port = free_port()
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock",
                    "--selections", tmp_path / "selections.db", "--gpsd", "localhost:%d" % port,
                    "--gpsd-timeout", "5", "--config", conf)
    web = kiosk.PlacedWeb(placed_web_bin, tmp_path / "sock")
    browser = None
    gps = None
    try:
        browser = kiosk.chromium(800, 480, user_data_dir=tmp_path / "chromium")
        browser.get(web.url())
        gps = GpsFake(drive, port)
        line = kiosk.wait_until("the visit on the page", lambda: browser.execute_script(
            "const v = document.getElementById('visit'); return !v.hidden && v.textContent"), timeout=60)
        assert line.startswith("Visiting " + top["name"])
        kiosk.wait_until("the visit's end", lambda: browser.execute_script(
            "return document.getElementById('visit').hidden"), timeout=90)
        assert kiosk.console_errors(browser) == []
    finally:
        if browser:
            browser.quit()
        if gps:
            gps.stop()
        web.stop()
        placed.stop()


MARKUP_NAME = '<img src="/markup-probe" alt="x"><b>Bold</b> & Co'


def opl_escaped(text):
    """An OPL tag value: space, comma, equals, at, percent and anything unprintable as %hex%."""
    return "".join("%%%x%%" % ord(c) if c in " ,=@%" or not c.isprintable() else c for c in text)


def test_a_place_name_with_markup_shows_as_text(placed_bin, placed_web_bin, placectl_bin, start_placed, tmp_path):
    """OpenStreetMap names are anyone's text: one with markup, at the device's position, shows as that
    text in the list and in the map's tooltip (Leaflet sets a string tooltip as HTML), and loads nothing."""
    latitude, longitude, _ = HELSINKI_CENTER.split(",")
    directory = tmp_path / "markup"
    directory.mkdir()
    (directory / "markup.opl").write_text(
        "n1 v1 x%s y%s Tamenity=cafe,name=%s\n" % (longitude, latitude, opl_escaped(MARKUP_NAME)))
    for argv in (["osmium", "cat", directory / "markup.opl", "-o", directory / "markup.osm.pbf", "--overwrite"],
                 [placectl_bin, "import", directory / "markup.osm.pbf", "--db", directory / "places.db"]):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    placed = start_placed(directory=directory)
    web = kiosk.PlacedWeb(placed_web_bin, placed.socket)
    browser = None
    try:
        browser = kiosk.chromium(800, 480, user_data_dir=tmp_path / "chromium")
        kiosk.requested_urls(browser)
        browser.get(web.url())
        kiosk.wait_until("the list", lambda: kiosk.shown_generation(browser) == 1)
        assert [row["name"] for row in browser.execute_script(kiosk.LIST_SCRIPT)] == [MARKUP_NAME]
        browser.execute_script(
            "document.querySelector('.likely-place').dispatchEvent(new MouseEvent('mouseover', {bubbles: true}))")
        tooltip = kiosk.wait_until("the tooltip", lambda: browser.execute_script(
            "const t = document.querySelector('.leaflet-tooltip');"
            "return t && {text: t.textContent, elements: t.querySelectorAll('img, b').length}"))
        assert tooltip == {"text": MARKUP_NAME, "elements": 0}
        assert not [url for url in kiosk.requested_urls(browser) if "markup-probe" in url]
    finally:
        if browser:
            browser.quit()
        web.stop()


def test_the_selected_place_shows_its_details(placed_bin, placed_web_bin, start_placed, tmp_path):
    """Tapping a place selects it, and the card under it shows what placed's Details says: open now or
    closed with the next change, the week's hours a day a row, the phone as a tel: link, the website
    as a link, wheelchair access."""
    scout = start_placed(directory=tmp_path / "scout")
    with open_varlink(scout.socket) as client:
        ranked = client.Rank(60.1699, 24.9384, 50, 20, None, ["*"])["places"]
    rich = [p for p in ranked if p.get("opening_hours") and p.get("open_now") is not None
            and p.get("phone") and p.get("website")]
    assert rich, "central Helsinki has a place with hours, a phone and a website"
    target = rich[0]
    placed = start_placed(directory=tmp_path / "spot",
                          static="%.7f,%.7f,5" % (target["latitude"], target["longitude"]))
    web = kiosk.PlacedWeb(placed_web_bin, placed.socket)
    browser = None
    try:
        browser = kiosk.chromium(800, 480, user_data_dir=tmp_path / "chromium")
        kiosk.requested_urls(browser)
        browser.get(web.url())
        kiosk.wait_until("the list", lambda: kiosk.shown_generation(browser) == 1)
        button = kiosk.wait_until("the place in the list", lambda: browser.execute_script(
            "return document.querySelector('#places .place[data-id=\"' + arguments[0] + '\"]')", target["id"]))
        button.click()
        kiosk.wait_until("the details card", lambda: browser.execute_script(
            "return !document.getElementById('details').hidden"))
        with open_varlink(placed.socket) as client:
            assert client.History(1)["markers"][0]["place"]["id"] == target["id"]
            now = client.Details(target["id"], None, None, None)["place"]
        card = browser.execute_script("""
            const d = document.getElementById('details');
            return {now: document.getElementById('details-now').textContent,
                    open: document.getElementById('details-now').dataset.open,
                    days: Array.from(d.querySelectorAll('#details-week tr')).map(r => r.textContent),
                    tel: Array.from(d.querySelectorAll('a.phone')).map(a => a.getAttribute('href')),
                    web: Array.from(d.querySelectorAll('a.website')).map(a => a.href),
                    wheelchair: (d.querySelector('.wheelchair') || {dataset: {}}).dataset.wheelchair};""")
        assert card["open"] == ("true" if now["open_now"] else "false")
        assert card["now"].startswith("Open now" if now["open_now"] else "Closed")
        assert len(card["days"]) == 7, card["days"]
        today = ", ".join("%s–%s" % (i["start"], i["end"]) + (" ?" if i["state"] == "unknown" else "")
                          for i in now["intervals"]) or "Closed"
        assert card["days"][0].endswith(today), (card["days"][0], now["intervals"])
        assert card["tel"][0] == "tel:" + "".join(c for c in now["phone"][0] if c.isdigit() or c == "+")
        assert card["web"][0].rstrip("/") == (now["website"][0] if "://" in now["website"][0]
                                               else "https://" + now["website"][0]).rstrip("/")
        assert card["wheelchair"] == now.get("wheelchair")
        popup = browser.execute_script("return document.querySelector('.leaflet-popup-content').textContent")
        assert target["name"] in popup and card["now"] in popup, "the marker's popup shows the hours too"
        assert kiosk.console_errors(browser) == []
        assert kiosk.off_machine(kiosk.requested_urls(browser)) == []
        time.sleep(0.3)
        kiosk.keep(_screenshot(browser, tmp_path / "kiosk-details-800x480.png"), "kiosk-details-800x480.png")
    finally:
        if browser:
            browser.quit()
        web.stop()
