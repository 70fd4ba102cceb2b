"""shmipam under the runtime Kubernetes uses: containerd's CRI, driven as the kubelet drives it.

A private, real containerd (containerd_harness.py: Debian's containerd 1.6, its own config,
root, state, socket and CNI directories, runc through tests/support/runc_without_rlimits, a
pause image made and imported locally) runs pod sandboxes whose network is Debian's bridge
plugin with shmipam as its IPAM. The suite's own CRI client (cri_client.py, runtime.v1 over
gRPC) sends RunPodSandbox with the kubelet's metadata, labels and annotations, then
PodSandboxStatus, StopPodSandbox, RemovePodSandbox and ListPodSandbox. Nothing is fed to the
plugin by the test: what it gets is what containerd passes, and a recorder in front of it
writes that down (test_what_containerd_passes_to_the_ipam_plugin checks it, in both classes,
against docs/pools.md, "What each runtime passes").

Three classes, one containerd each (started once; it takes well under a second): RangesMode
(a `subnet`), PoolMode (a poolsDir of SpiderIPPool and Namespace objects) and PodFactsFromApi
(pool mode reading the pods' labels and owners from the API server's stand-in). Every case has
its own network: conflist, bridge, subnet (10.140.N.0/24 in ranges mode, 10.141.N.0/24 in pool
mode: used nowhere else in the project), runDir and dataDir.

Run by ctest (tests/CMakeLists.txt), which passes the built binaries by environment:
SHMIPAM_PLUGIN_PATH, SHMIPAM_KUBE_HELPER_PATH, SHMIPAMCTL_PATH, RUNC_WITHOUT_RLIMITS_PATH, CRI_PAUSE_PATH and
CRI_PROTO_DIR (where protoc wrote runtime_v1_pb2.py). Needs root: otherwise it exits 77
(ctest: skipped) with a message, and in CI (CI=true) it fails. Anything else missing fails.

    /usr/bin/python3 tests/cri/test_containerd_cri.py [-v] [RangesMode|PoolMode|PodFactsFromApi[.test_name]]
"""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
import uuid


def _env(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the suite through ctest "
                           "(tests/CMakeLists.txt passes the built binaries)")
    return value


sys.path.insert(0, _env("CRI_PROTO_DIR"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))

import grpc  # noqa: E402  (Debian's python3-grpcio)

import kube_api_standin  # noqa: E402  (tests/support: the API server's stand-in)
import oci_image  # noqa: E402
from containerd_harness import Containerd  # noqa: E402

PLUGIN = _env("SHMIPAM_PLUGIN_PATH")
SHMIPAMCTL = _env("SHMIPAMCTL_PATH")
RUNC_WRAPPER = _env("RUNC_WITHOUT_RLIMITS_PATH")
PAUSE = _env("CRI_PAUSE_PATH")
KUBE_HELPER = _env("SHMIPAM_KUBE_HELPER_PATH")
IN_CI = os.environ.get("CI") == "true"

# The pod annotations shmipam reads (docs/pools.md, docs/fixed-ips.md).
IPPOOL = "ipam.spidernet.io/ippool"
NS_DEFAULT_V4 = "ipam.spidernet.io/default-ipv4-ippool"
STATIC_IP = "ipam.shmipam.io/static-ip"

# What containerd 1.6 passes (docs/pools.md, "What each runtime passes").
CNI_ENV = {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH", "CNI_ARGS"}
CNI_ARGS_KEYS = {"IgnoreUnknown", "K8S_POD_NAMESPACE", "K8S_POD_NAME",
                 "K8S_POD_INFRA_CONTAINER_ID", "K8S_POD_UID"}
ANNOTATIONS_CAPABILITY = "io.kubernetes.cri.pod-annotations"

# The Kubernetes helper's budget (ipam.kubernetes.budgetMs, and its connectTimeoutMs) in
# PodFactsFromApi: no case is about the budget (the API server down refuses at once), and a TLS
# exchange with the stand-in, in this process beside containerd and its sandboxes on a loaded
# machine, must not fail for it.
API_BUDGET_MS = 10000
# PodFactsFromApi's node, and how often its StatefulSet claims are rechecked; a recheck runs in
# the background after an answer and is waited for this long.
NODE = "node-a"
RECHECK_S = 1
RECHECK_WAIT_S = 60


def require_root():
    if os.geteuid() == 0:
        return None
    if IN_CI:
        raise RuntimeError("the containerd CRI suite needs root in CI")
    return "not root: the containerd CRI suite runs containerd, runc and network namespaces"


def ctl(*args):
    r = subprocess.run([SHMIPAMCTL, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


class Call:
    """One call of the IPAM plugin as the recorder wrote it down."""

    def __init__(self, base):
        self.base = base
        with open(base + ".env", "rb") as f:
            pairs = [kv.decode(errors="replace").split("=", 1)
                     for kv in f.read().split(b"\0") if b"=" in kv]
        self.env = {k: v for k, v in pairs if k.startswith("CNI_")}
        self.raw_env = "\n".join("=".join(p) for p in pairs)
        with open(base + ".stdin", errors="replace") as f:
            self.raw_stdin = f.read()
        self.stdin = json.loads(self.raw_stdin)
        self.rc = self._read(".rc")
        self.out = self._read(".out")
        self.command = self.env.get("CNI_COMMAND")
        self.container = self.env.get("CNI_CONTAINERID")
        self.cni_args = dict(kv.split("=", 1) for kv in self.env.get("CNI_ARGS", "").split(";")
                             if "=" in kv)

    def _read(self, suffix):
        try:
            with open(self.base + suffix) as f:
                return f.read().strip()
        except OSError:
            return None

    def answer(self):
        return json.loads(self.out) if self.out else None

    def __repr__(self):
        return f"{self.command} {self.container[:12]} netns={self.env.get('CNI_NETNS')!r}"


class Network:
    """One case's network: conflist, bridge, subnet, runDir and dataDir; in pool mode its
    poolsDir."""

    def __init__(self, rt, mode, index, case, kubernetes=None, ipam_extra=None):
        self.rt = rt
        self.mode = mode
        self.dir = f"{rt.dir}/cases/{index:02d}-{case}"
        self.run_dir = f"{self.dir}/run"
        self.data_dir = f"{self.dir}/data"
        self.rec_dir = f"{self.dir}/calls"
        tag = f"{os.getpid() % 100000}{mode[0]}{index}"
        self.name = f"shmcri{tag}"
        self.bridge = f"shmcri{tag}"
        third = 140 if mode == "ranges" else 141
        self.prefix = f"10.{third}.{index}"
        ipam = {"type": "shmipam", "runDir": self.run_dir, "dataDir": self.data_dir}
        if mode == "ranges":
            ipam["subnet"] = f"{self.prefix}.0/24"
            ipam["routes"] = [{"dst": "0.0.0.0/0"}]
        else:
            ipam["poolsDir"] = f"{self.dir}/pools"
            self.write_pools()
        if kubernetes:
            ipam["kubernetes"] = kubernetes
        ipam.update(ipam_extra or {})
        self.ipam = ipam
        self.conflist = {
            "cniVersion": "1.0.0",
            "name": self.name,
            "plugins": [{
                "type": "bridge",
                "bridge": self.bridge,
                "isGateway": True,
                "ipMasq": False,
                # containerd fills runtimeConfig with what the plugin declares it can take.
                "capabilities": {ANNOTATIONS_CAPABILITY: True},
                "ipam": ipam,
            }],
        }
        rt.use_network(self.conflist, self.rec_dir)

    # Pool mode: four pools in one subnet (one bridge, one gateway), disjoint addresses; the
    # db pool is a second cluster default for pods labelled app=db (podAffinity sorts it first
    # for them and filters it out for the others).
    POOLS = {"cluster-default": (10, 49), "annotated": (100, 119), "team-pool": (150, 169),
             "db-pool": (200, 219)}

    def write_pools(self):
        items = []
        for name, (first, last) in self.POOLS.items():
            spec = {"subnet": f"{self.prefix}.0/24", "gateway": f"{self.prefix}.1",
                    "ips": [f"{self.prefix}.{first}-{self.prefix}.{last}"]}
            if name in ("cluster-default", "db-pool"):
                spec["default"] = True
            if name == "db-pool":
                spec["podAffinity"] = {"matchLabels": {"app": "db"}}
            items.append({"apiVersion": "spiderpool.spidernet.io/v2beta1",
                          "kind": "SpiderIPPool", "metadata": {"name": name}, "spec": spec})
        items.append({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "team",
                                   "annotations": {NS_DEFAULT_V4: '["team-pool"]'}}})
        os.makedirs(f"{self.dir}/pools")
        with open(f"{self.dir}/pools/objects.json", "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f, indent=2)

    def pool_of(self, address):
        last = int(address.split(".")[3])
        for name, (first, end) in self.POOLS.items():
            if first <= last <= end:
                return name
        return None

    # ---- the plugin's state, through shmipamctl --------------------------------------------

    def states(self):
        """Every state under runDir (a network, or pool/<name>), with its in-use count."""
        if not os.path.isdir(self.run_dir):
            return {}
        rc, out = ctl("--run-dir", self.run_dir, "ls", "--json")
        assert rc == 0, out
        return {s["network"]: s["inUse"] for s in json.loads(out)}

    def held(self):
        """{container id: [addresses]} of every attachment holding an address, in any state."""
        held = {}
        for state in self.states():
            rc, out = ctl("--run-dir", self.run_dir, "dump", state, "--state", "allocated",
                          "--json")
            assert rc == 0, out
            for a in json.loads(out).get("allocations", []):
                held.setdefault(a.get("containerID", "?"), []).append(
                    a["address"].split("/")[0])
        return held

    def in_use(self):
        return sum(self.states().values())

    def verify(self):
        """{state: (exit code, output)} of `shmipamctl verify` for every state."""
        return {s: ctl("--run-dir", self.run_dir, "verify", s) for s in self.states()}

    # ---- what containerd passed ------------------------------------------------------------

    def calls(self):
        if not os.path.isdir(self.rec_dir):
            return []
        bases = sorted({f.rsplit(".", 1)[0] for f in os.listdir(self.rec_dir)
                        if f.endswith(".env")})
        return [Call(f"{self.rec_dir}/{b}") for b in bases]

    def delete_bridge(self):
        subprocess.run(["/usr/sbin/ip", "link", "del", self.bridge], capture_output=True)


class CriSuite(unittest.TestCase):
    """One containerd for the class; one network per case."""

    mode = None
    rt = None
    cases = 0

    @staticmethod
    def start_containerd(tag):
        """A private containerd, started, with the pause image imported."""
        rt = Containerd(PLUGIN, RUNC_WRAPPER, tag)
        try:
            archive = f"{rt.dir}/pause.tar"
            oci_image.write_image(PAUSE, "localhost/shmipam-test/pause:1", archive)
            started = time.monotonic()
            version = rt.start()
            rt.import_image(archive)
            print(f"\n{tag}: {version.runtime_name} {version.runtime_version} (CRI "
                  f"{version.runtime_api_version}) up and image imported in "
                  f"{time.monotonic() - started:.2f} s", file=sys.stderr)
        except BaseException:
            rt.destroy()
            raise
        return rt

    @staticmethod
    def keep_logs(name):
        logs = os.environ.get("CRI_LOG_DIR")
        return f"{logs}/{name}" if logs else None

    @classmethod
    def setUpClass(cls):
        why = require_root()
        if why:
            raise unittest.SkipTest(why)
        cls.rt = cls.start_containerd(cls.mode)

    @classmethod
    def tearDownClass(cls):
        if cls.rt is not None:
            cls.rt.destroy(keep_log_in=cls.keep_logs(cls.__name__))

    def kubernetes(self):
        """The ipam config's `kubernetes` for the case's network (none here)."""
        return None

    def ipam_extra(self):
        """More of the case's network's ipam config (none here)."""
        return None

    def setUp(self):
        CriSuite.cases += 1
        self.own = getattr(getattr(self, self._testMethodName), "own_containerd", False)
        if self.own:
            self.rt = self.start_containerd(f"{self.mode}-own")
        self.net = Network(self.rt, self.mode, CriSuite.cases, self._testMethodName[5:30],
                           self.kubernetes(), self.ipam_extra())

    def tearDown(self):
        try:
            if self.rt.running():
                self.rt.wait_plugins_done()
                errors = self.rt.remove_all_sandboxes()
                self.assertEqual(errors, [], "Stop/Remove of the case's sandboxes")
        finally:
            self.net.delete_bridge()
            if self.own:
                self.rt.destroy(keep_log_in=self.keep_logs(self.id()))

    # ---- the kubelet's side ----------------------------------------------------------------

    def run_pod(self, name, namespace="default", labels=None, annotations=None, uid=None):
        """RunPodSandbox as the kubelet sends it for a pod: the pod's labels plus the three the
        kubelet adds, the pod's annotations plus the two the kubelet sets on every pod."""
        uid = uid or str(uuid.uuid4())
        pod_labels = dict(labels or {})
        pod_labels.update({"io.kubernetes.pod.name": name,
                           "io.kubernetes.pod.namespace": namespace,
                           "io.kubernetes.pod.uid": uid})
        pod_annotations = {"kubernetes.io/config.seen": "2026-11-26T00:00:00.000000000Z",
                           "kubernetes.io/config.source": "api"}
        pod_annotations.update(annotations or {})
        return self.rt.client.run_pod_sandbox(name, namespace, uid, attempt=0,
                                              labels=pod_labels, annotations=pod_annotations)

    def address(self, sandbox):
        ips = self.rt.client.sandbox_ips(sandbox)
        self.assertEqual(len(ips), 1, f"PodSandboxStatus of {sandbox}: {ips}")
        return ips[0]

    def pings(self, sandbox, address):
        """Ping from inside the sandbox's network namespace (its pause process's)."""
        pid = self.rt.client.sandbox_pid(sandbox)
        r = subprocess.run(["/usr/bin/nsenter", f"--net=/proc/{pid}/ns/net", "/usr/bin/ping",
                            "-c", "1", "-W", "2", address],
                           capture_output=True, text=True, timeout=30)
        return r.returncode == 0

    def assert_nothing_in_use_and_clean(self):
        self.assertEqual(self.net.held(), {}, "addresses still held")
        self.assertEqual(self.net.in_use(), 0, f"in use: {self.net.states()}")
        for state, (rc, out) in self.net.verify().items():
            self.assertEqual(rc, 0, f"shmipamctl verify {state}: {out}")


class CommonCases:
    """The cases that hold in ranges mode and in pool mode (with its cluster default pool)."""

    def test_what_containerd_passes_to_the_ipam_plugin(self):
        marker = "label-" + uuid.uuid4().hex
        annotations = {"example.com/note": "annotation-" + uuid.uuid4().hex}
        sandbox = self.run_pod("facts-0", labels={"app": "facts", "marker": marker},
                               annotations=annotations)
        self.rt.client.stop_pod_sandbox(sandbox)
        self.rt.client.remove_pod_sandbox(sandbox)
        calls = self.net.calls()

        self.assertEqual([c.command for c in calls], ["ADD", "DEL", "DEL"],
                         "ADD and DEL only; Stop and Remove each send a DEL")
        add, stop_del, remove_del = calls
        for c in calls:
            self.assertEqual(set(c.env), CNI_ENV, c)
            self.assertEqual(c.container, sandbox, c)
            self.assertEqual(c.env["CNI_IFNAME"], "eth0")
            self.assertEqual(c.env["CNI_PATH"], self.rt.bin_dir)
            self.assertEqual(set(c.cni_args), CNI_ARGS_KEYS, c.env["CNI_ARGS"])
            self.assertEqual(c.cni_args["IgnoreUnknown"], "1")
            self.assertEqual(c.cni_args["K8S_POD_NAMESPACE"], "default")
            self.assertEqual(c.cni_args["K8S_POD_NAME"], "facts-0")
            self.assertEqual(c.cni_args["K8S_POD_INFRA_CONTAINER_ID"], sandbox)
            self.assertTrue(c.cni_args["K8S_POD_UID"], "the pod's uid")
            # runtimeConfig: the pod's annotations (the kubelet's among them), nothing else.
            self.assertEqual(set(c.stdin["runtimeConfig"]), {ANNOTATIONS_CAPABILITY}, c)
            sent = c.stdin["runtimeConfig"][ANNOTATIONS_CAPABILITY]
            for k, v in annotations.items():
                self.assertEqual(sent.get(k), v, sent)
            self.assertIn("kubernetes.io/config.source", sent)
            self.assertNotIn("args", c.stdin, "containerd never sends args (no labels)")
            self.assertEqual(c.stdin["ipam"], self.net.ipam)
            # Pod labels: nowhere, neither in the environment nor on stdin.
            self.assertNotIn(marker, c.raw_env)
            self.assertNotIn(marker, c.raw_stdin)
        self.assertTrue(add.env["CNI_NETNS"], "ADD names the sandbox's network namespace")
        self.assertTrue(stop_del.env["CNI_NETNS"], "Stop's DEL names the namespace")
        self.assertEqual(remove_del.env["CNI_NETNS"], "", "Remove's DEL: the namespace is gone")
        keys = sorted(add.stdin)
        self.assertEqual(set(keys), {"cniVersion", "name", "type", "bridge", "isGateway",
                                     "ipMasq", "capabilities", "ipam", "runtimeConfig"})
        self.assertIn("prevResult", stop_del.stdin, "Stop's DEL carries the ADD's result")
        self.assertNotIn("prevResult", remove_del.stdin, "Remove's DEL: the cached result is gone")
        self.assertEqual(add.rc, "0")
        self.assertEqual(stop_del.rc, "0")
        self.assertEqual(remove_del.rc, "0")
        print(f"\n  containerd passed: env {sorted(add.env)}; CNI_ARGS keys "
              f"{sorted(add.cni_args)}; stdin ADD {keys}, Stop's DEL "
              f"{sorted(stop_del.stdin)}, Remove's DEL {sorted(remove_del.stdin)}; "
              f"runtimeConfig {sorted(add.stdin['runtimeConfig'])} with "
              f"{sorted(add.stdin['runtimeConfig'][ANNOTATIONS_CAPABILITY])}; "
              f"CNI_NETNS ADD/Stop/Remove set: {bool(add.env['CNI_NETNS'])}/"
              f"{bool(stop_del.env['CNI_NETNS'])}/{bool(remove_del.env['CNI_NETNS'])}",
              file=sys.stderr)
        self.assert_nothing_in_use_and_clean()

    def test_sandboxes_get_distinct_addresses_that_reach_each_other(self):
        sandboxes = [self.run_pod(f"web-{i}") for i in range(3)]
        addresses = [self.address(s) for s in sandboxes]
        self.assertEqual(len(set(addresses)), 3, addresses)
        held = self.net.held()
        self.assertEqual(set(held), set(sandboxes), "shmipam holds one address per sandbox")
        for sandbox, address in zip(sandboxes, addresses):
            self.assertTrue(address.startswith(self.net.prefix + "."), address)
            self.assertEqual(held[sandbox], [address],
                             "PodSandboxStatus reports the address shmipam holds")
        self.assertTrue(self.pings(sandboxes[0], addresses[1]))
        self.assertTrue(self.pings(sandboxes[2], addresses[0]))
        self.assertTrue(self.pings(sandboxes[1], addresses[2]))
        for state, (rc, out) in self.net.verify().items():
            self.assertEqual(rc, 0, f"verify {state}: {out}")

    def test_stop_and_remove_free_every_address_with_two_dels_each(self):
        sandboxes = [self.run_pod(f"job-{i}") for i in range(4)]
        self.assertEqual(self.net.in_use(), 4)
        for s in sandboxes:
            self.rt.client.stop_pod_sandbox(s)
        self.assertEqual(self.net.held(), {}, "StopPodSandbox's DEL frees the address")
        for s in sandboxes:
            self.rt.client.remove_pod_sandbox(s)
        self.assertEqual(self.rt.client.list_pod_sandbox(), [])
        dels = {}
        for c in self.net.calls():
            if c.command == "DEL":
                dels.setdefault(c.container, []).append(c)
                self.assertEqual(c.rc, "0", c.out)
        self.assertEqual(set(dels), set(sandboxes))
        for s in sandboxes:
            self.assertEqual(len(dels[s]), 2, dels[s])
        self.assert_nothing_in_use_and_clean()

    def test_containerd_killed_during_8_concurrent_run_pod_sandbox(self):
        # On a containerd of its own: a containerd killed mid-way can leave its snapshotter
        # unable to make another sandbox (1.6.20's native snapshotter, killed between moving a
        # new snapshot's directory into place and committing its id, gives the next snapshot
        # the same id: "failed to rename ... file exists"), which is containerd's, not the
        # plugin's, and must not fail the cases after this one.
        outcome = {}
        client = self.rt.client

        def run(i):
            try:
                outcome[i] = self.run_pod(f"storm-{i}")
            except grpc.RpcError as e:
                outcome[i] = e.code()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        # SIGKILL once the first ADD has reached the IPAM plugin.
        deadline = time.monotonic() + 60
        while not any(f.endswith(".env") for f in os.listdir(self.net.rec_dir)):
            self.assertLess(time.monotonic(), deadline, "no ADD reached the plugin")
            time.sleep(0.002)
        self.rt.kill()
        for t in threads:
            t.join(timeout=120)
        client.close()
        # The plugins the killed containerd started run to their end (a kubelet's Stop comes
        # seconds later; a DEL that overtook an ADD not yet at its IPAM plugin would leave that
        # ADD's address to a GC, which containerd 1.6 never sends).
        self.rt.wait_plugins_done()
        self.rt.start()
        listed = self.rt.client.list_pod_sandbox()
        adds = {c.container for c in self.net.calls() if c.command == "ADD"}
        print(f"\n  killed containerd: {sum(isinstance(v, str) for v in outcome.values())} of 8 "
              f"RunPodSandbox answered before, {len(adds)} ADDs reached the plugin, "
              f"{len(listed)} sandboxes listed after the restart", file=sys.stderr)
        self.assertTrue(adds)
        self.assertLessEqual(adds, {s.id for s in listed},
                             "containerd lists every sandbox whose ADD ran")
        for s in listed:
            self.rt.client.stop_pod_sandbox(s.id)
            self.rt.client.remove_pod_sandbox(s.id)
        self.assertEqual(self.rt.client.list_pod_sandbox(), [])
        calls = self.net.calls()
        for container in adds:
            dels = [c for c in calls if c.command == "DEL" and c.container == container]
            self.assertEqual(len(dels), 2, f"{container}: {dels}")
        self.assert_nothing_in_use_and_clean()

    test_containerd_killed_during_8_concurrent_run_pod_sandbox.own_containerd = True

    def test_a_deployment_pod_asking_for_a_static_ip_is_refused_with_the_plugins_error(self):
        # A Deployment's pod: a generated name that does not outlive it (docs/fixed-ips.md).
        with self.assertRaises(grpc.RpcError) as refused:
            self.run_pod("web-5d8f7c9b6-x2kqp", annotations={STATIC_IP: "true"})
        details = refused.exception.details()
        calls = self.net.calls()
        self.assertEqual([c.command for c in calls], ["ADD", "DEL"],
                         "containerd follows the failed ADD with a DEL")
        adds = calls[:1]
        answer = adds[0].answer()
        self.assertEqual(adds[0].rc, "1")
        self.assertEqual(answer["code"], 120, answer)
        self.assertIn("asks for a static IP", answer["msg"])
        self.assertIn(f'plugin type="bridge" failed (add): {answer["msg"]}', details,
                      "containerd relays the plugin's message")
        self.assertEqual(self.rt.client.list_pod_sandbox(), [],
                         "the failed sandbox is not kept")
        self.assert_nothing_in_use_and_clean()


class RangesMode(CommonCases, CriSuite):
    mode = "ranges"


class PoolMode(CommonCases, CriSuite):
    mode = "pools"

    def held_in(self, pool):
        rc, out = ctl("--run-dir", self.net.run_dir, "dump", f"pool/{pool}", "--state",
                      "allocated", "--json")
        self.assertEqual(rc, 0, out)
        return {a["containerID"]: a["address"].split("/")[0]
                for a in json.loads(out).get("allocations", [])}

    def test_a_pool_named_by_the_pod_annotation(self):
        sandbox = self.run_pod("db-0", annotations={IPPOOL: '{"ipv4": ["annotated"]}'})
        address = self.address(sandbox)
        self.assertEqual(self.net.pool_of(address), "annotated", address)
        self.assertEqual(self.held_in("annotated"), {sandbox: address})
        plain = self.run_pod("plain-0")
        self.assertEqual(self.net.pool_of(self.address(plain)), "cluster-default")
        self.assertTrue(self.pings(plain, address))

    def test_a_namespace_default_pool(self):
        sandbox = self.run_pod("api-0", namespace="team")
        address = self.address(sandbox)
        self.assertEqual(self.net.pool_of(address), "team-pool", address)
        self.assertEqual(self.held_in("team-pool"), {sandbox: address})
        # The pod's annotation wins over its namespace's default.
        annotated = self.run_pod("api-1", namespace="team",
                                 annotations={IPPOOL: '{"ipv4": ["annotated"]}'})
        self.assertEqual(self.net.pool_of(self.address(annotated)), "annotated")

    def test_the_cluster_default_pool(self):
        sandboxes = [self.run_pod(f"app-{i}", namespace="elsewhere") for i in range(2)]
        addresses = [self.address(s) for s in sandboxes]
        for a in addresses:
            self.assertEqual(self.net.pool_of(a), "cluster-default", a)
        self.assertEqual(self.held_in("cluster-default"), dict(zip(sandboxes, addresses)))
        self.assertEqual(set(self.net.states()), {"pool/cluster-default"})


class PodFactsFromApi(CriSuite):
    """Pool mode with the pod facts no runtime passes read from the API server
    (docs/kubernetes.md): the API server's stand-in (tests/support/kube_api_standin.py: no
    kube-apiserver exists here) in this process on loopback, TLS and a bearer token, holding the
    pods the cases run and their StatefulSets; the plugin reads them through the real
    shmipam-kube. containerd passes what it always passes; the labels and owners reach the
    plugin only through the API."""

    mode = "pools"
    api = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.api_dir = f"{cls.rt.dir}/kube-api"
        cls.api_root = f"{cls.api_dir}/root"
        os.makedirs(cls.api_root)
        kube_api_standin.make_certificates(cls.api_dir)
        with open(f"{cls.api_root}/_token", "w") as f:
            f.write("cri-suite-token\n")
        cls.api = kube_api_standin.KubeApiStandin(cls.api_root, f"{cls.api_dir}/server.crt",
                                                  f"{cls.api_dir}/server.key")
        cls.api.start()
        with open(f"{cls.api_dir}/ca.crt", "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        cls.kubeconfig = f"{cls.api_dir}/kubeconfig"
        with open(cls.kubeconfig, "w") as f:
            f.write(KUBECONFIG.format(server=cls.api.url, ca=ca, token="cri-suite-token"))

    @classmethod
    def tearDownClass(cls):
        if cls.api is not None:
            cls.api.stop()
        super().tearDownClass()

    def kubernetes(self):
        return {"kubeconfig": self.kubeconfig, "helper": KUBE_HELPER, "budgetMs": API_BUDGET_MS,
                "connectTimeoutMs": API_BUDGET_MS}

    def ipam_extra(self):
        # The Node's name, as the DaemonSet's install writes it (the moved-pod check compares
        # it with a pod's spec.nodeName); StatefulSet rechecks every second.
        return {"nodeName": NODE, "statefulSetRecheckS": RECHECK_S}

    def put_pod(self, name, uid, labels=None, annotations=None, controller=None, node_name=None):
        owners = None
        if controller:
            kind, owner = controller
            api_version = "apps/v1"
            owners = [{"apiVersion": api_version, "kind": kind, "name": owner,
                       "uid": str(uuid.uuid4()), "controller": True}]
        kube_api_standin.put_object(self.api_root, kube_api_standin.pod_object(
            "default", name, uid, labels, annotations, owners, node_name))

    def put_statefulset(self, name, replicas, deleting=False):
        kube_api_standin.put_object(self.api_root, kube_api_standin.statefulset_object(
            "default", name, replicas, deleting=deleting))

    def requests(self):
        """The stand-in's request log: (method, path) of each request, in order."""
        try:
            with open(f"{self.api_root}/_requests.log") as f:
                return [tuple(line.split()[:2]) for line in f if line.strip()]
        except OSError:
            return []

    def run_known_pod(self, name, labels=None, annotations=None, controller=None):
        """A pod the API server knows, run as the kubelet runs it (the same labels)."""
        uid = str(uuid.uuid4())
        self.put_pod(name, uid, labels, annotations, controller)
        return self.run_pod(name, labels=labels, annotations=annotations, uid=uid)

    def claims(self):
        rc, out = ctl("--run-dir", self.net.run_dir, "claims", "pool/cluster-default", "--json")
        self.assertEqual(rc, 0, out)
        return {c["claim"]: c for c in json.loads(out)["claims"]}

    def stop_and_remove(self, sandbox):
        self.rt.client.stop_pod_sandbox(sandbox)
        self.rt.client.remove_pod_sandbox(sandbox)
        self.rt.wait_plugins_done()

    def test_a_pod_affinity_pool_by_the_labels_the_api_gives(self):
        db = self.run_known_pod("db-7f9c-abcde", labels={"app": "db"},
                                controller=("ReplicaSet", "db-7f9c"))
        self.assertEqual(self.net.pool_of(self.address(db)), "db-pool")
        web = self.run_known_pod("web-7f9c-abcde", labels={"app": "web"},
                                 controller=("ReplicaSet", "web-7f9c"))
        self.assertEqual(self.net.pool_of(self.address(web)), "cluster-default")
        for call in self.net.calls():
            self.assertNotIn("db-7f9c", json.dumps(call.stdin.get("args", {})),
                             "containerd passed no label: the plugin read the API")

    def test_a_statefulset_pod_stopped_removed_and_run_again_keeps_its_address(self):
        self.put_statefulset("web", 3)
        first = self.run_known_pod("web-0", labels={"app": "web"},
                                   controller=("StatefulSet", "web"))
        address = self.address(first)
        self.stop_and_remove(first)
        self.assertEqual(self.net.held(), {"sts:default/web-0/eth0": [address]},
                         "no sandbox holds it; its claim does")
        self.assertEqual(self.claims()["sts:default/web-0/eth0"]["policy"],
                         "while its StatefulSet wants it")
        again = self.run_known_pod("web-0", labels={"app": "web"},
                                   controller=("StatefulSet", "web"))
        self.assertEqual(self.address(again), address)

    def test_the_statefulset_scaled_below_the_pods_ordinal_frees_its_address(self):
        self.put_statefulset("web", 3)
        sandbox = self.run_known_pod("web-2", controller=("StatefulSet", "web"))
        self.assertIn("sts:default/web-2/eth0", self.claims())
        self.put_statefulset("web", 2)  # the controller lowers replicas, then deletes the pod
        self.stop_and_remove(sandbox)
        self.assertEqual(self.claims(), {})
        self.assert_nothing_in_use_and_clean()

    def test_a_statefulset_pod_that_moved_to_another_node_frees_its_address_here(self):
        self.put_statefulset("db", 3)
        uid = str(uuid.uuid4())
        self.put_pod("db-1", uid, controller=("StatefulSet", "db"), node_name=NODE)
        first = self.run_pod("db-1", uid=uid)
        self.address(first)
        self.stop_and_remove(first)
        self.assertIn("sts:default/db-1/eth0", self.claims(), "the pod is still on this node")
        # Drained: its StatefulSet re-creates it, and the scheduler puts it on another node.
        self.put_pod("db-1", str(uuid.uuid4()), controller=("StatefulSet", "db"),
                     node_name="node-b")
        time.sleep(RECHECK_S + 0.5)
        # Any answer of the node's after the period starts the recheck.
        self.run_known_pod("keeper-7f9c-abcde", controller=("ReplicaSet", "keeper-7f9c"))
        deadline = time.monotonic() + RECHECK_WAIT_S
        while self.claims() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.claims(), {}, "freed within one recheck")

    def test_a_deleted_or_deleting_statefulset_frees_its_pods_address_at_the_del(self):
        self.put_statefulset("cache", 3)
        going = self.run_known_pod("cache-0", controller=("StatefulSet", "cache"))
        gone = self.run_known_pod("cache-1", controller=("StatefulSet", "cache"))
        self.assertEqual(len(self.claims()), 2)
        # `kubectl delete statefulset cache`: first being deleted (deletionTimestamp set, the
        # pods deleted by the garbage collector), then gone.
        self.put_statefulset("cache", 3, deleting=True)
        self.stop_and_remove(going)
        self.assertNotIn("sts:default/cache-0/eth0", self.claims())
        kube_api_standin.remove_object(self.api_root, "apps/v1", "statefulsets", "default",
                                       "cache")
        self.stop_and_remove(gone)
        self.assertEqual(self.claims(), {})
        self.assert_nothing_in_use_and_clean()

    def test_the_api_requests_each_pod_costs(self):
        """docs/kubernetes.md's table, through the runtime: what the call's annotations
        decide is not asked; what they leave open is asked once."""
        start = len(self.requests())
        # An ippool annotation naming a pool without podAffinity: the pool is decided.
        self.run_pod("web-6c8d9-qwert", annotations={IPPOOL: '{"ipv4": ["annotated"]}'})
        self.assertEqual(self.requests()[start:], [], "nothing left to ask")
        # No annotation: db-pool, a cluster default with podAffinity, needs the labels.
        self.run_known_pod("web-7f9c-zxcvb", controller=("ReplicaSet", "web-7f9c"))
        asked = self.requests()[start:]
        self.assertEqual(asked, [("GET", "/api/v1/namespaces/default/pods/web-7f9c-zxcvb")])
        # A StatefulSet member's name opted out, its pool decided: nothing.
        self.run_pod("db-4", annotations={IPPOOL: '{"ipv4": ["annotated"]}', STATIC_IP: "false"})
        self.assertEqual(self.requests()[start:], asked)

    def set_control(self, rule):
        """The stand-in's fault rule (None: none), as KubeStandin.set_delay writes it."""
        path = f"{self.api_root}/_control.json"
        if rule is None:
            if os.path.exists(path):
                os.unlink(path)
            return
        with open(path + ".tmp", "w") as f:
            json.dump(rule, f)
        os.rename(path + ".tmp", path)

    def test_a_slow_api_fails_the_sandbox_with_11_and_the_retry_succeeds(self):
        # As in the API-down case: the bridge keeps a pod's port through the failed ADD.
        self.run_known_pod("keeper-7f9c-qwert", controller=("ReplicaSet", "keeper-7f9c"))
        uid = str(uuid.uuid4())
        self.put_pod("db-7f9c-slowa", uid, {"app": "db"}, controller=("ReplicaSet", "db-7f9c"))
        # The API server answers the pod after the helper's whole budget.
        self.set_control({"delay_ms": API_BUDGET_MS + 2000,
                          "prefix": "/api/v1/namespaces/default/pods/db-7f9c-slowa"})
        try:
            with self.assertRaises(grpc.RpcError) as failed:
                self.run_pod("db-7f9c-slowa", labels={"app": "db"}, uid=uid)
        finally:
            self.set_control(None)
        answer = [c for c in self.net.calls() if c.command == "ADD"][-1].answer()
        self.assertEqual(answer["code"], 11, answer)
        self.assertIn(f"budget of {API_BUDGET_MS} ms", answer["msg"])
        self.assertIn(answer["msg"], failed.exception.details())
        self.assertEqual(len(self.net.held()), 1, "the failed ADD holds nothing")
        sandbox = self.run_pod("db-7f9c-slowa", labels={"app": "db"}, uid=uid)
        self.assertEqual(self.net.pool_of(self.address(sandbox)), "db-pool")

    def test_containerd_killed_while_helpers_read_statefulset_pods(self):
        """containerd SIGKILLed while the plugins it started wait on the API for StatefulSet
        pods (the StatefulSet default makes each ADD read its pod): the plugins run to their
        end; after the restart and the kubelet's cleanup every address is held once, by its
        pod's claim, nothing is in use or stuck, and each pod run again gets its own back."""
        # A pod that stays: Debian's bridge plugin cannot add to a bridge whose last port went
        # (see the API-down case).
        self.run_known_pod("keeper-7f9c-asdfg", controller=("ReplicaSet", "keeper-7f9c"))
        self.put_statefulset("web", 4)
        uids = [str(uuid.uuid4()) for _ in range(4)]
        for i in range(4):
            self.put_pod(f"web-{i}", uids[i], controller=("StatefulSet", "web"))
        # The API answers these pods slowly: the helpers are in flight when containerd dies.
        self.set_control({"delay_ms": 2000, "prefix": "/api/v1/namespaces/default/pods/web-"})
        outcome = {}
        client = self.rt.client

        def run(i):
            try:
                outcome[i] = self.run_pod(f"web-{i}", uid=uids[i])
            except grpc.RpcError as e:
                outcome[i] = e.code()

        def calls_started():
            return sum(f.endswith(".env") for f in os.listdir(self.net.rec_dir))

        before = calls_started()  # the keeper's
        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        # SIGKILL once every ADD has reached the plugin: each is then waiting on the API.
        deadline = time.monotonic() + 60
        while calls_started() < before + 4:
            self.assertLess(time.monotonic(), deadline, "the ADDs did not reach the plugin")
            time.sleep(0.002)
        self.rt.kill()
        for t in threads:
            t.join(timeout=120)
        client.close()
        self.rt.wait_plugins_done()  # the plugins, and their helpers, run to their end
        self.set_control(None)
        self.rt.start()
        # The kubelet's cleanup of the StatefulSet's sandboxes (it deleted the pods meanwhile).
        keeper = None
        for s in self.rt.client.list_pod_sandbox():
            if not s.metadata.name.startswith("web-"):
                keeper = s.id
                continue
            self.rt.client.stop_pod_sandbox(s.id)
            self.rt.client.remove_pod_sandbox(s.id)
        self.rt.wait_plugins_done()
        self.assertIsNotNone(keeper, "the keeper's sandbox survives containerd's restart")
        held = self.net.held()
        del held[keeper]
        adds = {c.container for c in self.net.calls() if c.command == "ADD"}
        print(f"\n  killed containerd with helpers in flight: {len(adds) - 1} StatefulSet ADDs "
              f"reached the plugin, {len(held)} claims held after the cleanup", file=sys.stderr)
        self.assertEqual(len(held), 4, "each ADD ran to its end and made its pod's claim")
        addresses = [a for got in held.values() for a in got]
        self.assertEqual(len(addresses), len(set(addresses)), f"an address held twice: {held}")
        self.assertTrue(all(k.startswith("sts:default/web-") for k in held),
                        f"held by something but a pod's claim: {held}")
        self.assertEqual(self.net.in_use(), 1 + len(held),
                         f"the keeper's address and the claims' alone: {self.net.states()}")
        for state, (rc, out) in self.net.verify().items():
            self.assertEqual(rc, 0, f"verify {state}: {out}")
        # The StatefulSet runs them again (new uids): each gets its claim's address.
        for i in range(4):
            again = self.run_known_pod(f"web-{i}", controller=("StatefulSet", "web"))
            claimed = held.get(f"sts:default/web-{i}/eth0")
            if claimed:
                self.assertEqual(self.address(again), claimed[0], f"web-{i}")

    test_containerd_killed_while_helpers_read_statefulset_pods.own_containerd = True

    def test_a_deployments_pod_asking_for_a_static_ip_is_refused_naming_its_controller(self):
        with self.assertRaises(grpc.RpcError) as refused:
            self.run_known_pod("web-5d8f7c9b6-x2kqp", annotations={STATIC_IP: "true"},
                               controller=("ReplicaSet", "web-5d8f7c9b6"))
        answer = self.net.calls()[0].answer()
        self.assertEqual(answer["code"], 120, answer)
        self.assertIn("ReplicaSet web-5d8f7c9b6", answer["msg"])
        self.assertIn(answer["msg"], refused.exception.details())

    def test_the_api_down_fails_the_sandbox_with_11_and_the_next_try_succeeds(self):
        # A node's bridge already has a pod's port: Debian's bridge plugin (1.1.1) cannot retry
        # an ADD on a bridge whose only port its failed ADD took away (the portless bridge's
        # MAC is all zeros, which it then fails to set: "could not set bridge's mac").
        self.run_known_pod("keeper-7f9c-abcde", controller=("ReplicaSet", "keeper-7f9c"))
        uid = str(uuid.uuid4())
        self.put_pod("db-7f9c-fghij", uid, {"app": "db"}, controller=("ReplicaSet", "db-7f9c"))
        self.api.stop()
        try:
            with self.assertRaises(grpc.RpcError) as failed:
                self.run_pod("db-7f9c-fghij", labels={"app": "db"}, uid=uid)
        finally:
            self.api.start()  # the same port
        answer = [c for c in self.net.calls() if c.command == "ADD"][-1].answer()
        self.assertEqual(answer["code"], 11, answer)
        self.assertIn(self.api.url, answer["msg"])
        self.assertIn(answer["msg"], failed.exception.details())
        self.assertEqual(len(self.net.held()), 1, "the failed ADD holds nothing")
        # The kubelet's retry: a new attempt of the same pod.
        sandbox = self.run_pod("db-7f9c-fghij", labels={"app": "db"}, uid=uid)
        self.assertEqual(self.net.pool_of(self.address(sandbox)), "db-pool")


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: cri-suite
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: shmipam
  user:
    token: {token}
contexts:
- name: shmipam
  context:
    cluster: cri-suite
    user: shmipam
current-context: shmipam
"""


def _interrupted(signum, frame):
    # unittest records any other exception as a case's error and goes on; this one ends the
    # run, and the containerds are destroyed at exit (containerd_harness registers them).
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupted)
    why = require_root()
    if why:
        print(f"SKIPPED: {why}", file=sys.stderr)
        sys.exit(77)  # ctest's SKIP_RETURN_CODE for this test
    unittest.main()
