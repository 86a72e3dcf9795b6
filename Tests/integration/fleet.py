"""Brokers, subscribers and networks for the fleet export tests: mosquitto (plain, TLS with a test CA and
client certificates, an ACL, passwords) and a three-node NATS cluster (JetStream with its MQTT listener)
from Debian, a persistent QoS 1 subscriber (paho-mqtt), network namespaces joined by a veth pair, and
the publisher: placed itself with a [Fleet] section (`FleetPlaced`). Every process runs in a directory of
its own and is ended by its PID.

Run as a script, `python fleet.py subscribe HOST PORT CLIENT_ID TOPIC [KEY=VALUE ...]` is the subscriber
itself, so that it can run inside a network namespace (`ip netns exec`)."""
import ctypes
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from harness import HELSINKI_CENTER, Placed, VarlinkSocket, end

HERE = pathlib.Path(__file__).resolve().parent


def wait_until(condition, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def listening(host, port, timeout=0.2):
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Netns:
    """Two network namespaces joined by a veth pair, with addresses that exist only inside them:
    `left` (the device) and `right` (the broker). `prefix(side)` runs a command inside one."""

    count = 0

    def __init__(self):
        Netns.count += 1
        tag = "%d%d" % (os.getpid() % 10000, Netns.count)
        self.left, self.right = "pfa%s" % tag, "pfb%s" % tag
        self.left_if, self.right_if = "pva%s" % tag, "pvb%s" % tag
        subnet = (os.getpid() + Netns.count) % 250 + 1
        self.left_ip, self.right_ip = "10.231.%d.1" % subnet, "10.231.%d.2" % subnet
        run = lambda *argv: subprocess.run(argv, check=True, capture_output=True, text=True)
        run("ip", "netns", "add", self.left)
        run("ip", "netns", "add", self.right)
        run("ip", "link", "add", self.left_if, "type", "veth", "peer", "name", self.right_if)
        for ns, interface, ip in ((self.left, self.left_if, self.left_ip), (self.right, self.right_if, self.right_ip)):
            run("ip", "link", "set", interface, "netns", ns)
            run("ip", "-n", ns, "addr", "add", ip + "/30", "dev", interface)
            run("ip", "-n", ns, "link", "set", interface, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def prefix(self, side):
        return ["ip", "netns", "exec", self.left if side == "left" else self.right]

    def cut(self):
        """The broker's end goes down: the device's packets vanish, nothing tells it (no RST, no ICMP)."""
        subprocess.run(["ip", "-n", self.right, "link", "set", self.right_if, "down"], check=True)

    def mend(self):
        subprocess.run(["ip", "-n", self.right, "link", "set", self.right_if, "up"], check=True)

    def throttle(self, rate):
        """What the device sends is held to `rate` (tc's token bucket, e.g. "4mbit") on its end of the link."""
        subprocess.run(["ip", "netns", "exec", self.left, "tc", "qdisc", "replace", "dev", self.left_if, "root", "tbf",
                        "rate", rate, "burst", "16kb", "latency", "500ms"], check=True, capture_output=True)

    def unthrottle(self):
        subprocess.run(["ip", "netns", "exec", self.left, "tc", "qdisc", "del", "dev", self.left_if, "root"],
                       check=True, capture_output=True)

    def remove(self):
        for ns in (self.left, self.right):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Mosquitto:
    """One mosquitto broker with persistence (what it acknowledged survives a SIGTERM restart) and no
    limit on what it queues for an offline subscriber. `tls`: (cafile, certfile, keyfile), clients then
    need a certificate of that CA and its common name is their user name; `acl`: lines of an ACL file;
    `passwords`: {user: password}, anonymous clients refused; `extra`: more configuration lines."""

    def __init__(self, directory, host="127.0.0.1", port=None, prefix=(), tls=None, acl=None, passwords=None,
                 extra=()):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.host, self.port, self.prefix, self.tls = host, port or free_port(), list(prefix), tls
        lines = ["listener %d %s" % (self.port, host), "persistence true",
                 "persistence_location %s/" % self.directory, "max_queued_messages 0", "log_dest stderr",
                 "log_type all", *extra]
        if os.getuid() == 0:  # else mosquitto switches to its own user, who cannot write here
            lines.append("user root")
        if tls:
            lines += ["cafile %s" % tls[0], "certfile %s" % tls[1], "keyfile %s" % tls[2],
                      "require_certificate true", "use_identity_as_username true"]
        if acl:
            (self.directory / "acl").write_text("\n".join(acl) + "\n")
            lines.append("acl_file %s" % (self.directory / "acl"))
        if passwords:
            file = self.directory / "passwords"
            for user, password in passwords.items():
                subprocess.run(["mosquitto_passwd", "-b"] + ([] if file.exists() else ["-c"]) +
                               [str(file), user, password], check=True, capture_output=True)
            lines += ["password_file %s" % file, "allow_anonymous false"]
        elif not tls:
            lines.append("allow_anonymous true")
        (self.directory / "mosquitto.conf").write_text("\n".join(lines) + "\n")
        self.proc = None
        self.start()

    @property
    def url(self):
        return "%s://%s:%d" % ("mqtts" if self.tls else "mqtt", self.host, self.port)

    def start(self):
        log = open(self.directory / "mosquitto.log", "ab")
        self.proc = subprocess.Popen(self.prefix + ["mosquitto", "-c", str(self.directory / "mosquitto.conf")],
                                     stdout=log, stderr=log)
        probe = self.prefix + [sys.executable, "-c",
                               "import socket; socket.create_connection(('%s', %d), timeout=0.3).close()"
                               % (self.host, self.port)]
        wait_until(lambda: self.proc.poll() is not None or subprocess.run(probe, capture_output=True).returncode == 0,
                   10, "mosquitto on %s:%d" % (self.host, self.port), interval=0.05)
        assert self.proc.poll() is None, "mosquitto exited: " + self.log()

    def log(self, chars=2000):
        return (self.directory / "mosquitto.log").read_text(errors="replace")[-chars:]

    def stop(self):
        """SIGTERM: mosquitto saves what it holds (acknowledged messages, sessions) and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        end(self.proc, signal.SIGTERM)

    def kill(self):
        """SIGKILL: whatever it acknowledged since its last save is lost with it."""
        end(self.proc, signal.SIGKILL)

    def pause(self):
        """SIGSTOP: the connections stay open, nothing is read or acknowledged (a hung broker)."""
        self.proc.send_signal(signal.SIGSTOP)


class PKI:
    """A CA made with openssl for one test, and certificates it signs (by common name)."""

    def __init__(self, directory, name="ca"):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.name = name
        self._run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=placed test %s" % name,
                  "-keyout", self.directory / ("%s.key" % name), "-out", self.ca)

    @property
    def ca(self):
        return self.directory / ("%s.pem" % self.name)

    def _run(self, *args):
        out = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr

    def issue(self, common_name, alt_name=None):
        """(certificate, key) paths; `alt_name` such as "IP:127.0.0.1"."""
        base = self.directory / common_name
        self._run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % common_name, "-keyout",
                  "%s.key" % base, "-out", "%s.csr" % base)
        extra = []
        if alt_name:
            pathlib.Path("%s.ext" % base).write_text("subjectAltName=%s\n" % alt_name)
            extra = ["-extfile", "%s.ext" % base]
        self._run("x509", "-req", "-in", "%s.csr" % base, "-CA", self.ca, "-CAkey", self.directory / ("%s.key" % self.name),
                  "-CAcreateserial", "-days", "2", "-out", "%s.pem" % base, *extra)
        return pathlib.Path("%s.pem" % base), pathlib.Path("%s.key" % base)


class NatsCluster:
    """Three nats-server nodes in one cluster with JetStream (streams and consumers on three replicas)
    and an MQTT listener each: a message a node acknowledged is on the others too."""

    def __init__(self, directory, nodes=3):
        self.directory = pathlib.Path(directory)
        self.client = [free_port() for _ in range(nodes)]
        self.routes = [free_port() for _ in range(nodes)]
        self.mqtt = [free_port() for _ in range(nodes)]
        self.http = [free_port() for _ in range(nodes)]
        self.procs = []
        for i in range(nodes):
            node = self.directory / ("n%d" % (i + 1))
            node.mkdir(parents=True, exist_ok=True)
            routes = ", ".join("nats-route://127.0.0.1:%d" % self.routes[j] for j in range(nodes) if j != i)
            (node / "nats.conf").write_text("""
server_name: n%(n)d
host: 127.0.0.1
port: %(client)d
http: "127.0.0.1:%(http)d"
jetstream { store_dir: "%(dir)s/js" }
cluster { name: placed-test, host: 127.0.0.1, port: %(route)d, routes: [%(routes)s] }
mqtt { host: 127.0.0.1, port: %(mqtt)d, stream_replicas: %(replicas)d, consumer_replicas: %(replicas)d }
""" % dict(n=i + 1, client=self.client[i], http=self.http[i], dir=node, route=self.routes[i], routes=routes,
           mqtt=self.mqtt[i], replicas=min(3, nodes)))
            log = open(node / "nats.log", "ab")
            self.procs.append(subprocess.Popen(["nats-server", "-c", str(node / "nats.conf")], stdout=log, stderr=log))
        wait_until(lambda: all(self.healthy(i) for i in range(nodes)), 60, "a JetStream cluster of %d" % nodes,
                   interval=0.2)

    def healthy(self, i):
        if self.procs[i].poll() is not None:
            raise AssertionError("nats-server n%d exited: %s" % (i + 1, self.log(i)[-2000:]))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.http[i], timeout=1) as reply:
                return reply.status == 200 and listening("127.0.0.1", self.mqtt[i])
        except OSError:
            return False

    def log(self, i):
        return (self.directory / ("n%d" % (i + 1)) / "nats.log").read_text(errors="replace")

    def url(self, i):
        return "mqtt://127.0.0.1:%d" % self.mqtt[i]

    def kill(self, i):
        end(self.procs[i], signal.SIGKILL)

    def stop(self):
        for proc in self.procs:
            end(proc, signal.SIGTERM)


class Subscriber:
    """A persistent QoS 1 subscriber (paho-mqtt, fixed client id, clean session off) in a process of its
    own, so it can run inside a network namespace; it reconnects by itself. `messages` holds every
    message received as (topic, payload text)."""

    def __init__(self, host, port, topic, client_id="fleet-test-consumer", prefix=(), **options):
        """`options`: cafile, certfile, keyfile (TLS), username, password."""
        self.proc = subprocess.Popen(
            list(prefix) + [sys.executable, str(HERE / "fleet.py"), "subscribe", host, str(port), client_id, topic]
            + ["%s=%s" % item for item in options.items()],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.messages = []
        self.subscribed = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.subscribed.wait(20):
            end(self.proc, signal.SIGKILL)
            raise AssertionError("the subscriber did not subscribe: " + self.proc.stderr.read())

    def _read(self):
        for line in self.proc.stdout:
            event = json.loads(line)
            if event.get("subscribed"):
                self.subscribed.set()
            elif "topic" in event:
                with self.lock:
                    self.messages.append((event["topic"], event["payload"]))

    def received(self):
        with self.lock:
            return list(self.messages)

    def stop(self):
        end(self.proc, signal.SIGKILL)


class Ledger:
    """The messages of one type (`marker` by default, keyed by selection; `visit` by id and event) a
    subscriber received, with the checks every test makes: each duplicate is byte for byte the first
    copy (same id, same payload), first copies arrive in sequence order, and every id is DEVICE:SEQ."""

    def __init__(self, messages, device, kind="marker"):
        self.first, self.order, self.duplicates, self.problems, self.sequences = {}, [], 0, [], []
        for topic, payload in messages:
            if topic != "placed/%s/%s" % (device, kind):
                continue
            body = json.loads(payload)
            key = body["selection"] if kind == "marker" else (body.get("visit"), body.get("event"))
            if body["id"] != "%s:%d" % (device, body["seq"]):
                self.problems.append("id %s is not device:seq" % body["id"])
            if key in self.first:
                self.duplicates += 1
                if self.first[key] != payload:
                    self.problems.append("duplicate of %s differs" % (key,))
            else:
                self.first[key] = payload
                self.order.append(key)
                self.sequences.append(body["seq"])
        if self.sequences != sorted(self.sequences):
            self.problems.append("%ss out of order" % kind)

    def missing(self, keys):
        return [k for k in keys if k not in self.first]

    def bodies(self):
        return [json.loads(self.first[k]) for k in self.order]


class FleetPlaced(Placed):
    """placed with a [Fleet] section (`fleet`: {key: value}) at a static position (or `--gpsd` among
    `arguments` with `static=None`), its varlink socket and files in `directory`; `prefix` runs it inside
    a network namespace (the socket is a file: reachable from outside). Selections go in pipelined
    batches on one connection: 10,000 take seconds."""

    def __init__(self, binary, directory, fleet, *arguments, prefix=(), env=None, static=HELSINKI_CENTER,
                 config="", bus=None):
        self.directory = pathlib.Path(directory)
        self.socket = self.directory / "sock"
        self.static = static
        text = config + "\n[Fleet]\n" + "".join("%s=%s\n" % item for item in fleet.items())
        (self.directory / "placed.conf").write_text(text)
        argv = [*prefix, str(binary), "--config", self.directory / "placed.conf", "--db", self.directory / "places.db",
                "--selections", self.directory / "selections.db", "--socket", self.socket,
                "--bus", "session" if bus else "none"]
        if static:
            argv += ["--static", static]
        env = dict(env or {})
        if bus:
            env["DBUS_SESSION_BUS_ADDRESS"] = bus
        super().__init__(argv[0], *argv[1:], *arguments, env=env)

    def wait_ready(self, timeout=15):
        self.wait_for(r"ranking 1:" if self.static else r"started:", timeout=timeout)
        wait_until(self.socket.exists, 5, "placed's socket")
        return self

    def call(self, method, **parameters):
        with VarlinkSocket(self.socket, timeout=30) as connection:
            return connection.call("io.placed.Places." + method, **parameters)

    def fleet(self):
        return self.call("Status").get("fleet", {})

    def wait_fleet(self, condition, timeout, what):
        last = {}

        def check():
            last.update(self.fleet())
            return condition(last)
        try:
            wait_until(check, timeout, what, interval=0.1)
        except AssertionError as error:
            raise AssertionError("%s; fleet status %s; log:\n%s" % (error, last, "\n".join(self.lines[-30:])))
        return last

    def select_many(self, count, batch=200):
        """`count` Select calls of the current top place, `batch` at a time on one connection (the replies
        read after each batch); a place that dropped out of the recent rankings is looked up again.
        Returns the selection numbers, in order."""
        numbers = []
        with VarlinkSocket(self.socket, timeout=60) as connection:
            place = None
            while len(numbers) < count:
                if place is None:
                    places = connection.call("io.placed.Places.Current")["places"]
                    assert places, "no place ranked to select"
                    place = places[0]["id"]
                size = min(batch, count - len(numbers))
                message = (json.dumps({"method": "io.placed.Places.Select", "parameters": {"id": place}}).encode()
                           + b"\0") * size
                connection.send_raw(message)
                for _ in range(size):
                    reply = connection.receive()
                    if reply.get("error") == "io.placed.Places.NotInRanking":
                        place = None
                    else:
                        assert not reply.get("error"), reply
                        numbers.append(reply["parameters"]["marker"]["selection"])
        return numbers

    def kill(self):
        """SIGKILL: no chance to flush, to write the cursor or to say goodbye."""
        self.proc.kill()
        self.proc.wait()
        self._reader.join(5)


def clock_synchronized():
    """adjtimex(2) read-only, as placed reads it (outside the unit's seccomp filter): not STA_UNSYNC."""

    class Timex(ctypes.Structure):
        _fields_ = [("modes", ctypes.c_uint), ("rest", ctypes.c_byte * 204)]

    state = Timex()
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.adjtimex(ctypes.byref(state))
    # struct timex: modes, padding, four longs (offset, freq, maxerror, esterror), then int status at 40.
    status = int.from_bytes(bytes(state.rest[36:40]), "little", signed=True)
    return result >= 0 and result != 5 and not status & 0x40  # TIME_ERROR, STA_UNSYNC


def subscribe_main(host, port, client_id, topic, *options):
    """The subscriber process: one JSON line per message on stdout."""
    import paho.mqtt.client as mqtt
    options = dict(option.split("=", 1) for option in options)

    def say(**event):
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    def on_connect(client, userdata, flags, reason, properties):
        if not reason.is_failure:
            client.subscribe(topic, qos=1)

    def on_subscribe(client, userdata, mid, reasons, properties):
        say(subscribed=True)

    def on_message(client, userdata, message):
        say(topic=message.topic, payload=message.payload.decode(), dup=bool(message.dup), retain=message.retain)

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                         protocol=mqtt.MQTTv311)
    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
    if "cafile" in options:
        client.tls_set(ca_certs=options["cafile"], certfile=options.get("certfile"), keyfile=options.get("keyfile"))
    if "username" in options:
        client.username_pw_set(options["username"], options.get("password"))
    client.reconnect_delay_set(min_delay=0.2, max_delay=1)
    client.max_inflight_messages_set(100)
    while True:
        try:
            client.connect(host, int(port), keepalive=10)
            break
        except OSError:
            time.sleep(0.2)
    client.loop_forever(retry_first_connection=True)


if __name__ == "__main__" and sys.argv[1:2] == ["subscribe"]:
    subscribe_main(*sys.argv[2:])
