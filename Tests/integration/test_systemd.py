"""placed as a systemd service: sd_notify protocol, watchdog, SIGHUP reload, and the shipped units."""
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess


from conftest import ROOT
from harness import PLACES, NotifySocket, Placed, VarlinkSocket


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
    assert re.search(r"1,?644 places", ready["STATUS"]), ready
    statuses = [m["STATUS"] for _, m in notify.messages if "STATUS" in m]
    assert any(re.search(r"Static position ±8 m, 1,?644 places, ranking 1", s) for s in statuses), statuses
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


def test_moves_and_rankings_are_logged_only_at_debug(placed_bin, places_db, tmp_path):
    """A moving vehicle must not fill its journal: at the default level (info) placed logs its start and
    state changes but no move or ranking; LogLevel=debug, applied by SIGHUP, logs each."""
    shutil.copy(places_db, tmp_path / "places.db")
    conf = tmp_path / "placed.conf"
    conf.write_text("[Location]\nDistanceFilter=50\n")
    placed = Placed(placed_bin, "--bus", "none", "--db", tmp_path / "places.db", "--socket", tmp_path / "sock",
                    "--static", "60.1699,24.9384,8", "--config", conf, log_level=None)
    try:
        placed.wait_for(r"started: ")
        with VarlinkSocket(tmp_path / "sock") as client:
            assert client.call(PLACES + ".Status")["generation"] == 1, "ranked, silently"
        assert not [line for line in placed.lines if re.search(r"move \d+ at|ranking \d+:", line)], placed.lines
        conf.write_text("[Location]\nDistanceFilter=50\n[Logging]\nLogLevel=debug\n")
        placed.proc.send_signal(signal.SIGHUP)
        placed.wait_for(r"ranking 2: ")  # the reload ranks again, and now says so
    finally:
        assert placed.stop() == 0


def test_check_config_prints_what_placed_would_run_with(placed_bin, tmp_path):
    conf = tmp_path / "placed.conf"
    conf.write_text("[Location]\nSource=static\nStaticPosition=60.1699,24.9384\n")
    (tmp_path / "placed.conf.d").mkdir()
    (tmp_path / "placed.conf.d" / "10-kiosk.conf").write_text("[Location]\nDistanceFilter=20\n")
    out = subprocess.run([placed_bin, "--config", conf, "--check-config", "--socket", tmp_path / "sock"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for line in ["Source=static", "StaticPosition=60.1699,24.9384,10", "DistanceFilter=20",
                 "Socket=%s" % (tmp_path / "sock"), "Bus=system"]:
        assert line in lines, out.stdout
    assert not (tmp_path / "sock").exists(), "nothing was started"
    # The printout is itself a valid configuration file.
    (tmp_path / "printed.conf").write_text(out.stdout)
    again = subprocess.run([placed_bin, "--config", tmp_path / "printed.conf", "--check-config"],
                           capture_output=True, text=True, timeout=10)
    assert again.returncode == 0 and again.stdout.splitlines()[1:] == lines[1:]

    (tmp_path / "placed.conf.d" / "20-bad.conf").write_text("[Location]\nDistanceFilter=-5\n")
    bad = subprocess.run([placed_bin, "--config", conf, "--check-config"], capture_output=True, text=True,
                         timeout=10)
    assert bad.returncode == 1 and bad.stdout == ""
    assert "20-bad.conf:2: DistanceFilter=-5" in bad.stderr
    version = subprocess.run([placed_bin, "--version"], capture_output=True, text=True, timeout=10)
    assert version.returncode == 0 and re.fullmatch(r"placed \d+\.\d+\.\d+\n", version.stdout)


def test_bad_config_file_names_file_and_line(placed_bin, tmp_path):
    conf = tmp_path / "placed.conf"
    conf.write_text("[Location]\nDistanceFilter=50\nColour=blue\n")
    out = subprocess.run([placed_bin, "--config", conf], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert "%s:3: unknown key 'Colour' in [Location]" % conf in out.stderr


def unit_copy(tmp_path, placed_bin):
    """The shipped unit with ExecStart pointing at the built binary (verify checks it exists), beside
    the socket it requires."""
    unit = (ROOT / "systemd" / "placed.service").read_text()
    unit = unit.replace("ExecStart=/usr/bin/placed", "ExecStart=%s" % placed_bin)
    path = tmp_path / "placed.service"
    path.write_text(unit)
    shutil.copy(ROOT / "systemd" / "placed.socket", tmp_path / "placed.socket")
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
    groups = (root / "etc" / "group").read_text()
    assert re.search(r"^placed:x:\d+:", groups, re.M) and re.search(r"^placed-read:x:\d+:", groups, re.M)
    out = subprocess.run(["systemd-tmpfiles", "--root", str(root), "--create",
                          str(ROOT / "systemd" / "placed.tmpfiles.conf")], capture_output=True, text=True)
    assert (root / "var" / "lib" / "placed").is_dir(), out.stderr


# --- socket activation (placed.socket) ----------------------------------------------------------


def activated(placed_bin, tmp_path, listeners, *args):
    """placed started as systemd starts a socket-activated service: `listeners` (open files or
    sockets) at fds 3, 4, ... and LISTEN_PID/LISTEN_FDS naming them. The caller keeps its copies, as
    systemd does, so connections queue while no placed runs."""
    high = [fcntl.fcntl(f.fileno(), fcntl.F_DUPFD_CLOEXEC, 20) for f in listeners]
    moves = " ".join("%d<&%d %d<&-" % (3 + i, fd, fd) for i, fd in enumerate(high))
    script = 'exec %s; export LISTEN_PID=$$ LISTEN_FDS=%d; exec "$@"' % (moves, len(high))
    try:
        return Placed("bash", "-c", script, "bash", placed_bin, "--bus", "none", "--db", tmp_path / "places.db",
                      "--selections", tmp_path / "selections.db", *args, pass_fds=high)
    finally:
        for fd in high:
            os.close(fd)


def unix_listener(path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    return listener


def test_socket_activation_keeps_clients_waiting_across_a_restart(placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    listener = unix_listener(tmp_path / "passed")
    # A client connects and asks before any placed runs: the call waits in the socket.
    early = VarlinkSocket(tmp_path / "passed")
    placed = activated(placed_bin, tmp_path, [listener], "--static", "60.1699,24.9384,10",
                       "--socket", tmp_path / "configured")
    try:
        assert early.call(PLACES + ".Status")["generation"] == 1
        placed.wait_for(r"varlink: serving on %s, the socket systemd passed" % re.escape(str(tmp_path / "passed")))
        placed.wait_for(r"warning: Socket=%s is not used" % re.escape(str(tmp_path / "configured")))
        assert not (tmp_path / "configured").exists()
    finally:
        assert placed.stop() == 0
    assert (tmp_path / "passed").exists(), "placed must not remove a socket systemd owns"

    # Between two runs the socket still takes connections; the next placed answers them.
    waiting = VarlinkSocket(tmp_path / "passed")
    again = activated(placed_bin, tmp_path, [listener], "--static", "60.1699,24.9384,10")
    try:
        assert waiting.call(PLACES + ".Status")["places"] > 0
    finally:
        assert again.stop() == 0
    listener.close()


def test_socket_activation_refuses_what_it_cannot_serve(placed_bin, places_db, tmp_path):
    shutil.copy(places_db, tmp_path / "places.db")
    with open(tmp_path / "places.db", "rb") as not_a_socket:
        placed = activated(placed_bin, tmp_path, [not_a_socket], "--static", "60.1699,24.9384,10")
        assert placed.proc.wait(timeout=10) == 1
    placed.wait_for(r"cannot serve varlink: socket activation: fd 3 is not a listening Unix stream socket")

    first, second = unix_listener(tmp_path / "a"), unix_listener(tmp_path / "b")
    placed = activated(placed_bin, tmp_path, [first, second], "--static", "60.1699,24.9384,10")
    assert placed.proc.wait(timeout=10) == 1
    placed.wait_for(r"cannot serve varlink: socket activation: 2 sockets passed, placed takes one")


def test_socket_unit_verifies_and_matches_the_service(placed_bin, tmp_path):
    unit_copy(tmp_path, placed_bin)
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "placed.socket")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "placed.s" not in out.stderr, out.stderr
    socket_unit = (ROOT / "systemd" / "placed.socket").read_text()
    config = (ROOT / "etc" / "placed" / "placed.conf").read_text()
    path = re.search(r"^ListenStream=(\S+)$", socket_unit, re.M).group(1)
    assert re.search(r"^#?\s*Socket=%s$" % re.escape(path), config, re.M), "the unit listens where placed would"
    # Anyone may connect; placed answers non-readers PermissionDenied (SO_PEERCRED), so the directory
    # must let everyone reach the socket.
    for line in ["SocketMode=0666", "DirectoryMode=0755", "RemoveOnStop=yes"]:
        assert re.search("^%s$" % re.escape(line), socket_unit, re.M), line
    service = (ROOT / "systemd" / "placed.service").read_text()
    assert re.search(r"^RuntimeDirectoryMode=0755$", service, re.M)
    # Whatever starts placed starts its socket first (systemctl enable --now placed included).
    assert re.search(r"^Requires=placed\.socket$", service, re.M)
    assert re.search(r"^After=.*\bplaced\.socket\b", service, re.M)
    # The service's RuntimeDirectory= is the socket's directory: kept when placed stops, or the
    # socket file would go with it.
    assert re.search(r"^RuntimeDirectoryPreserve=yes$", service, re.M)
    assert re.search(r"^Also=placed\.socket$", service, re.M)
