"""make install puts every file where a Debian system expects it, under DESTDIR, without root paths."""
import os
import re
import subprocess

from conftest import ROOT

EXPECTED = [
    "usr/bin/placed", "usr/bin/placectl",
    "usr/lib/systemd/system/placed.service", "usr/lib/systemd/system/placed.socket",
    "usr/lib/sysusers.d/placed.conf", "usr/lib/tmpfiles.d/placed.conf",
    "etc/placed/placed.conf",
    "usr/share/dbus-1/system.d/io.placed.Placed1.conf",
    "usr/share/dbus-1/system-services/io.placed.Placed1.service",
    "usr/share/dbus-1/interfaces/io.placed.Placed1.xml",
    "usr/share/varlink/io.placed.Places.varlink",
    "usr/share/bash-completion/completions/placectl",
    "usr/share/man/man8/placed.8", "usr/share/man/man1/placectl.1", "usr/share/man/man5/placed.conf.5",
    "usr/share/placed/helsinki-center.osm.pbf",
    "usr/bin/placed-web", "usr/lib/systemd/system/placed-web.service", "usr/lib/systemd/system/placed-web.socket",
    "usr/lib/sysusers.d/placed-web.conf", "usr/share/man/man8/placed-web.8",
    "usr/share/placed/web/index.html", "usr/share/placed/web/app.js", "usr/share/placed/web/app.css",
    "usr/share/placed/web/favicon.svg",
]


def test_make_install_into_destdir(tmp_path, placed_bin, placectl_bin):
    out = subprocess.run(["make", "-C", str(ROOT), "install", "DESTDIR=%s" % tmp_path], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    for path in EXPECTED:
        assert (tmp_path / path).is_file(), path
    assert all(os.access(tmp_path / "usr/bin" / name, os.X_OK) for name in ("placed", "placectl", "placed-web"))
    assert (tmp_path / "etc/placed/placed.conf.d").is_dir()
    installed = subprocess.run([tmp_path / "usr/bin/placed", "--help"], capture_output=True, text=True)
    assert installed.returncode == 0 and "usage: placed" in installed.stdout
    # The man pages render without warnings.
    for page in ("usr/share/man/man8/placed.8", "usr/share/man/man1/placectl.1", "usr/share/man/man5/placed.conf.5",
                 "usr/share/man/man8/placed-web.8"):
        man = subprocess.run(["man", "--warnings", "-l", str(tmp_path / page)], capture_output=True, text=True,
                             env={**os.environ, "MANWIDTH": "80"})
        assert man.returncode == 0 and "NAME" in man.stdout and man.stderr == "", man.stderr


def test_make_uninstall_removes_what_install_put(tmp_path, placed_bin, placectl_bin):
    subprocess.run(["make", "-C", str(ROOT), "install", "DESTDIR=%s" % tmp_path], check=True, capture_output=True,
                   timeout=600)
    subprocess.run(["make", "-C", str(ROOT), "uninstall", "DESTDIR=%s" % tmp_path], check=True, capture_output=True)
    left = [p for p in EXPECTED if (tmp_path / p).exists() and not p.startswith("etc/")]
    assert left == []


def test_the_package_version_is_placed_s_version():
    changelog = subprocess.run(["dpkg-parsechangelog", "-l", str(ROOT / "debian" / "changelog"), "-S", "Version"],
                               capture_output=True, text=True, check=True).stdout.strip()
    versions = {m.group(1) for path in (ROOT / "Sources").rglob("*.swift")
                for m in re.finditer(r'placed(?:Web)?Version = "([^"]+)"', path.read_text())}
    assert versions == {changelog.split("-")[0].split("+")[0]}, "debian/changelog says %s, the code %s" % (
        changelog, versions)
