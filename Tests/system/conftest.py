"""Fixtures for the system tests: the Debian package (built once per session, or $PLACED_DEB), the same
package with a higher version for the upgrade, and one booted container per test module."""
import json
import os
import pathlib
import re
import subprocess

import pytest

from container import ROOT, Container

EXTRACT = "/usr/share/placed/helsinki-center.osm.pbf"
# Places the bundled extract imports as (multipolygons included).
EXTRACT_PLACES = 1644
HELSINKI_CENTER = "60.1699,24.9384,10"  # beside Forum and Sokos, Mannerheimintie
UNITS = ("placed.socket", "placed.service")
# Test users: one in group placed (may select), one in group placed-read (may only read).
WRITER, READER = "writer", "reader"


@pytest.fixture(scope="session")
def deb():
    """The package under test: $PLACED_DEB (scripts/test builds it first), else built now."""
    given = os.environ.get("PLACED_DEB")
    if given:
        path = pathlib.Path(given)
    else:
        out = subprocess.run([str(ROOT / "scripts" / "build-deb")], capture_output=True, text=True, timeout=1800)
        assert out.returncode == 0, "scripts/build-deb failed:\n" + out.stdout[-3000:] + out.stderr[-3000:]
        path = pathlib.Path(out.stdout.strip().splitlines()[-1])
    assert path.is_file(), "no package at %s" % path
    return path


def deb_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="session")
def upgrade_deb(deb, tmp_path_factory):
    """The same package at a higher version (VERSION+1), repacked with dpkg-deb: what dpkg does on an
    upgrade (old version's prerm, new postinst with the old version) does not depend on the binaries."""
    work = tmp_path_factory.mktemp("upgrade")
    tree = work / "tree"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True)
    control = tree / "DEBIAN" / "control"
    version = deb_field(deb, "Version")
    newer = version + "+1"
    control.write_text(re.sub(r"^Version: .*$", "Version: " + newer, control.read_text(), flags=re.M))
    path = work / ("placed_%s_%s.deb" % (newer, deb_field(deb, "Architecture")))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(tree), str(path)], check=True,
                   capture_output=True)
    assert subprocess.run(["dpkg", "--compare-versions", newer, "gt", version]).returncode == 0
    return path


@pytest.fixture(scope="module")
def container(request):
    """A booted container for this module alone; its tests run in order and share its state."""
    booted = Container(request.module.__name__.removeprefix("test_"))
    try:
        booted.boot()
        yield booted
    finally:
        booted.shutdown()


def assert_fresh(container, deb):
    """Nothing of placed is in the container before the install: the host's root is its lower layer, so
    a host with placed installed (make install, dpkg) would hide what the package does."""
    files = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    paths = [line.split()[-1].lstrip(".") for line in files.splitlines() if not line.startswith("d")]
    present = [p for p in paths if os.path.lexists(container.root / p.lstrip("/"))]
    assert present == [], "the host already has placed's files (a make install or dpkg -i?): %s" % present
    assert container.run("dpkg-query", "-W", "placed", check=False).returncode != 0, "the host has placed installed"


def install(container, deb):
    assert_fresh(container, deb)
    out, seconds = container.install(deb)
    assert out.returncode == 0, out
    return out, seconds


def set_up_service(container, deb, static=True):
    """Installed, the bundled extract imported and loaded, the test users made; with `static`, placed
    at a static position in central Helsinki (ranking 1 out)."""
    install(container, deb)
    container.run("placectl", "import", EXTRACT)
    container.run("useradd", "--create-home", "--groups", "placed", WRITER)
    container.run("useradd", "--create-home", "--groups", "placed-read", READER)
    if static:
        write_drop_in(container, "10-static.conf", "[Location]\nSource=static\nStaticPosition=%s\n" % HELSINKI_CENTER)
    container.run("systemctl", "reload", "placed.service")
    status = container.wait_for(lambda: ranked(container), 10, "placed to rank at the static position") \
        if static else status_of(container)
    assert status["places"] == EXTRACT_PLACES, status
    return status


def write_drop_in(container, name, text):
    path = container.root / "etc" / "placed" / "placed.conf.d" / name
    path.write_text(text)


def status_of(container, user=None):
    out = container.run("placectl", "--json", "status", user=user)
    return json.loads(out.stdout)


def ranked(container):
    status = status_of(container)
    return status if status.get("generation", 0) >= 1 else None
