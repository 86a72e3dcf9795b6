"""Start and stop the real programs the integration tests talk to: gpsd (through gpsfake) and placed."""
import os
import re
import signal
import socket
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GpsFake:
    """gpsd fed by gpsfake replaying an NMEA log once (-1), at 115200 baud, 20 ms per sentence."""

    def __init__(self, log, port, cycle=0.02):
        self.port = port
        self.proc = subprocess.Popen(
            ["gpsfake", "-1", "-q", "-n", "-P", str(port), "-S", "-s", "115200", "-c", str(cycle), str(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # gpsd listens once gpsfake is ready
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("gpsfake exited: " + self.proc.stderr.read().decode())
                time.sleep(0.05)
        raise RuntimeError("gpsd from gpsfake did not listen on port %d" % port)

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


MOVE = re.compile(r"move (\d+) at (-?[\d.]+),(-?[\d.]+)")


class Placed:
    """placed in the foreground; its log lines are collected as they arrive."""

    def __init__(self, binary, *args, env=None):
        self.lines = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [str(binary), *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**os.environ, **(env or {})})
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

    def moves(self):
        with self._cond:
            return [(int(m.group(1)), float(m.group(2)), float(m.group(3)))
                    for m in map(MOVE.search, self.lines) if m]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return self.proc.returncode
