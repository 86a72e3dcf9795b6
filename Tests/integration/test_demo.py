"""The quick-start demo, run headless: it must show moves with ranked places, a selection and the
marker event, draw the map of the last ranking and the marker, end by itself with status 0, and
leave nothing running."""
import os
import re
import subprocess
import xml.etree.ElementTree

from conftest import ROOT


def test_demo_shows_moves_places_and_marker(tmp_path):
    maps = tmp_path / "maps"
    # A locale without a language: the map names places as placectl select does (the name tags).
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES")}
    env.update(LANG="C.UTF-8", PLACED_DEMO_MAP_DIR=str(maps))
    out = subprocess.run([str(ROOT / "scripts" / "demo")], capture_output=True, text=True, timeout=600,
                         stdin=subprocess.DEVNULL, env=env)
    text = out.stdout
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rankings = re.findall(r"^\d\d:\d\d:\d\d  ranking (\d+) at (-?[\d.]+),(-?[\d.]+) ±[\d,]+ m", text, re.M)
    assert len(rankings) > 50, text[-2000:]
    assert [int(g) for g, _, _ in rankings] == list(range(1, len(rankings) + 1))
    # Each ranking is followed by its table of (up to) five places with likelihoods.
    rows = re.findall(r"^([1-5])\s+(\d+\.\d)%\s+\d+ m\s+\S", text, re.M)
    assert len(rows) >= 4 * len(rankings)
    assert all(0 <= float(p) <= 100 for _, p in rows)
    selected = re.search(r"^selected (.+) \((osm:\w+/\d+)\), selection 1 at \S+ in ranking (\d+)$", text, re.M)
    assert selected, text[-2000:]
    marker = re.search(r"^\d\d:\d\d:\d\d  marker (.+) \((osm:\w+/\d+)\), selection 1", text, re.M)
    assert marker and marker.group(2) == selected.group(2), "the watcher saw the marker event"
    assert "done: %d moves ranked, 1 place selected" % len(rankings) in text
    # The map of the last ranking and the marker, where the demo says it is.
    for name in ("map.svg", "map.png"):
        assert re.search(r"^map written to %s: 800×480, [\d,]+ features, 5 places, the marker$"
                         % re.escape(str(maps / name)), text, re.M), text[-2000:]
    texts = ["".join(t.itertext()) for t in xml.etree.ElementTree.parse(maps / "map.svg").getroot().iter(
        "{http://www.w3.org/2000/svg}text")]
    assert selected.group(1) in texts and "© OpenStreetMap contributors" in texts
    png = (maps / "map.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[16:24] == (800).to_bytes(4, "big") + (480).to_bytes(4, "big")
    assert "placectl:" not in out.stderr
    # Nothing left running: no placed, gpsd or dbus-daemon started from a demo directory.
    left = subprocess.run(["pgrep", "-af", "placed-demo|gpsfake .* data/helsinki-drive.nmea"], capture_output=True,
                          text=True).stdout
    assert left.strip() == "", left
