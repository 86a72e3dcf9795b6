"""The package's life in a booted systemd, as a Debian user meets it: apt install leaves both units
active with the D-Bus policy live; an upgrade restarts placed once and keeps the selections; remove
stops both; purge deletes the state and the configuration. A places file an older placed wrote (schema 4)
is refused by name, and the upgrade's postinst rewrites it so placed ranks again. The tests run in order on
one container."""
import json
import pathlib
import subprocess

from container import ROOT

from conftest import EXTRACT, EXTRACT_PLACES, HELSINKI_CENTER, UNITS, install, status_of, write_drop_in


def test_install_leaves_both_units_active_and_placed_on_the_bus(container, deb):
    cursor = container.cursor()
    out, _ = install(container, deb)
    assert "placectl import %s" % EXTRACT in out.stdout, "the postinst says how to import"
    assert container.active(*UNITS) == ["active", "active"]
    service = container.show("placed.service", "NRestarts", "Result", "User")
    assert service["NRestarts"] == "0" and service["Result"] == "success", "started at once, no restart loop"
    # The socket systemd holds is the one placed serves: socket activation is in force.
    container.wait_for(lambda: [e for e in container.journal("_SYSTEMD_UNIT=placed.service", cursor=cursor)
                                if "the socket systemd passed" in e["MESSAGE"]], 5, "placed's socket line")
    # placed owns its name: the policy was loaded before placed started.
    uid = container.run("id", "-u", "placed").stdout.strip()
    owner = container.run("busctl", "--json=short", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                          "org.freedesktop.DBus", "GetConnectionUnixUser", "s", "io.placed.Placed1")
    assert json.loads(owner.stdout)["data"] == [int(uid)]
    # Enabled for the next boot as well, and D-Bus-activatable through the alias.
    for unit in UNITS + ("dbus-io.placed.Placed1.service",):
        assert container.run("systemctl", "is-enabled", unit).stdout.strip() in ("enabled", "alias"), unit


def test_install_made_the_users_and_directories(container):
    assert container.run("getent", "group", "placed-read").returncode == 0
    passwd = container.run("getent", "passwd", "placed").stdout.split(":")
    assert passwd[5] == "/var/lib/placed" and passwd[6].strip() in ("/usr/sbin/nologin", "/sbin/nologin")
    assert container.stat("/var/lib/placed") == ("750", "placed", "placed", "directory")
    # Everyone reaches the socket; placed checks its peers itself.
    assert container.stat("/run/placed") == ("755", "placed", "placed", "directory")
    assert container.stat("/run/placed/io.placed.Places") == ("666", "root", "root", "socket")
    assert container.stat("/etc/placed/placed.conf.d")[3] == "directory"
    conffiles = container.run("dpkg-query", "-W", "-f=${Conffiles}", "placed").stdout
    assert "/etc/placed/placed.conf " in conffiles


def test_import_and_selection_before_the_upgrade(container):
    container.run("placectl", "import", EXTRACT)
    write_drop_in(container, "10-static.conf", "[Location]\nSource=static\nStaticPosition=%s\n" % HELSINKI_CENTER)
    container.run("systemctl", "reload", "placed.service")
    container.wait_for(lambda: status_of(container).get("generation", 0) >= 1, 10, "ranking 1")
    places = json.loads(container.run("placectl", "--json", "places").stdout)["places"]
    marker = json.loads(container.run("placectl", "--json", "select", places[0]["id"]).stdout)["marker"]
    assert marker["selection"] == 1 and marker["place"]["id"] == places[0]["id"]


def test_a_places_file_of_the_schema_before_is_refused_by_name(container):
    # What an older placed left: the imported file rewritten in schema 4 by the older code path.
    bin_dir = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.strip()
    bench = pathlib.Path(bin_dir) / "placed-bench"
    assert bench.exists(), "build placed-bench first: swift build -c release --product placed-bench"
    places = container.root / "var" / "lib" / "placed" / "places.db"
    out = subprocess.run([str(bench), "downgrade-places", str(places), str(places)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    cursor = container.cursor()
    container.run("systemctl", "restart", "placed.service")
    container.wait_for(lambda: [e for e in container.journal("_SYSTEMD_UNIT=placed.service", cursor=cursor)
                                if "(found 4); rankings stay empty until it is upgraded (placectl upgrade"
                                in e["MESSAGE"]], 10, "placed's line naming placectl upgrade")
    assert status_of(container)["places"] == 0


def test_upgrade_restarts_placed_once_and_keeps_the_selections(container, upgrade_deb):
    before = container.show("placed.service", "MainPID", "InvocationID")
    history = json.loads(container.run("placectl", "--json", "history").stdout)["markers"]
    places_file = container.stat("/var/lib/placed/places.db")
    cursor = container.cursor()
    out, _ = container.install(upgrade_deb)
    assert out.returncode == 0, out
    assert "upgraded /var/lib/placed/places.db from schema 4 to 6 (%s places)" % f"{EXTRACT_PLACES:,}" \
        in out.stdout, "the postinst upgrades the places file"
    assert container.stat("/var/lib/placed/places.db") == places_file, "its mode and owner stay"
    assert container.run("dpkg-query", "-W", "-f=${Version}", "placed").stdout.endswith("+1")
    assert container.active(*UNITS) == ["active", "active"]
    after = container.show("placed.service", "MainPID", "InvocationID")
    assert after["MainPID"] != before["MainPID"] and after["InvocationID"] != before["InvocationID"]
    def starts():
        return [e for e in container.journal("_PID=1", "UNIT=placed.service", cursor=cursor)
                if e.get("JOB_TYPE") == "start" and e.get("JOB_RESULT") == "done"]
    container.wait_for(starts, 5, "systemd's record of placed's start")
    assert len(starts()) == 1, "placed restarted %d times" % len(starts())
    assert json.loads(container.run("placectl", "--json", "history").stdout)["markers"] == history
    assert status_of(container)["places"] == EXTRACT_PLACES, "the import survives, upgraded"
    assert not [e for e in container.journal("_SYSTEMD_UNIT=placed.service", cursor=cursor)
                if "cannot load the places" in e["MESSAGE"]]
    assert container.exists("/etc/placed/placed.conf.d/10-static.conf"), "the drop-in survives"


def test_remove_stops_both_and_keeps_the_data(container):
    out = container.run("apt-get", "remove", "-y", "placed", timeout=300)
    assert out.returncode == 0
    assert container.active(*UNITS) == ["inactive", "inactive"]
    assert not container.exists("/run/placed/io.placed.Places")
    assert container.exists("/var/lib/placed/selections.db")
    assert container.exists("/etc/placed/placed.conf"), "a removed package keeps its conffiles"


def test_purge_deletes_state_and_configuration(container):
    # The fleet drop-in as `placectl fleet-dropin --write` leaves it, and an administrator's own.
    container.sh("mkdir -p /etc/systemd/system/placed.service.d && cd /etc/systemd/system/placed.service.d"
                 " && printf '[Service]\\nIPAddressAllow=192.0.2.7\\n' | tee fleet.conf > override.conf")
    out = container.run("apt-get", "purge", "-y", "placed", timeout=300)
    assert out.returncode == 0
    assert not container.exists("/etc/systemd/system/placed.service.d/fleet.conf"), "placed's drop-in goes"
    assert container.exists("/etc/systemd/system/placed.service.d/override.conf"), "the administrator's stays"
    container.run("rm", "-r", "/etc/systemd/system/placed.service.d")
    for path in ("/var/lib/placed", "/etc/placed", "/run/placed", "/etc/systemd/system/dbus-io.placed.Placed1.service",
                 "/etc/systemd/system/multi-user.target.wants/placed.service",
                 "/etc/systemd/system/sockets.target.wants/placed.socket"):
        assert not container.exists(path), path
    assert container.run("dpkg-query", "-W", "placed", check=False).returncode != 0
