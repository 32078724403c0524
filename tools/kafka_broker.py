"""A real Apache Kafka 4.x broker (KRaft) for development and CI, run from Maven Central jars.

No Docker and no Kafka distribution: ``tools/kafka/pom.xml`` pins the broker, Maven copies it
and its dependencies into ``${XDG_CACHE_HOME:-~/.cache}/claimgraph/kafka-<version>/libs`` once,
and every later start is offline. Each node is one JVM running a combined broker+controller
(``process.roles=broker,controller``), bound to 127.0.0.1 only, logging through log4j2
(``tools/kafka/log4j2.xml``) to ``server.log`` in its data directory.

From Python (tests, benchmarks)::

    with KafkaBroker(tmp_path / "kafka") as broker:      # one node, replication 1
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        broker.restart()                                 # same data, same ports

    with KafkaCluster(tmp_path / "cluster") as cluster:  # 3 nodes, RF 3, min ISR 2
        cluster.kill_node(2); cluster.restart_node(2)

From a shell::

    python tools/kafka_broker.py fetch               # download the jars (once)
    python tools/kafka_broker.py start               # one node on 127.0.0.1:9092; Ctrl-C stops it
    python tools/kafka_broker.py start --sasl-user claimgraph:secret   # ... asking SASL/PLAIN
    python tools/kafka_broker.py start --detach      # ... or leave it running in the background
    python tools/kafka_broker.py status|stop         # of ./kafka-data (or --data-dir)
    python tools/kafka_broker.py cluster             # three nodes in ./kafka-cluster-data

Missing Java (17+) or Maven is reported as one line saying what to install.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "LOG4J2_CONFIG",
    "POM",
    "BrokerError",
    "BrokerStartError",
    "FetchError",
    "KafkaBroker",
    "KafkaCluster",
    "PrerequisiteError",
    "cache_dir",
    "ensure_libs",
    "fetch",
    "find_java",
    "kafka_version",
    "libs_dir",
    "main",
]

HERE = Path(__file__).resolve().parent
POM = HERE / "kafka" / "pom.xml"
LOG4J2_CONFIG = HERE / "kafka" / "log4j2.xml"
MIN_JAVA = 17
MARKER = ".fetched"
DEFAULT_HEAP = "512m"
CLUSTER_HEAP = "384m"
DEFAULT_START_TIMEOUT = 120.0
DEFAULT_STOP_GRACE = 30.0

JAVA_HINT = (
    f"Java {MIN_JAVA}+ is needed to run the Kafka broker: "
    "apt-get install openjdk-17-jre-headless (or set JAVA_HOME)"
)
MAVEN_HINT = (
    "Maven is needed to fetch the Kafka broker jars from Maven Central: apt-get install maven"
)
CLIENT_HINT = (
    "confluent-kafka is needed to talk to the broker: pip install confluent-kafka "
    "(make install puts it in .venv)"
)

# Settings every node gets: small thread pools and few internal partitions (a shared 2-core
# machine), no rebalance delay for tests. Overridable through ``properties=``.
BASE_PROPERTIES: dict[str, str] = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "num.replica.fetchers": "1",
    "log.cleaner.threads": "1",
    "group.initial.rebalance.delay.ms": "0",
    # a node restarted after a crash must wait for its old session to expire before it can
    # register again (default 9 s); a cluster notices a crashed node after this long too
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.num.partitions": "5",
}


def _durability(replication: int, min_isr: int) -> dict[str, str]:
    r, m = str(replication), str(min_isr)
    return {
        "default.replication.factor": r,
        "min.insync.replicas": m,
        "offsets.topic.replication.factor": r,
        "transaction.state.log.replication.factor": r,
        "transaction.state.log.min.isr": m,
        "share.coordinator.state.topic.replication.factor": r,
        "share.coordinator.state.topic.min.isr": m,
    }


class BrokerError(RuntimeError):
    """Anything that keeps a development Kafka broker from being fetched or started."""


class PrerequisiteError(BrokerError):
    """Java or Maven is missing (the message says what to install)."""


class FetchError(BrokerError):
    """Maven could not fetch the broker jars."""


class BrokerStartError(BrokerError):
    """A node did not come up (the message includes the tail of its log)."""


# --------------------------------------------------------------------------------- fetching


def kafka_version(pom: Path = POM) -> str:
    """The Kafka version pinned by ``pom`` (its ``kafka.version`` property)."""
    root = ET.parse(pom).getroot()
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = root.find("m:properties/m:kafka.version", ns)
    if node is None or not (node.text or "").strip():
        raise FetchError(f"{pom} has no <kafka.version> property")
    return (node.text or "").strip()


def cache_dir(version: str | None = None) -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/claimgraph/kafka-<version>``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "claimgraph" / f"kafka-{version or kafka_version()}"


def libs_dir(version: str | None = None) -> Path:
    """Where the broker's jars are (or will be) cached."""
    return cache_dir(version) / "libs"


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError:
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_392" is Java 8
        major = int(m.group(2))
    return major


def find_java() -> str:
    """Path of a Java 17+ ``java`` ($JAVA_HOME first, then PATH), or PrerequisiteError."""
    candidates: list[str] = []
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        candidates.append(str(Path(home) / "bin" / "java"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    if not candidates:
        raise PrerequisiteError(JAVA_HINT)
    found: list[str] = []
    for java in candidates:
        major = _java_major(java)
        if major is not None and major >= MIN_JAVA:
            return java
        found.append(f"Java {major if major is not None else '?'} at {java}")
    raise PrerequisiteError(f"{JAVA_HINT}; found only {', '.join(found)}")


def _pom_digest(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def _fetched(cache: Path, pom: Path) -> bool:
    """True when the marker says a complete copy made from this very pom is in place."""
    try:
        marker = json.loads((cache / MARKER).read_text())
    except (OSError, ValueError):
        return False
    libs = cache / "libs"
    jars = marker.get("jars") if isinstance(marker, dict) else None
    return (
        isinstance(jars, list)
        and bool(jars)
        and marker.get("pom_sha256") == _pom_digest(pom)
        and all((libs / str(j)).is_file() for j in jars)
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch(pom: Path = POM, *, quiet: bool = False) -> Path:
    """Copy the broker jars from Maven Central into the cache, unless already there.

    Idempotent and offline once done: a marker (``.fetched``, written last, naming every jar
    and the pom's digest) says the copy is complete; without it, or when the pom changed, the
    download is redone from scratch. Returns the libs directory.
    """
    version = kafka_version(pom)
    cache = cache_dir(version)
    libs = cache / "libs"
    if _fetched(cache, pom):
        return libs
    find_java()  # Maven needs it too; say so before Maven does
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PrerequisiteError(MAVEN_HINT)
    with _locked(cache.parent / f".kafka-{version}.lock"):
        if _fetched(cache, pom):  # another process finished while we waited
            return libs
        cache.mkdir(parents=True, exist_ok=True)
        (cache / MARKER).unlink(missing_ok=True)
        for stale in cache.glob("libs.partial-*"):  # left by an interrupted fetch
            shutil.rmtree(stale, ignore_errors=True)
        partial = Path(tempfile.mkdtemp(prefix="libs.partial-", dir=cache))
        if not quiet:
            print(f"fetching Kafka {version} from Maven Central into {libs} ...", file=sys.stderr)
        cmd = [
            mvn,
            "-q",
            "-B",
            "-Dstyle.color=never",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={partial}",
            "-DincludeScope=runtime",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            shutil.rmtree(partial, ignore_errors=True)
            raise FetchError(f"could not run Maven ({mvn}): {exc}") from exc
        jars = sorted(p.name for p in partial.glob("*.jar"))
        if done.returncode != 0 or not jars:
            shutil.rmtree(partial, ignore_errors=True)
            tail = _tail_text(done.stdout + done.stderr, 30)
            raise FetchError(
                f"Maven could not fetch Kafka {version} (exit {done.returncode}): "
                f"{' '.join(cmd)}\n{tail}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        marker = {"version": version, "pom_sha256": _pom_digest(pom), "jars": jars}
        tmp = cache / f"{MARKER}.tmp"
        tmp.write_text(json.dumps(marker, indent=1) + "\n")
        tmp.replace(cache / MARKER)
        if not quiet:
            print(f"fetched {len(jars)} jars into {libs}", file=sys.stderr)
        return libs


def ensure_libs(pom: Path = POM) -> Path:
    """The cached libs directory, fetching it first if needed (quietly when already there)."""
    return fetch(pom, quiet=True)


# ------------------------------------------------------------------------------- helpers


def _tail_text(text: str, lines: int) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _tail_file(path: Path, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return _tail_text(data, lines)


def _error_lines(path: Path, offset: int, limit: int = 12) -> str:
    """ERROR/FATAL lines after ``offset`` in a log4j log, each with its exception and causes."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read(4 * 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""
    picked: list[str] = []
    in_error = False
    for line in data.splitlines():
        if line.startswith("["):
            in_error = "] ERROR " in line or "] FATAL " in line
            if in_error:
                picked.append(line[:400])
        elif in_error and (not line.startswith(("\t", " ")) or "Caused by:" in line):
            picked.append("    " + line.strip()[:400])  # the exception and its causes
        if len(picked) >= limit:
            break
    return "\n".join(picked)


def _free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports that were free a moment ago (bound together, released)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _random_cluster_id() -> str:
    """What ``kafka-storage random-uuid`` prints: 16 random bytes, URL-safe base64, no '-' first."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Linux: SIGTERM this child when the process that started it dies (no orphan brokers)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kafka_client_errors() -> tuple[type[BaseException], ...]:
    try:
        from confluent_kafka import KafkaException
    except ImportError as exc:
        raise BrokerStartError(CLIENT_HINT) from exc
    return (KafkaException,)


def _admin(bootstrap: str) -> Any:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError as exc:
        raise BrokerStartError(CLIENT_HINT) from exc
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.connection.setup.timeout.ms": 2000,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
            "log_level": 0,  # connection-refused noise while a node boots
        }
    )


def _process_cmdline(pid: int) -> str | None:
    """The command line of a live process, '' where /proc is missing, None when it is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return None if Path("/proc/self").exists() else ""
    except OSError:
        return ""


_LIVE: set[KafkaBroker] = set()  # started by this process, not detached, not yet stopped


@atexit.register
def _stop_leftovers() -> None:
    """Stop what this process started and left running (all at once, like a cluster)."""
    nodes = list(_LIVE)
    for node in nodes:
        node._send(signal.SIGTERM)
    for node in nodes:
        with contextlib.suppress(Exception):
            node.stop(grace=10)


# ---------------------------------------------------------------------------------- nodes


class KafkaBroker:
    """One KRaft node (broker + controller in one JVM) on 127.0.0.1.

    Alone (the default) it is its own single-voter quorum with replication factor 1. A
    :class:`KafkaCluster` builds several, passing ``voters``, ``cluster_id`` and
    ``properties``. ``data_dir`` holds everything: ``server.properties``, the Kafka data under
    ``data/``, ``server.log`` (log4j2), ``console.log`` (JVM stdout/stderr) and ``node.json``
    (ports, cluster id, pid). Re-using a data directory keeps its data, cluster id and, when
    they are still free, its ports.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        node_id: int = 1,
        port: int | None = None,
        controller_port: int | None = None,
        voters: str | None = None,
        cluster_id: str | None = None,
        properties: Mapping[str, str] | None = None,
        heap: str = DEFAULT_HEAP,
        libs: Path | None = None,
        java: str | None = None,
        die_with_parent: bool = True,
        sasl_users: Mapping[str, str] | None = None,
        tls: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        # SASL/PLAIN users (name → password) and/or TLS (a CA and a server certificate for
        # 127.0.0.1, made in DATA/tls): the client listener then asks for them, and the
        # broker talks to itself on a plaintext INTERNAL listener
        self.sasl_users: dict[str, str] = dict(sasl_users or {})
        self.tls = tls
        for user, password in self.sasl_users.items():
            if not re.fullmatch(r"[A-Za-z0-9._-]+", user) or re.search(r'["\\\s]', password):
                raise BrokerStartError(f"SASL user {user!r}: use [A-Za-z0-9._-] names, no quotes")
        self.node_id = node_id
        self.heap = heap
        self.die_with_parent = die_with_parent
        self._libs = libs
        self._java = java
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None  # of a node this object did not start (CLI stop/status)
        self._log_offset = 0  # size of server.log at the last launch
        saved = self._load_state()
        if port is None or controller_port is None:
            old_port, old_cport = saved.get("port"), saved.get("controller_port")
            if (
                isinstance(old_port, int)
                and isinstance(old_cport, int)
                and _port_free(old_port)
                and _port_free(old_cport)
            ):
                fresh = [old_port, old_cport]
            else:
                fresh = _free_ports(2)
            port = fresh[0] if port is None else port
            controller_port = fresh[1] if controller_port is None else controller_port
        self.port: int = port
        self.controller_port: int = controller_port
        self.internal_port: int | None = None
        if self.sasl_users or self.tls:
            old = saved.get("internal_port")
            taken = {port, controller_port}
            if isinstance(old, int) and old not in taken and _port_free(old):
                self.internal_port = old
            else:
                self.internal_port = next(p for p in _free_ports(3) if p not in taken)
        self.voters = voters or f"{node_id}@127.0.0.1:{controller_port}"
        self.cluster_id = self._formatted_cluster_id() or cluster_id or _random_cluster_id()
        self.properties: dict[str, str] = {
            **BASE_PROPERTIES,
            **_durability(1, 1),
            **(properties or {}),
        }

    # -- paths and addresses

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>``, for ``bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    @property
    def admin_bootstrap(self) -> str:
        """Where this tool checks the node: the plaintext INTERNAL listener under SASL."""
        port = self.internal_port if self.internal_port is not None else self.port
        return f"127.0.0.1:{port}"

    @property
    def security_protocol(self) -> str:
        """The client listener's: PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL."""
        if self.sasl_users:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"

    @property
    def ca_path(self) -> Path:
        """The CA certificate (PEM) that signed the TLS listener's certificate."""
        return self.data_dir / "tls" / "ca.pem"

    def client_config(self, user: str | None = None) -> dict[str, str]:
        """librdkafka properties a client needs here (credentials, the CA, when enabled)."""
        conf = {"bootstrap.servers": self.bootstrap}
        if self.tls:
            conf |= {
                "security.protocol": self.security_protocol,
                "ssl.ca.location": str(self.ca_path),
            }
        if self.sasl_users:
            name = user or next(iter(self.sasl_users))
            conf |= {
                "security.protocol": self.security_protocol,
                "sasl.mechanism": "PLAIN",
                "sasl.username": name,
                "sasl.password": self.sasl_users[name],
            }
        return conf

    @property
    def log_path(self) -> Path:
        """The broker's log4j2 log."""
        return self.data_dir / "server.log"

    @property
    def console_path(self) -> Path:
        """The JVM's stdout and stderr (crashes before logging starts land here)."""
        return self.data_dir / "console.log"

    @property
    def properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def kafka_data(self) -> Path:
        return self.data_dir / "data"

    @property
    def state_path(self) -> Path:
        return self.data_dir / "node.json"

    @property
    def pid(self) -> int | None:
        """The JVM's pid while it runs."""
        if self._proc is not None:
            return self._proc.pid if self._proc.poll() is None else None
        if self._pid is not None and self._owns(self._pid):
            return self._pid
        return None

    @property
    def running(self) -> bool:
        return self.pid is not None

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"KafkaBroker(node {self.node_id}, {self.bootstrap}, {self.data_dir}, {state})"

    # -- lifecycle

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> KafkaBroker:
        """Format the data directory if new, launch the JVM and wait until it serves metadata.

        On failure (BrokerStartError, with the tail of the log) the JVM is stopped again.
        """
        _kafka_client_errors()  # no point starting a JVM we cannot talk to
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop(grace=10)
            raise
        return self

    def launch(self, *, detach: bool = False) -> None:
        """Start the JVM without waiting (a cluster launches all nodes, then waits)."""
        if self.running:
            return
        other = self._foreign_pid()
        if other is not None:
            raise BrokerStartError(
                f"a Kafka node is already running in {self.data_dir} (pid {other}); stop it first"
            )
        libs = self._libs or ensure_libs()
        java = self._java or find_java()
        self._libs, self._java = libs, java
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_properties()
        self._format(java, libs)
        try:
            self._log_offset = self.log_path.stat().st_size
        except OSError:
            self._log_offset = 0
        cmd = [
            java,
            f"-Xmx{self.heap}",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:-UsePerfData",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.data_dir}",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            "-cp",
            f"{libs}/*",
            "kafka.Kafka",
            str(self.properties_path),
        ]
        with self.console_path.open("ab") as console:
            console.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            console.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,  # Ctrl-C reaches us, and we stop the JVM cleanly
                preexec_fn=_die_with_parent if self.die_with_parent and not detach else None,
            )
        self._pid = None
        if not detach:
            _LIVE.add(self)
        self._save_state(pid=self._proc.pid)

    def wait_ready(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Until this node answers metadata listing itself as a live broker, and every partition
        it hosts has a leader (after a restart, leaders are elected just after it is unfenced)."""
        errors = _kafka_client_errors()
        admin = _admin(self.admin_bootstrap)
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise BrokerStartError(
                    f"Kafka node {self.node_id} exited with code {self._proc.returncode} "
                    f"while starting\n{self.log_tail()}"
                )
            try:
                md = admin.list_topics(timeout=2)
                leaderless = [
                    f"{t.topic}[{p.id}]"
                    for t in md.topics.values()
                    for p in t.partitions.values()
                    if self.node_id in p.replicas and p.leader < 0
                ]
                if self.node_id in md.brokers and not leaderless:
                    return
                if self.node_id not in md.brokers:
                    last = f"metadata lists brokers {sorted(md.brokers)}, not yet {self.node_id}"
                else:
                    last = f"partitions without a leader: {leaderless[:5]}"
            except errors as exc:
                last = str(exc)
            if time.monotonic() >= deadline:
                raise BrokerStartError(
                    f"Kafka node {self.node_id} at {self.bootstrap} not ready after "
                    f"{timeout:.0f}s ({last})\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def stop(self, grace: float = DEFAULT_STOP_GRACE) -> None:
        """SIGTERM (a clean, controlled shutdown), then SIGKILL if still alive after ``grace``."""
        self._signal(signal.SIGTERM, grace)

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown. The data stays for :meth:`restart`."""
        self._signal(signal.SIGKILL, 30)

    def restart(self, timeout: float = DEFAULT_START_TIMEOUT) -> KafkaBroker:
        """Stop (if running) and start again with the same data, ports and cluster id."""
        self.stop()
        return self.start(timeout)

    def log_tail(self, lines: int = 25) -> str:
        """For error messages: the ERRORs logged since the last launch (with their causes),
        then the last lines of server.log and console.log."""
        parts = []
        errors = _error_lines(self.log_path, self._log_offset)
        if errors:
            parts.append(f"--- errors in {self.log_path}:\n{errors}")
        for path in (self.log_path, self.console_path):
            tail = _tail_file(path, lines)
            if tail:
                parts.append(f"--- tail of {path}:\n{tail}")
        return "\n".join(parts) or f"(no log output in {self.data_dir})"

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals

    def _send(self, sig: signal.Signals) -> None:
        pid = self.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _signal(self, sig: signal.Signals, grace: float) -> None:
        pid = self.pid
        if pid is None:
            self._finish()
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if not self._wait_exit(pid, grace):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._wait_exit(pid, 30)
        self._finish()

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while self._owns(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _finish(self) -> None:
        self._proc = None
        self._pid = None
        _LIVE.discard(self)
        if self.state_path.exists():
            self._save_state(pid=None)

    def _owns(self, pid: int) -> bool:
        cmdline = _process_cmdline(pid)
        if cmdline is None:
            return False
        return cmdline == "" or ("kafka.Kafka" in cmdline and str(self.properties_path) in cmdline)

    def _foreign_pid(self) -> int | None:
        pid = self._load_state().get("pid")
        if isinstance(pid, int) and self._owns(pid):
            return pid
        return None

    def adopt(self) -> int | None:
        """Attach to a node started earlier in this data directory by another process."""
        pid = self._foreign_pid()
        if pid is not None:
            self._pid = pid
        return pid

    def _load_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def _save_state(self, *, pid: int | None) -> None:
        state = {
            "node_id": self.node_id,
            "port": self.port,
            "controller_port": self.controller_port,
            "internal_port": self.internal_port,
            "sasl_users": sorted(self.sasl_users),
            "tls": self.tls,
            "bootstrap": self.bootstrap,
            "cluster_id": self.cluster_id,
            "pid": pid,
            "log": str(self.log_path),
        }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n")
        tmp.replace(self.state_path)

    def _formatted_cluster_id(self) -> str | None:
        try:
            text = (self.kafka_data / "meta.properties").read_text()
        except OSError:
            return None
        m = re.search(r"^cluster\.id=(\S+)$", text, re.MULTILINE)
        return m.group(1) if m else None

    def _write_properties(self) -> None:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.kafka_data),
            **self._sasl_properties(),
            **self.properties,
        }
        lines = ["# written by tools/kafka_broker.py; rewritten at every start"]
        lines += [f"{k}={v}" for k, v in props.items()]
        self.properties_path.write_text("\n".join(lines) + "\n")

    def _sasl_properties(self) -> dict[str, str]:
        """The CLIENT listener's security (SASL/PLAIN, TLS) beside a plaintext INTERNAL one."""
        if not (self.sasl_users or self.tls):
            return {}
        c = f"CONTROLLER://127.0.0.1:{self.controller_port}"
        props = {
            "listeners": (
                f"CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port},{c}"
            ),
            "advertised.listeners": (
                f"CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port}"
            ),
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": (
                f"CLIENT:{self.security_protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
        }
        if self.sasl_users:
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["sasl.enabled.mechanisms"] = "PLAIN"
            props["listener.name.client.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            )
        if self.tls:
            props["listener.name.client.ssl.keystore.type"] = "PEM"
            props["listener.name.client.ssl.keystore.location"] = str(self.tls_files())
        return props

    def tls_files(self) -> Path:
        """A CA and a server certificate for 127.0.0.1 (made once): the keystore's path."""
        tls = self.data_dir / "tls"
        keystore = tls / "server.pem"
        if keystore.exists() and self.ca_path.exists():
            return keystore
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.UTC)
        life = datetime.timedelta(days=3650)

        def cert(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> x509.Certificate:
            b = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + life)
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            )
            if not ca:
                import ipaddress

                b = b.add_extension(
                    x509.SubjectAlternativeName(
                        [
                            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                            x509.DNSName("localhost"),
                        ]
                    ),
                    critical=False,
                )
            return b.sign(signer, hashes.SHA256())

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = cert("claimgraph dev CA", ca_key, "claimgraph dev CA", ca_key, True)
        key = ec.generate_private_key(ec.SECP256R1())
        server = cert("127.0.0.1", key, "claimgraph dev CA", ca_key, False)
        pem = serialization.Encoding.PEM
        tls.mkdir(parents=True, exist_ok=True)
        key_pem = key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        keystore.write_bytes(key_pem + server.public_bytes(pem) + ca_cert.public_bytes(pem))
        keystore.chmod(0o600)
        self.ca_path.write_bytes(ca_cert.public_bytes(pem))
        return keystore

    def _format_command(self, java: str, libs: Path) -> list[str] | None:
        if self._formatted_cluster_id() is not None:
            return None
        return [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:-UsePerfData",
            "-XX:TieredStopAtLevel=1",
            f"-Dkafka.logs.dir={self.data_dir}",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            "-cp",
            f"{libs}/*",
            "kafka.tools.StorageTool",
            "format",
            "--ignore-formatted",
            "-t",
            self.cluster_id,
            "-c",
            str(self.properties_path),
        ]

    def _format(self, java: str, libs: Path) -> None:
        cmd = self._format_command(java, libs)
        if cmd is None:
            return
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BrokerStartError(
                f"formatting {self.kafka_data} failed (exit {done.returncode})\n"
                f"{_tail_text(done.stdout + done.stderr, 30)}"
            )


class KafkaCluster:
    """``size`` KRaft nodes (each broker + controller, all voters) for fault tests.

    Defaults: replication factor 3 and ``min.insync.replicas=2`` for topics, consumer offsets
    and transaction state, so one node can be down while ``acks=all`` writes and transactions
    still succeed. Node ``i`` (1-based, its ``node.id``) lives in ``data_dir/node-<i>``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        heap: str = CLUSTER_HEAP,
        libs: Path | None = None,
        java: str | None = None,
        die_with_parent: bool = True,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one node")
        self.data_dir = Path(data_dir).resolve()
        min_isr = 2 if size >= 3 else 1
        props = {
            **_durability(min(size, 3), min_isr),
            **(properties or {}),
        }
        ports = self._saved_ports(size) or _free_ports(2 * size)
        voters = ",".join(f"{i + 1}@127.0.0.1:{ports[2 * i + 1]}" for i in range(size))
        cluster_id = self._saved_cluster_id(size) or _random_cluster_id()
        self.nodes: list[KafkaBroker] = [
            KafkaBroker(
                self.data_dir / f"node-{i + 1}",
                node_id=i + 1,
                port=ports[2 * i],
                controller_port=ports[2 * i + 1],
                voters=voters,
                cluster_id=cluster_id,
                properties=props,
                heap=heap,
                libs=libs,
                java=java,
                die_with_parent=die_with_parent,
            )
            for i in range(size)
        ]

    @property
    def bootstrap(self) -> str:
        """Every node's address, comma-separated."""
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def cluster_id(self) -> str:
        return self.nodes[0].cluster_id

    def node(self, node_id: int) -> KafkaBroker:
        """The node with this ``node.id`` (1-based)."""
        if not 1 <= node_id <= len(self.nodes):
            raise KeyError(f"no node {node_id}; nodes are 1..{len(self.nodes)}")
        return self.nodes[node_id - 1]

    def __repr__(self) -> str:
        return f"KafkaCluster({self.nodes!r})"

    def start(
        self, timeout: float = DEFAULT_START_TIMEOUT, *, detach: bool = False
    ) -> KafkaCluster:
        """Format new nodes (in parallel), launch every JVM, wait until all are live brokers.

        ``detach``: the nodes outlive this process (for the CLI's ``cluster --detach``).
        """
        _kafka_client_errors()
        to_start = [n for n in self.nodes if not n.running]
        if to_start:
            java = to_start[0]._java or find_java()
            libs = to_start[0]._libs or ensure_libs()
            formats: list[tuple[KafkaBroker, subprocess.Popen[str]]] = []
            for n in to_start:
                n._java, n._libs = java, libs
                n.data_dir.mkdir(parents=True, exist_ok=True)
                n._write_properties()
                cmd = n._format_command(java, libs)
                if cmd is not None:
                    proc = subprocess.Popen(
                        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                    )
                    formats.append((n, proc))
            for n, proc in formats:
                out, _ = proc.communicate()
                if proc.returncode != 0:
                    raise BrokerStartError(
                        f"formatting {n.kafka_data} failed (exit {proc.returncode})\n"
                        f"{_tail_text(out, 30)}"
                    )
        deadline = time.monotonic() + timeout
        try:
            for n in to_start:
                n.launch(detach=detach)
            for n in self.nodes:
                n.wait_ready(max(1.0, deadline - time.monotonic()))
        except BaseException:
            for n in to_start:  # those we started; nodes already running stay up
                n._send(signal.SIGTERM)
            for n in to_start:
                n.stop(grace=10)
            raise
        return self

    def stop(self, grace: float = DEFAULT_STOP_GRACE) -> None:
        """Stop every node: SIGTERM to all at once, SIGKILL to any left after ``grace``.

        All at once, because a node stopped last, alone, has no controller quorum to grant
        its controlled shutdown and would hang until killed.
        """
        running = [n for n in self.nodes if n.running]
        for n in running:
            n._send(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for n in running:
            n.stop(max(0.0, deadline - time.monotonic()))

    def stop_node(self, node_id: int, grace: float = DEFAULT_STOP_GRACE) -> None:
        self.node(node_id).stop(grace)

    def kill_node(self, node_id: int) -> None:
        self.node(node_id).kill()

    def restart_node(self, node_id: int, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """(Re)start one node with its data and ports and wait until it is a live broker."""
        self.node(node_id).restart(timeout)

    def start_node(self, node_id: int, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self.node(node_id).start(timeout)

    def running_nodes(self) -> list[int]:
        return [n.node_id for n in self.nodes if n.running]

    def partition_leader(self, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
        """The ``node.id`` leading ``topic``/``partition`` now."""
        errors: tuple[type[BaseException], ...] = (*_kafka_client_errors(), KeyError)
        admin = _admin(self.bootstrap)
        deadline = time.monotonic() + timeout
        while True:
            try:
                md = admin.list_topics(topic=topic, timeout=2)
                p = md.topics[topic].partitions.get(partition)
                if p is not None and p.leader >= 0:
                    return int(p.leader)
            except errors:
                pass
            if time.monotonic() >= deadline:
                raise BrokerError(f"no leader for {topic}[{partition}] after {timeout:.0f}s")
            time.sleep(0.2)

    def wait_fully_replicated(self, timeout: float = 90.0) -> None:
        """Until every node is live and every partition (internal ones too) has its full ISR."""
        errors = _kafka_client_errors()
        admin = _admin(self.bootstrap)
        deadline = time.monotonic() + timeout
        want = {n.node_id for n in self.nodes}
        last = "no answer yet"
        while True:
            try:
                md = admin.list_topics(timeout=2)
                lagging = [
                    f"{t.topic}[{p.id}] isr={sorted(p.isrs)} replicas={sorted(p.replicas)}"
                    for t in md.topics.values()
                    for p in t.partitions.values()
                    if set(p.isrs) != set(p.replicas) or p.leader < 0
                ]
                if set(md.brokers) == want and not lagging:
                    return
                last = f"brokers {sorted(md.brokers)}; under-replicated: {lagging[:5]}"
            except errors as exc:
                last = str(exc)
            if time.monotonic() >= deadline:
                raise BrokerError(f"cluster not fully replicated after {timeout:.0f}s: {last}")
            time.sleep(0.3)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _saved_ports(self, size: int) -> list[int] | None:
        ports: list[int] = []
        for i in range(size):
            state = _read_json(self.data_dir / f"node-{i + 1}" / "node.json")
            p, c = state.get("port"), state.get("controller_port")
            if not (isinstance(p, int) and isinstance(c, int) and _port_free(p) and _port_free(c)):
                return None
            ports += [p, c]
        return ports

    def _saved_cluster_id(self, size: int) -> str | None:
        for i in range(size):
            cid = _read_json(self.data_dir / f"node-{i + 1}" / "node.json").get("cluster_id")
            if isinstance(cid, str):
                return cid
        return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ------------------------------------------------------------------------------------ CLI


def _node_dirs(data_dir: Path) -> list[Path]:
    """A single node's directory, or a cluster's node-<i> directories."""
    if (data_dir / "node.json").exists():
        return [data_dir]
    return sorted(
        (p.parent for p in data_dir.glob("node-*/node.json")),
        key=lambda p: int(p.name.split("-", 1)[1]) if p.name.split("-", 1)[1].isdigit() else 0,
    )


def _existing_node(node_dir: Path) -> KafkaBroker:
    state = _read_json(node_dir / "node.json")
    node = KafkaBroker(
        node_dir,
        node_id=int(state.get("node_id", 1)),
        port=int(state.get("port", 0)) or None,
        controller_port=int(state.get("controller_port", 0)) or None,
    )
    node.adopt()
    return node


def _serve(started: Sequence[KafkaBroker], stop_all: Any) -> int:
    """Wait in the foreground until Ctrl-C/SIGTERM (then stop cleanly) or a node dies."""

    def _terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)  # even if started with SIGINT ignored (`cmd &`)
    try:
        while True:
            for n in started:
                if not n.running:
                    print(
                        f"Kafka node {n.node_id} exited on its own\n{n.log_tail(20)}",
                        file=sys.stderr,
                    )
                    stop_all()
                    return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("\nstopping ...", file=sys.stderr)
        stop_all()
        print("stopped", file=sys.stderr)
        return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    libs = fetch()
    print(libs)
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    if (data_dir / "node.json").exists():
        existing = _existing_node(data_dir)
        if existing.running:
            print(
                f"already running at {existing.bootstrap} (pid {existing.pid}); "
                f"logs: {existing.log_path}",
                file=sys.stderr,
            )
            return 1
    if args.port and not _port_free(args.port):
        print(
            f"port {args.port} is in use (another broker?): stop it, or pass --port 0 "
            "for a free port",
            file=sys.stderr,
        )
        return 1
    users: dict[str, str] = {}
    for item in args.sasl_user:
        user, sep, password = item.partition(":")
        if not sep or not user:
            print(f"--sasl-user {item!r}: expected USER:PASSWORD", file=sys.stderr)
            return 2
        users[user] = password
    libs = fetch(quiet=False)
    broker = KafkaBroker(
        data_dir,
        port=args.port or None,
        heap=args.heap,
        libs=libs,
        die_with_parent=not args.detach,
        sasl_users=users,
        tls=args.tls,
    )
    t0 = time.monotonic()
    _kafka_client_errors()
    broker.launch(detach=args.detach)
    try:
        broker.wait_ready(args.timeout)
    except BaseException:
        broker.stop(grace=10)
        raise
    took = time.monotonic() - t0
    print(f"Kafka {kafka_version()} ready in {took:.1f}s: bootstrap.servers={broker.bootstrap}")
    if users or args.tls:
        print(f"  security.protocol={broker.security_protocol}", end="")
        print(f" sasl.mechanism=PLAIN (users: {', '.join(users)})" if users else "", end="")
        print(f" ssl.ca.location={broker.ca_path}" if args.tls else "")
    print(f"  data and logs: {broker.data_dir} (server.log, console.log)")
    if args.detach:
        print(f"  pid {broker.pid}; stop it with: python tools/kafka_broker.py stop")
        return 0
    print("  Ctrl-C stops it", flush=True)
    return _serve([broker], broker.stop)


def _cmd_cluster(args: argparse.Namespace) -> int:
    running = [d.name for d in _node_dirs(Path(args.data_dir)) if _existing_node(d).running]
    if running:
        print(f"{running} already running in {args.data_dir}", file=sys.stderr)
        return 1
    libs = fetch(quiet=False)
    cluster = KafkaCluster(
        args.data_dir, size=args.nodes, heap=args.heap, libs=libs, die_with_parent=not args.detach
    )
    t0 = time.monotonic()
    cluster.start(args.timeout, detach=args.detach)
    took = time.monotonic() - t0
    print(
        f"Kafka {kafka_version()} cluster of {len(cluster.nodes)} ready in {took:.1f}s: "
        f"bootstrap.servers={cluster.bootstrap}"
    )
    for n in cluster.nodes:
        print(f"  node {n.node_id}: {n.bootstrap} pid {n.pid}, logs {n.log_path}")
    if args.detach:
        print(f"  stop it with: python tools/kafka_broker.py stop --data-dir {cluster.data_dir}")
        return 0
    print("  Ctrl-C stops it", flush=True)
    return _serve(cluster.nodes, cluster.stop)


def _cmd_stop(args: argparse.Namespace) -> int:
    nodes = [n for n in map(_existing_node, _node_dirs(Path(args.data_dir))) if n.running]
    for n in nodes:  # all at once: a cluster's last node alone would wait for a quorum
        print(f"stopping node {n.node_id} (pid {n.pid}) ...", file=sys.stderr)
        n._send(signal.SIGTERM)
    deadline = time.monotonic() + args.grace
    for n in nodes:
        n.stop(max(0.0, deadline - time.monotonic()))
    print(f"stopped {len(nodes)} node(s)" if nodes else f"nothing running in {args.data_dir}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    dirs = _node_dirs(Path(args.data_dir))
    if not dirs:
        print(f"no Kafka node in {args.data_dir}")
        return 1
    healthy = True
    for d in dirs:
        node = _existing_node(d)
        if not node.running:
            print(f"node {node.node_id}: stopped ({node.data_dir})")
            healthy = False
            continue
        try:
            node.wait_ready(timeout=5)
            answer = "serving metadata"
        except BrokerError as exc:
            answer = f"NOT answering: {str(exc).splitlines()[0]}"
            healthy = False
        print(f"node {node.node_id}: running, pid {node.pid}, {node.bootstrap}, {answer}")
        print(f"  logs: {node.log_path}")
    return 0 if healthy else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kafka_broker.py",
        description="A development/CI Apache Kafka (KRaft) broker from Maven Central jars.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fetch", help="download the broker jars into the user cache (once)")
    p.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("start", help="run one node (broker+controller) until Ctrl-C")
    p.add_argument("--data-dir", default="./kafka-data")
    p.add_argument(
        "--port", type=int, default=9092, help="client port (default 9092; 0: a free one)"
    )
    p.add_argument(
        "--sasl-user",
        action="append",
        default=[],
        metavar="USER:PASSWORD",
        help="serve SASL_PLAINTEXT with mechanism PLAIN for these users (repeatable)",
    )
    p.add_argument(
        "--tls",
        action="store_true",
        help="serve TLS (SSL, or SASL_SSL with --sasl-user): a dev CA in DATA/tls/ca.pem",
    )
    p.add_argument("--heap", default=DEFAULT_HEAP)
    p.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    p.add_argument("--detach", action="store_true", help="leave it running in the background")
    p.set_defaults(func=_cmd_start)

    p = sub.add_parser("cluster", help="run a 3-node cluster (RF 3, min ISR 2) until Ctrl-C")
    p.add_argument("--data-dir", default="./kafka-cluster-data")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--heap", default=CLUSTER_HEAP)
    p.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    p.add_argument("--detach", action="store_true", help="leave it running in the background")
    p.set_defaults(func=_cmd_cluster)

    for name, text in (("stop", "stop the node(s) of a data dir"), ("status", "are they up?")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--data-dir", default="./kafka-data")
        if name == "stop":
            p.add_argument("--grace", type=float, default=DEFAULT_STOP_GRACE)
        p.set_defaults(func=_cmd_stop if name == "stop" else _cmd_status)

    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokerError as exc:
        print(f"kafka_broker: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
