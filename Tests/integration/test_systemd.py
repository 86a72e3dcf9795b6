"""placed as a systemd service: sd_notify protocol, watchdog, SIGHUP reload, and the shipped units."""
import re
import shutil
import signal
import socket
import subprocess
import time


from conftest import ROOT
from harness import Placed


class NotifySocket:
    """A NOTIFY_SOCKET like systemd's: a datagram socket collecting what placed sends."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []  # (monotonic time, {key: value})

    def read(self, until, timeout=10):
        """Collect messages until `until(messages)` is true."""
        deadline = time.monotonic() + timeout
        while not until(self.messages):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("notify messages so far: %r" % [m for _, m in self.messages])
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096).decode()
            except socket.timeout:
                continue
            fields = dict(line.split("=", 1) for line in data.split("\n") if "=" in line)
            self.messages.append((time.monotonic(), fields))
        return self.messages

    def keys(self):
        return [k for _, m in self.messages for k in m if k != "STATUS"]


def start(placed_bin, tmp_path, *args, env=None):
    return Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock",
                  *args, env=env)


def has(key):
    return lambda messages: any(key in m for _, m in messages)


def test_ready_status_watchdog_stopping_in_order(placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    notify = NotifySocket(tmp_path / "notify")
    placed = start(placed_bin, tmp_path, "--static", "60.1699,24.9384,8",
                   env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"})
    try:
        notify.read(lambda ms: sum("WATCHDOG" in m for _, m in ms) >= 6)
        placed.proc.send_signal(signal.SIGTERM)
        notify.read(has("STOPPING"))
        assert placed.proc.wait(10) == 0
    finally:
        placed.stop()
    keys = notify.keys()
    assert keys.index("READY") < keys.index("WATCHDOG") < keys.index("STOPPING")
    ready = next(m for _, m in notify.messages if "READY" in m)
    # READY only once places are loaded and the socket listens: the status says so.
    assert re.search(r"1,?636 places", ready["STATUS"]), ready
    statuses = [m["STATUS"] for _, m in notify.messages if "STATUS" in m]
    assert any(re.search(r"Static position ±8 m, 1,?636 places, ranking 1", s) for s in statuses), statuses
    # sd-event pings from half of WATCHDOG_USEC, within a window up to three quarters (it coalesces
    # wake-ups): every 0.2-0.3 s for 0.4 s, and never as late as the deadline itself.
    pings = [t for t, m in notify.messages if "WATCHDOG" in m]
    gaps = sorted(b - a for a, b in zip(pings, pings[1:]))
    median = gaps[len(gaps) // 2]
    assert 0.18 <= median <= 0.33 and gaps[-1] < 0.4, gaps


def test_without_notify_socket_runs_the_same(placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    placed = start(placed_bin, tmp_path, "--static", "60.1699,24.9384,8")
    try:
        placed.wait_for(r"ranking 1:")
    finally:
        assert placed.stop() == 0


def test_sighup_applies_a_changed_config(placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    conf = tmp_path / "placed.conf"
    conf.write_text("[Location]\nDistanceFilter=50\n")
    notify = NotifySocket(tmp_path / "notify")
    placed = start(placed_bin, tmp_path, "--static", "60.1699,24.9384,8", "--config", conf,
                   env={"NOTIFY_SOCKET": notify.path})
    try:
        notify.read(has("READY"))
        (tmp_path / "placed.conf.d").mkdir()
        (tmp_path / "placed.conf.d" / "10-filter.conf").write_text("[Location]\nDistanceFilter=20\n")
        placed.proc.send_signal(signal.SIGHUP)
        placed.wait_for(r"distance filter now 20.0 m")
        notify.read(lambda ms: [k for _, m in ms for k in m if k in ("READY", "RELOADING")]
                    == ["READY", "RELOADING", "READY"])
        # A bad config on reload is reported and the running one kept.
        conf.write_text("[Location]\nDistanceFilter=-1\n")
        placed.proc.send_signal(signal.SIGHUP)
        placed.wait_for(r"keeping the running configuration: .*placed.conf:2: DistanceFilter=-1")
        assert placed.proc.poll() is None
    finally:
        assert placed.stop() == 0


def test_bad_config_file_names_file_and_line(placed_bin, tmp_path):
    conf = tmp_path / "placed.conf"
    conf.write_text("[Location]\nDistanceFilter=50\nColour=blue\n")
    out = subprocess.run([placed_bin, "--config", conf], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert "%s:3: unknown key 'Colour' in [Location]" % conf in out.stderr


def unit_copy(tmp_path, placed_bin):
    """The shipped unit with ExecStart pointing at the built binary (verify checks it exists)."""
    unit = (ROOT / "systemd" / "placed.service").read_text()
    unit = unit.replace("ExecStart=/usr/bin/placed", "ExecStart=%s" % placed_bin)
    path = tmp_path / "placed.service"
    path.write_text(unit)
    return path


def test_systemd_analyze_verify_passes(placed_bin, tmp_path):
    path = unit_copy(tmp_path, placed_bin)
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "placed.service" not in out.stderr, out.stderr


def test_unit_hardening_scores_at_most_2(placed_bin, tmp_path):
    path = unit_copy(tmp_path, placed_bin)
    out = subprocess.run(["systemd-analyze", "security", "--offline=true", str(path)],
                         capture_output=True, text=True)
    score = float(re.search(r"Overall exposure level for placed.service: ([\d.]+)", out.stdout).group(1))
    assert score <= 2.0, out.stdout


def test_unit_declares_what_the_issue_asks():
    unit = (ROOT / "systemd" / "placed.service").read_text()
    for line in ["Type=notify", "BusName=io.placed.Placed1", "Restart=on-failure", "User=placed",
                 "RuntimeDirectory=placed", "StateDirectory=placed", "ConfigurationDirectory=placed",
                 "ProtectSystem=strict", "PrivateTmp=yes", "NoNewPrivileges=yes", "SystemCallFilter=@system-service"]:
        assert re.search("^%s$" % re.escape(line), unit, re.M), line
    assert re.search(r"^WatchdogSec=\d+", unit, re.M)
    assert re.search(r"^RestrictAddressFamilies=", unit, re.M)


def test_sysusers_and_tmpfiles_parse(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    out = subprocess.run(["systemd-sysusers", "--root", str(root), str(ROOT / "systemd" / "placed.sysusers.conf")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^placed:x:\d+:\d+:", (root / "etc" / "passwd").read_text(), re.M)
    assert re.search(r"^placed:x:\d+:", (root / "etc" / "group").read_text(), re.M)
    out = subprocess.run(["systemd-tmpfiles", "--root", str(root), "--create",
                          str(ROOT / "systemd" / "placed.tmpfiles.conf")], capture_output=True, text=True)
    assert (root / "var" / "lib" / "placed").is_dir(), out.stderr
