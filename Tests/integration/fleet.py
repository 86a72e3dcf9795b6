"""Brokers, subscribers and networks for the fleet export tests: mosquitto and a three-node NATS cluster
(JetStream with its MQTT listener) from Debian, a persistent QoS 1 subscriber (paho-mqtt), network
namespaces joined by a veth pair, and the publisher (placed-fleet-probe now; placed once the daemon
exports). Every process runs in a directory of its own and is ended by its PID.

Run as a script, `python fleet.py subscribe HOST PORT CLIENT_ID TOPIC` is the subscriber itself, so
that it can run inside a network namespace (`ip netns exec`)."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

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

    def remove(self):
        for ns in (self.left, self.right):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Mosquitto:
    """One mosquitto broker with persistence (what it acknowledged survives a SIGTERM restart) and no
    limit on what it queues for an offline subscriber."""

    def __init__(self, directory, host="127.0.0.1", port=None, prefix=()):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.host, self.port, self.prefix = host, port or free_port(), list(prefix)
        lines = ["listener %d %s" % (self.port, host), "allow_anonymous true", "persistence true",
                 "persistence_location %s/" % self.directory, "max_queued_messages 0", "log_dest stderr",
                 "log_type all"]
        if os.getuid() == 0:  # else mosquitto switches to its own user, who cannot write here
            lines.append("user root")
        (self.directory / "mosquitto.conf").write_text("\n".join(lines) + "\n")
        self.proc = None
        self.start()

    @property
    def url(self):
        return "mqtt://%s:%d" % (self.host, self.port)

    def start(self):
        log = open(self.directory / "mosquitto.log", "ab")
        self.proc = subprocess.Popen(self.prefix + ["mosquitto", "-c", str(self.directory / "mosquitto.conf")],
                                     stdout=log, stderr=log)
        probe = self.prefix + [sys.executable, "-c",
                               "import socket; socket.create_connection(('%s', %d), timeout=0.3).close()"
                               % (self.host, self.port)]
        wait_until(lambda: self.proc.poll() is not None or subprocess.run(probe, capture_output=True).returncode == 0,
                   10, "mosquitto on %s:%d" % (self.host, self.port), interval=0.05)
        assert self.proc.poll() is None, "mosquitto exited: " + (self.directory / "mosquitto.log").read_text()[-2000:]

    def stop(self):
        end(self.proc, signal.SIGTERM)

    def kill(self):
        end(self.proc, signal.SIGKILL)


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

    def __init__(self, host, port, topic, client_id="fleet-test-consumer", prefix=()):
        self.proc = subprocess.Popen(
            list(prefix) + [sys.executable, str(HERE / "fleet.py"), "subscribe", host, str(port), client_id, topic],
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
    """The markers a subscriber received, with the checks every test makes: each duplicate is byte for
    byte the first copy (same id, same payload), first copies arrive in order, and every id is
    DEVICE:SEQ."""

    def __init__(self, messages, device):
        self.first, self.order, self.duplicates, self.problems = {}, [], 0, []
        for topic, payload in messages:
            if topic != "placed/%s/marker" % device:
                continue
            body = json.loads(payload)
            selection = body["selection"]
            if body["id"] != "%s:%d" % (device, body["seq"]):
                self.problems.append("id %s is not device:seq" % body["id"])
            if selection in self.first:
                self.duplicates += 1
                if self.first[selection] != payload:
                    self.problems.append("duplicate of %d differs" % selection)
            else:
                self.first[selection] = payload
                self.order.append(selection)
        if self.order != sorted(self.order):
            self.problems.append("markers out of order")

    def missing(self, numbers):
        return [n for n in numbers if n not in self.first]


class FleetProbe:
    """The publisher: PlacedFleet in a process of its own (placed-fleet-probe), so a test can kill it or
    put it in a network namespace. `status` is its last status line as a dict."""

    def __init__(self, binary, database, settings, *arguments, prefix=()):
        argv = list(prefix) + [str(binary), "--db", str(database)]
        for key, value in settings.items():
            argv += ["--set", "%s=%s" % (key, value)]
        self.proc = subprocess.Popen(argv + [str(a) for a in arguments], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines, self.errors, self.status = [], [], {}
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            self.lines.append(line)
            if line.startswith("status "):
                words = line.split()
                self.status = dict(w.split("=", 1) for w in words[2:])
                self.status["state"] = words[1]

    def _read_errors(self):
        for line in self.proc.stderr:
            self.errors.append(line.rstrip())

    def wait_for(self, text, timeout):
        try:
            wait_until(lambda: any(line.startswith(text) for line in self.lines) or self.proc.poll() is not None,
                       timeout, "'%s' from placed-fleet-probe" % text)
        except AssertionError as error:
            raise AssertionError("%s; last status %s; its log:\n%s" % (error, self.status, self.log())) from None
        assert any(line.startswith(text) for line in self.lines), \
            "placed-fleet-probe exited (%s): %s" % (self.proc.returncode, self.log())

    def log(self, lines=20):
        return "\n".join(self.errors[-lines:])

    def kill(self):
        end(self.proc, signal.SIGKILL)

    def stop(self):
        end(self.proc, signal.SIGTERM)


def subscribe_main(host, port, client_id, topic):
    """The subscriber process: one JSON line per message on stdout."""
    import paho.mqtt.client as mqtt

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
    subscribe_main(*sys.argv[2:6])
