"""Start and stop the real programs the integration tests talk to: gpsd (through gpsfake) and placed."""
import functools
import glob
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import threading
import time


ROOT = pathlib.Path(__file__).resolve().parents[2]


@functools.cache  # each `swift build` call also leaves a TemporaryDirectory.* in /tmp
def bin_path(config: str, name: str) -> pathlib.Path:
    """A binary of the Swift build (`config`: debug or release), as SwiftPM places it."""
    out = subprocess.run(
        ["swift", "build", "-c", config, "--show-bin-path"], cwd=ROOT, check=True,
        capture_output=True, text=True).stdout.strip()
    return pathlib.Path(out) / name


def percentile(values, p):
    """The value at percentile `p` (0-100) of `values`, nearest rank."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def rss_mb(pid):
    """A process's resident set (VmRSS) in MB."""
    with open("/proc/%d/status" % pid) as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GpsFake:
    """gpsd fed by gpsfake replaying an NMEA log once (-1), at 115200 baud, 20 ms per sentence.

    The replay begins when a client sends gpsd a WATCH, not when gpsd is ready: on a loaded machine
    placed once connected after a whole short log had gone by, and saw none of it. gpsfake holds each
    sentence until it reads a line (-l -i); gpsd's client log (-D 4) tells when a watch came."""

    WATCH = re.compile(r'<= client\(\d+\): \?WATCH=\{"enable":true')

    def __init__(self, log, port, cycle=0.02):
        self.port = port
        with open(log, "rb") as f:
            self.sentences = sum(1 for _ in f)
        self.proc = subprocess.Popen(
            ["gpsfake", "-1", "-q", "-n", "-l", "-i", "-D", "4", "-P", str(port), "-S", "-s", "115200",
             "-c", str(cycle), str(log)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self.log = []  # gpsd's and gpsfake's stderr, drained as it comes: a full pipe would stall gpsd
        self.watched = threading.Event()
        threading.Thread(target=self._follow, daemon=True).start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # gpsd listens once gpsfake is ready
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    time.sleep(0.2)  # the rest of its last words
                    raise RuntimeError("gpsfake exited: " + "".join(self.log[-20:]))
                time.sleep(0.05)
        raise RuntimeError("gpsd from gpsfake did not listen on port %d" % port)

    def _follow(self):
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.log.append(line)
            if not self.watched.is_set() and self.WATCH.search(line):
                self.watched.set()
                try:  # one line per sentence, and one spare: gpsfake reads them as it goes
                    self.proc.stdin.write(b"\n" * (self.sentences + 1))
                    self.proc.stdin.flush()
                except (OSError, ValueError):  # gpsfake already ended, or stop() closed the pipe
                    pass

    def wait(self, timeout):
        """Wait for the replay to end; after -1 gpsfake may linger, so end it by its PID."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc.stdin.close()


MOVE = re.compile(r"move (\d+) at (-?[\d.]+),(-?[\d.]+)")


def end(proc, sig=signal.SIGTERM, timeout=10):
    """Ends one process we started, by its PID: `sig`, then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def private_bus(directory):
    """A private session-type dbus-daemon anyone may use, its socket in `directory`: (process, address)."""
    conf = directory / "bus.conf"
    conf.write_text("""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=%s/bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>
<allow receive_sender="*"/></policy></busconfig>""" % directory)
    proc = subprocess.Popen(["dbus-daemon", "--nofork", "--print-address", "--config-file", str(conf)],
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


class Placed:
    """placed in the foreground; its log lines are collected as they arrive. The tests read each move
    and ranking from the log, so placed logs at debug unless `log_level` says otherwise."""

    def __init__(self, binary, *args, env=None, pass_fds=(), log_level="debug"):
        self.lines = []
        self._cond = threading.Condition()
        level = ["--log-level", log_level] if log_level else []
        self.proc = subprocess.Popen(
            [str(binary), *map(str, args), *level], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**os.environ, **(env or {})}, pass_fds=pass_fds)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for(self, pattern, timeout=10, count=1):
        """Wait until `count` log lines match `pattern`; returns the matches."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [m for m in map(regex.search, self.lines) if m]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                exited = self.proc.poll() is not None and not self._reader.is_alive()
                if left <= 0 or exited:
                    raise AssertionError("timed out waiting for %r; log:\n%s" % (pattern, "\n".join(self.lines)))
                self._cond.wait(min(left, 0.1))

    def wait_for_end_of_replay(self, timeout=180):
        """Waits for gpsd's silence after the replay's first move. A loaded machine may start gpsfake's
        stream only after placed has already reported a first silence (--gpsd-timeout), so the silence
        that ends a replay is the first one after a move."""
        self.wait_for(r"move 1 at", timeout=timeout)
        with self._cond:
            first = next(i for i, line in enumerate(self.lines) if "move 1 at" in line)
            before = sum("no data from gpsd" in line for line in self.lines[:first])
        self.wait_for(r"no data from gpsd", timeout=timeout, count=before + 1)

    def moves(self):
        with self._cond:
            return [(int(m.group(1)), float(m.group(2)), float(m.group(3)))
                    for m in map(MOVE.search, self.lines) if m]

    def stop(self):
        end(self.proc)
        self._reader.join(5)
        return self.proc.returncode


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


class VarlinkReplyError(Exception):
    """A varlink error reply: `name` (e.g. io.placed.Places.UnknownPlace) and its parameters."""

    def __init__(self, name, parameters):
        super().__init__("%s %s" % (name, parameters))
        self.name = name
        self.parameters = parameters


class VarlinkSocket:
    """A raw varlink connection: NUL-framed JSON on the Unix socket with no client library in
    between, for what a library would refuse to send (bad framing, wrong types) and for many peers."""

    def __init__(self, path, timeout=10.0, connect=True):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.buffer = b""
        if connect:
            self.sock.connect(str(path))

    def fileno(self):
        return self.sock.fileno()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, method, parameters=None, more=False, oneway=False):
        message = {"method": method}
        if parameters is not None:
            message["parameters"] = parameters
        if more:
            message["more"] = True
        if oneway:
            message["oneway"] = True
        self.send_raw(json.dumps(message).encode() + b"\0")

    def take(self):
        """The next complete message already buffered, or None."""
        end = self.buffer.find(b"\0")
        if end < 0:
            return None
        message, self.buffer = self.buffer[:end], self.buffer[end + 1:]
        return json.loads(message)

    def feed(self):
        """Reads what the socket has (blocking up to the timeout); EOFError when the server closed."""
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("server closed the connection")
        self.buffer += data

    def receive(self):
        """The next whole message (a dict with parameters, error, continues)."""
        while (message := self.take()) is None:
            self.feed()
        return message

    def call(self, method, more=False, **parameters):
        """Sends a call and returns the reply's parameters; an error reply raises VarlinkReplyError."""
        self.send(method, parameters, more=more)
        return self.reply()

    def reply(self):
        message = self.receive()
        if message.get("error"):
            raise VarlinkReplyError(message["error"], message.get("parameters", {}))
        return message.get("parameters", {})

    def is_closed_by_server(self, timeout=5.0):
        """Reads and discards until the server closes the connection (True) or `timeout` passes."""
        self.sock.settimeout(timeout)
        try:
            while True:
                self.feed()
        except EOFError:
            return True
        except (socket.timeout, BlockingIOError):
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def conforms(interface, varlink_type, value, where="reply"):
    """Problems (a list of strings, empty when none) with `value` as `varlink_type` of `interface`
    (a varlink.Interface): missing or unknown fields, wrong JSON types. Stricter than the PyPI client,
    which fills in or drops what does not fit."""
    from varlink import scanner
    problems = []
    if isinstance(varlink_type, scanner._CustomType):
        return conforms(interface, interface.members[varlink_type.name].type, value, where)
    if isinstance(varlink_type, scanner._Maybe):
        return [] if value is None else conforms(interface, varlink_type.element_type, value, where)
    if value is None:
        return ["%s: null where %s is required" % (where, type(varlink_type).__name__)]
    if isinstance(varlink_type, scanner._Struct):
        if not isinstance(value, dict):
            return ["%s: %r is not an object" % (where, value)]
        for name, field_type in varlink_type.fields.items():
            problems += conforms(interface, field_type, value.get(name), "%s.%s" % (where, name))
        problems += ["%s.%s: not in the interface" % (where, name) for name in value
                     if name not in varlink_type.fields]
    elif isinstance(varlink_type, scanner._Array):
        if not isinstance(value, list):
            return ["%s: %r is not an array" % (where, value)]
        for i, element in enumerate(value):
            problems += conforms(interface, varlink_type.element_type, element, "%s[%d]" % (where, i))
    elif isinstance(varlink_type, bool):
        if not isinstance(value, bool):
            problems.append("%s: %r is not a bool" % (where, value))
    elif isinstance(varlink_type, int):
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append("%s: %r is not an int" % (where, value))
    elif isinstance(varlink_type, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append("%s: %r is not a float" % (where, value))
    elif isinstance(varlink_type, str):
        if not isinstance(value, str):
            problems.append("%s: %r is not a string" % (where, value))
    return problems


HELSINKI_CENTER = "60.1699,24.9384,10"  # beside Forum and Sokos, Mannerheimintie
PLACES = "io.placed.Places"


class PlacedService(Placed):
    """placed serving varlink on DIRECTORY/sock from DIRECTORY/places.db, without D-Bus; at a static
    position unless `static=None` (then pass --gpsd). The selection log is DIRECTORY/selections.db
    unless `selections` names another file."""

    def __init__(self, binary, directory, *arguments, static=HELSINKI_CENTER, selections=None):
        self.directory = directory
        self.socket = directory / "sock"
        self.static = static
        options = ["--bus", "none", "--db", directory / "places.db", "--socket", self.socket]
        if static:
            options += ["--static", static]
        if selections:
            options += ["--selections", selections]
        super().__init__(binary, *options, *arguments)

    def wait_ready(self, timeout=10):
        """Waits until the socket serves: with a static position, until ranking 1 is out."""
        self.wait_for(r"ranking 1:" if self.static else r"started:", timeout=timeout)
        assert self.socket.exists()

    def raw(self, timeout=10.0):
        return VarlinkSocket(self.socket, timeout)

    def open(self, interface=PLACES, timeout=10.0):
        """A PyPI varlink client for `interface` on its own connection; calls time out after `timeout`."""
        return open_varlink(self.socket, interface, timeout)

    def kill(self):
        """SIGKILL: no chance to flush or clean up."""
        self.proc.kill()
        self.proc.wait()
        self._reader.join(5)


def open_varlink(path, interface=PLACES, timeout=10.0):
    import varlink
    client = varlink.Client(address="unix:%s" % path)
    handler = client.open(interface)
    handler._connection.settimeout(timeout)
    return handler


# placed under a systemd-journald of its own, in a private mount namespace.
NAMESPACE = r"""
set -e
journal_dir=$1; pid_file=$2; shift 2
mount -t tmpfs tmpfs /run
mkdir -p /run/log/journal
mount --bind "$journal_dir" /run/log/journal
/lib/systemd/systemd-journald &
echo $! > "$pid_file"
for _ in $(seq 100); do [ -S /run/systemd/journal/stdout ] && break; sleep 0.05; done
exec python3 -c "$STREAM" "$@"
"""

# Connects stdout and stderr to journald's stream socket, names it in $JOURNAL_STREAM, and execs.
STREAM = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("/run/systemd/journal/stdout")
s.sendall(b"placed\n\n6\n0\n0\n0\n0\n")  # identifier, unit, priority, level prefix, syslog, kmsg, console
s.shutdown(socket.SHUT_RD)
st = os.fstat(s.fileno())
os.environ["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
os.dup2(s.fileno(), 1)
os.dup2(s.fileno(), 2)
os.execv(sys.argv[1], sys.argv[1:])
"""


class JournaledPlaced:
    """placed with its stderr a journal stream of a systemd-journald of its own (see test_journal.py);
    `arguments` replace the default static position without D-Bus."""

    def __init__(self, placed_bin, places_db, tmp_path, *arguments, env=None):
        self.journal_dir = tmp_path / "journal"
        self.journal_dir.mkdir()
        self.journald_pid_file = tmp_path / "journald.pid"
        self.socket = tmp_path / "sock"
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", NAMESPACE, "bash",
             str(self.journal_dir), str(self.journald_pid_file), str(placed_bin),
             *(map(str, arguments) if arguments else ["--bus", "none", "--static", HELSINKI_CENTER]),
             "--db", str(places_db), "--selections", str(tmp_path / "selections.db"), "--socket", str(self.socket)],
            env={**os.environ, "STREAM": STREAM, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        deadline = time.monotonic() + 15
        try:
            while not self.socket.exists():
                assert self.proc.poll() is None, "placed or journald did not start: %s" % self.proc.stderr.read()
                assert time.monotonic() < deadline, "placed's socket did not appear"
                time.sleep(0.05)
        except AssertionError:
            self.proc.kill()
            self.stop()
            raise

    def entries(self, *matches, count=1, timeout=5):
        """Journal entries matching `matches` (FIELD=value), once at least `count` are there."""
        deadline = time.monotonic() + timeout
        while True:
            directories = glob.glob(str(self.journal_dir / "*"))
            found = []
            if directories:
                out = subprocess.run(["journalctl", "--directory", directories[0], "--no-pager", "-o", "json",
                                      *matches], capture_output=True, text=True, timeout=10)
                found = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # placed: the wrapper exec'd into it
        status = self.proc.wait(timeout=10)
        if self.journald_pid_file.exists():
            try:
                os.kill(int(self.journald_pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
        return status
