"""The README's steps without the package, in a booted systemd: `make install`, then its commands as
written, end with both units active, the bus name owned and socket activation in force."""
import json
import re
import subprocess

import pytest

from conftest import EXTRACT, EXTRACT_PLACES, UNITS
from container import ROOT


def readme_steps():
    """The commands of the README's block after `make install`, with the bundled extract to import."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"Without the package, `make install`.*?```sh\n(.*?)```", readme, re.S)
    assert block, "the README has no make install steps"
    lines = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    return [re.sub(r"\S+\.osm\.pbf", EXTRACT, line) for line in lines if line]


@pytest.fixture(scope="module")
def installed(container):
    for path in ("usr/bin/placed", "usr/lib/systemd/system/placed.service", "etc/placed"):
        assert not (container.root / path).exists(), "the host already has %s (a make install?)" % path
    # Installed from the host into the container's root, as `make install DESTDIR=` would into an image.
    out = subprocess.run(["make", "-C", str(ROOT), "install", "DESTDIR=%s" % container.root], capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    cursor = container.cursor()
    for step in readme_steps():
        container.sh(step, timeout=120)
    return container, cursor


def test_the_readme_steps_end_with_both_units_active(installed):
    container, cursor = installed
    assert container.active(*UNITS) == ["active", "active"]
    assert container.show("placed.service", "NRestarts")["NRestarts"] == "0", "no restart loop"
    assert container.run("systemctl", "is-enabled", "placed.socket").stdout.strip() == "enabled"
    lines = container.wait_for(lambda: [e["MESSAGE"] for e in container.journal(cursor=cursor)
                                        if e.get("_SYSTEMD_UNIT") == "placed.service"
                                        and "the socket systemd passed" in e["MESSAGE"]], 5, "placed's socket line")
    assert lines


def test_the_policy_is_live_placed_owns_its_name(installed):
    container, _ = installed
    out = container.run("busctl", "--json=short", "call", "io.placed.Placed1", "/io/placed/Placed1",
                        "io.placed.Placed1", "GetPlaces", "u", "1")
    assert json.loads(out.stdout)["type"] == "taa{sv}"


def test_socket_activation_is_in_force_without_a_reboot(installed):
    container, _ = installed
    container.run("systemctl", "stop", "placed.service")
    assert container.active(*UNITS) == ["active", "inactive"]
    assert json.loads(container.run("placectl", "--json", "status").stdout)["places"] == EXTRACT_PLACES
    assert container.active("placed.service") == ["active"]
