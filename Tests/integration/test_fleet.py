"""The fleet export against real brokers, for what the Swift tests cannot do in one process: the
publisher killed mid-flush, the publisher and the broker in network namespaces with the link cut for
longer than the keepalive, and a three-node NATS cluster losing the node the publisher is connected to.
The publisher is placed-fleet-probe (PlacedFleet in its own process) until the daemon exports."""
import os
import shutil
import time

import pytest

from fleet import FleetProbe, Ledger, Mosquitto, NatsCluster, Netns, Subscriber, wait_until
from harness import bin_path


@pytest.fixture(scope="session")
def probe_bin():
    path = bin_path("release", "placed-fleet-probe")
    assert path.exists(), "build it first: swift build -c release --product placed-fleet-probe"
    return path


@pytest.fixture
def cleanup():
    """Things to end at the end of the test, last started first."""
    items = []
    yield items
    for item in reversed(items):
        item()


def test_kill_9_of_the_publisher_mid_flush_loses_nothing(tmp_path, probe_bin, cleanup):
    device = "killed-publisher"
    broker = Mosquitto(tmp_path / "broker")
    cleanup.append(broker.kill)
    subscriber = Subscriber("127.0.0.1", broker.port, "placed/%s/#" % device)
    cleanup.append(subscriber.stop)
    broker.stop()  # the backlog builds up while the broker is away
    settings = {"Broker": broker.url, "DeviceId": device}
    first = FleetProbe(probe_bin, tmp_path / "selections.db", settings, "--markers", 5000)
    cleanup.append(first.kill)
    first.wait_for("appended 5000", 60)
    broker.start()
    # Killed while the backlog drains: some markers are out, most are not.
    wait_until(lambda: len(Ledger(subscriber.received(), device).first) >= 300, 30, "the first markers")
    first.kill()
    at_kill = len(Ledger(subscriber.received(), device).first)
    assert at_kill < 5000, "the publisher had finished before it was killed: the test tested nothing"

    second = FleetProbe(probe_bin, tmp_path / "selections.db", settings, "--exit-when-drained")
    cleanup.append(second.kill)
    second.wait_for("drained", 60)
    wait_until(lambda: len(Ledger(subscriber.received(), device).first) == 5000, 30, "every marker")
    ledger = Ledger(subscriber.received(), device)
    assert ledger.missing(range(1, 5001)) == []
    assert ledger.problems == []


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_a_partition_longer_than_the_keepalive_reconnects_and_drains(tmp_path, probe_bin, cleanup):
    device = "partitioned"
    net = Netns()
    cleanup.append(net.remove)
    broker = Mosquitto(tmp_path / "broker", host=net.right_ip, port=1883, prefix=net.prefix("right"))
    cleanup.append(broker.kill)
    subscriber = Subscriber(net.right_ip, 1883, "placed/%s/#" % device, prefix=net.prefix("right"))
    cleanup.append(subscriber.stop)
    settings = {"Broker": broker.url, "DeviceId": device, "KeepAlive": 5}
    probe = FleetProbe(probe_bin, tmp_path / "selections.db", settings, "--markers", 600, "--interval", 0.05,
                       "--exit-when-drained", prefix=net.prefix("left"))
    cleanup.append(probe.kill)
    wait_until(lambda: len(Ledger(subscriber.received(), device).first) >= 50, 30, "markers before the cut")
    net.cut()
    cut_at = time.monotonic()
    # Longer than the keepalive: the probe must notice by itself (no RST, no ICMP) and keep retrying.
    wait_until(lambda: probe.status.get("state") in ("connecting", "backoff"), 20, "the lost link noticed")
    noticed = time.monotonic() - cut_at
    time.sleep(max(0, 15 - noticed))
    during = len(Ledger(subscriber.received(), device).first)
    net.mend()
    probe.wait_for("drained", 90)
    ledger = Ledger(subscriber.received(), device)
    assert ledger.missing(range(1, 601)) == []
    assert ledger.problems == []
    # Publishing: the unacknowledged data times out after one keepalive (TCP_USER_TIMEOUT), or the ping
    # unanswered for one gives up; at most two, and a little slack.
    assert noticed <= 2 * 5 + 1, "given up within two keepalives"
    assert during < 600, "everything was through before the cut: the test tested nothing"


def test_a_nats_cluster_node_killed_mid_burst(tmp_path, probe_bin, cleanup):
    if not shutil.which("nats-server"):
        pytest.fail("nats-server is not installed (scripts/packages lists it)")
    device = "clustered"
    cluster = NatsCluster(tmp_path / "nats")
    cleanup.append(cluster.stop)
    # The consumer sits on the third node; the device tries the first, then the others.
    subscriber = Subscriber("127.0.0.1", cluster.mqtt[2], "placed/%s/#" % device)
    cleanup.append(subscriber.stop)
    settings = {"Broker": " ".join(cluster.url(i) for i in range(3)), "DeviceId": device, "KeepAlive": 5}
    probe = FleetProbe(probe_bin, tmp_path / "selections.db", settings, "--markers", 1000, "--interval", 0.004,
                       "--exit-when-drained")
    cleanup.append(probe.kill)
    wait_until(lambda: len(Ledger(subscriber.received(), device).first) >= 100, 60, "the burst under way")
    assert probe.status.get("broker") == cluster.url(0), probe.status
    cluster.kill(0)
    killed_with = len(Ledger(subscriber.received(), device).first)
    # A JetStream cluster that lost a node elects new stream leaders, and a loaded machine can keep it
    # slow for a while: the drain is given minutes.
    try:
        probe.wait_for("drained", 240)
    except AssertionError as error:
        timeline = [line for line in probe.lines if line.startswith("status")][::10]
        logs = "\n".join("n%d: %s" % (i + 1, cluster.log(i)[-1500:]) for i in (1, 2))
        raise AssertionError("%s\nreceived %d\nprobe every 10 s: %s\n%s" % (
            error, len(Ledger(subscriber.received(), device).first), "\n".join(timeline), logs))
    wait_until(lambda: len(Ledger(subscriber.received(), device).first) == 1000, 60,
               "every marker through the other nodes")
    ledger = Ledger(subscriber.received(), device)
    assert ledger.missing(range(1, 1001)) == []
    assert ledger.problems == []
    assert killed_with < 1000, "the burst was over before the node died: the test tested nothing"
    others = ("status connected broker=%s" % cluster.url(i) for i in (1, 2))
    assert any(line.startswith(prefix) for prefix in others for line in probe.lines), "failed over to a live node"


def test_bench_run_reads_every_fleet_figure():
    """A short `placed-bench fleet`: it measures against a mosquitto of its own, and bench/run reads each
    of its three figures (the idle one judged against the keepalive)."""
    import importlib.machinery
    import importlib.util
    import subprocess

    from harness import ROOT

    bench = bin_path("release", "placed-bench")
    out = subprocess.run([bench, "fleet", "--markers", "500", "--backlog", "5000", "--idle", "12", "--keepalive", "5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    loader = importlib.machinery.SourceFileLoader("bench_run", str(ROOT / "bench" / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_run", loader))
    loader.exec_module(module)
    rows = {row[0]: row for row in module.rows("fleet", out.stdout)}
    assert set(rows) == {"fleet: markers through the outbox to PUBACK (mosquitto)",
                         "fleet: drain of a 5,000-event backlog", "fleet: idle wake-ups, connected (strace)"}
    assert rows["fleet: idle wake-ups, connected (strace)"][5] == "met", out.stdout
