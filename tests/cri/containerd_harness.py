"""A private, real containerd for the CRI suite (tests/cri/test_containerd_cri.py).

Debian's containerd with its own config, root, state, socket, CNI directories and runc state,
all in one temporary directory, so the host's containerd (if any) and its /etc/containerd,
/var/lib/containerd and /run/containerd are never touched:

- `sandbox_image` is an image the suite writes itself (oci_image.py, from tests/support/pause.c)
  and imports with `ctr images import`: nothing can be pulled on the test machines;
- `restrict_oom_score_adj = true`: the CRI gives a sandbox an oom_score_adj of -998, which
  runc cannot set in the VMs CI runs on;
- runc through tests/support/runc_without_rlimits (its `BinaryName`), as the podman suite runs
  it: containerd's default spec asks for RLIMIT_NOFILE, which those VMs refuse to set (the
  wrapper's header says why); its state under the temporary directory (`Root`);
- the native snapshotter (plain directories and bind mounts: it works on whatever file system
  the temporary directory is on), the others disabled; no AppArmor profile (a host with
  AppArmor would need containerd's profile loaded);
- network namespaces mounted under the state directory (`netns_mounts_under_state_dir`), so a
  namespace that a killed containerd leaves behind is found and removed with the rest;
- the CNI: `bin_dir` holds Debian's bridge and loopback (symlinks to /usr/lib/cni) and, as
  `shmipam`, a recorder that writes down what it is given (environment, stdin) and runs the
  built plugin with it; `conf_dir` holds the one conflist of the running test, and
  `max_conf_num = 1`.

containerd runs as a child process, started and stopped by its pid (SIGTERM, then SIGKILL);
`destroy()` (also at exit, and on SIGTERM) stops it, ends whatever it left (shims, sandboxes'
processes through runc, mounts under the directory) and removes the directory.
"""

import atexit
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import grpc

from cri_client import CriClient

CONTAINERD = "/usr/bin/containerd"
CTR = "/usr/bin/ctr"
SHIM = "/usr/bin/containerd-shim-runc-v2"
RUNC = "/usr/sbin/runc"
CNI_PLUGINS = "/usr/lib/cni"
SANDBOX_IMAGE = "localhost/shmipam-test/pause:1"

# What containerd passes the IPAM plugin, written down call by call: <dir>/<ns time>.<pid>.env
# (the environment, NUL-separated), .stdin, .out (the plugin's answer) and .rc (its exit code).
_RECORDER = """#!/bin/sh
# The IPAM plugin as containerd execs it in the CRI suite: records, then runs shmipam.
rec="{rec_dir}/$(date +%s%N).$$"
cat > "$rec.stdin"
env -0 > "$rec.env"
"{plugin}" < "$rec.stdin" > "$rec.out"
rc=$?
cat "$rec.out"
echo "$rc" > "$rec.rc"
exit "$rc"
"""

_CONFIG = """version = 2
root = "{dir}/root"
state = "{dir}/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.overlayfs",
]

[grpc]
  address = "{dir}/containerd.sock"

[ttrpc]
  address = "{dir}/containerd.sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{dir}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  Root = "{dir}/runc"
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{dir}/bin"
  conf_dir = "{dir}/net"
  max_conf_num = 1
"""


def _processes():
    """(pid, argv) of every process."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        yield int(name), argv


def _wait_gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


class Containerd:
    """One private containerd. `client` is a CriClient on its socket while it runs."""

    def __init__(self, plugin, runc_wrapper, tag):
        for need in (CONTAINERD, CTR, SHIM, RUNC, plugin, runc_wrapper,
                     f"{CNI_PLUGINS}/bridge", f"{CNI_PLUGINS}/loopback", "/usr/bin/nsenter",
                     "/usr/bin/ping", "/usr/sbin/ip", "/bin/umount"):
            if not os.access(need, os.X_OK):
                raise RuntimeError(f"{need} is missing (scripts/install-deps.sh installs the "
                                   "packages; the build makes the test binaries)")
        self.plugin = plugin
        self.dir = tempfile.mkdtemp(prefix=f"shmipam-cri-{tag}-")
        self.socket = f"{self.dir}/containerd.sock"
        self.bin_dir = f"{self.dir}/bin"
        self.conf_dir = f"{self.dir}/net"
        self.config = f"{self.dir}/containerd.toml"
        self.log = f"{self.dir}/containerd.log"
        self.proc = None
        self.client = None
        self.starts = 0
        # The sandboxes' cgroups go under /k8s.io (no cgroup parent is given, as no kubelet
        # runs here); the parents this run makes are removed at the end if empty.
        roots = ["/sys/fs/cgroup"] + [d for d in glob.glob("/sys/fs/cgroup/*") if os.path.isdir(d)]
        self._new_cgroup_parents = [f"{r}/k8s.io" for r in roots
                                    if not os.path.exists(f"{r}/k8s.io")]
        self._destroyed = False
        for sub in ("bin", "net", "cases"):
            os.makedirs(f"{self.dir}/{sub}")
        for plugin_name in ("bridge", "loopback"):
            os.symlink(f"{CNI_PLUGINS}/{plugin_name}", f"{self.bin_dir}/{plugin_name}")
        with open(self.config, "w") as f:
            f.write(_CONFIG.format(dir=self.dir, image=SANDBOX_IMAGE, runc=runc_wrapper))
        atexit.register(self.destroy)

    # ---- the process ----------------------------------------------------------------------

    def start(self, timeout=60.0):
        """Starts containerd and waits until its CRI answers Version."""
        self.starts += 1
        log = open(self.log, "a")
        log.write(f"==== start {self.starts}\n")
        log.flush()
        self.proc = subprocess.Popen([CONTAINERD, "--config", self.config], stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"containerd exited with {self.proc.returncode}:\n"
                                   + self.log_tail())
            if os.path.exists(self.socket):
                # A new channel each try: one that failed to connect (the socket a killed
                # containerd left, not yet served) would wait out gRPC's reconnect backoff.
                client = CriClient(self.socket)
                try:
                    version = client.version(timeout=2)
                    self.client = client
                    return version
                except grpc.RpcError as e:
                    last = e
                    client.close()
            time.sleep(0.05)
        raise RuntimeError(f"containerd did not answer Version within {timeout} s ({last}):\n"
                           + self.log_tail())

    def kill(self):
        """SIGKILL, as a crash: its shims and the plugins it runs go on."""
        self.proc.kill()
        self.proc.wait()
        self._drop_client()

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s."""
        self._drop_client()
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _drop_client(self):
        if self.client is not None:
            self.client.close()
            self.client = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines=40):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    # ---- the sandbox image ----------------------------------------------------------------

    def import_image(self, archive):
        r = subprocess.run([CTR, "--address", self.socket, "--namespace", "k8s.io", "images",
                            "import", "--snapshotter", "native", archive],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"ctr images import failed: {r.stdout}{r.stderr}")

    # ---- the network ----------------------------------------------------------------------

    def use_network(self, conflist, rec_dir, timeout=30.0):
        """Makes `conflist` containerd's one network and `rec_dir` where the recorder writes;
        waits until containerd's CRI has loaded it (its verbose Status names it)."""
        os.makedirs(rec_dir, exist_ok=True)
        tmp = f"{self.bin_dir}/.shmipam.tmp"
        with open(tmp, "w") as f:
            f.write(_RECORDER.format(rec_dir=rec_dir, plugin=self.plugin))
        os.chmod(tmp, 0o755)
        os.rename(tmp, f"{self.bin_dir}/shmipam")
        # Written aside (a name libcni does not read) and renamed over the last one.
        tmp = f"{self.conf_dir}/.conflist.tmp"
        with open(tmp, "w") as f:
            json.dump(conflist, f, indent=2)
        os.rename(tmp, f"{self.conf_dir}/10-shmipam-cri.conflist")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.client.status().info
            loaded = json.loads(info.get("cniconfig", "{}"))
            names = [n["Config"]["Name"] for n in loaded.get("Networks") or []]
            if conflist["name"] in names:
                return
            time.sleep(0.05)
        raise RuntimeError(f"containerd did not load network {conflist['name']} within "
                           f"{timeout} s: {info}")

    def plugin_processes(self):
        """CNI plugins of this containerd still running (exec'd from its bin_dir)."""
        return [(pid, argv) for pid, argv in _processes()
                if any(a.startswith(self.bin_dir + "/") for a in argv[:2])]

    def wait_plugins_done(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.plugin_processes():
            if time.monotonic() > deadline:
                raise RuntimeError(f"CNI plugins still running: {self.plugin_processes()}")
            time.sleep(0.02)

    # ---- the end --------------------------------------------------------------------------

    def remove_all_sandboxes(self):
        """Stop + Remove every sandbox containerd lists; the errors, if any."""
        errors = []
        for sandbox in self.client.list_pod_sandbox():
            for call in (self.client.stop_pod_sandbox, self.client.remove_pod_sandbox):
                try:
                    call(sandbox.id)
                except grpc.RpcError as e:
                    errors.append(f"{call.__name__} {sandbox.id}: {e.details()}")
        return errors

    def destroy(self, keep_log_in=None):
        """Stops containerd and ends everything it left; removes the directory. Idempotent."""
        if self._destroyed:
            return
        self._destroyed = True
        if self.running() and self.client is not None:
            try:
                self.remove_all_sandboxes()
            except grpc.RpcError:
                pass
        self.stop()
        # Sandboxes' processes that are left (a failed test, a killed containerd): runc kills
        # them and removes their cgroups; then their shims end.
        runc_root = f"{self.dir}/runc"
        if os.path.isdir(runc_root):
            for ns in os.listdir(runc_root):
                for cid in os.listdir(f"{runc_root}/{ns}"):
                    subprocess.run([RUNC, "--root", f"{runc_root}/{ns}", "delete", "--force",
                                    cid], capture_output=True, timeout=30)
        for pid, argv in _processes():
            if argv and argv[0].endswith("containerd-shim-runc-v2") and self.socket in argv:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                _wait_gone(pid, 10)
        self._unmount_all()
        for parent in self._new_cgroup_parents:
            try:
                os.rmdir(parent)
            except OSError:
                pass
        if keep_log_in:
            os.makedirs(keep_log_in, exist_ok=True)
            for name in ("containerd.log", "containerd.toml"):
                if os.path.exists(f"{self.dir}/{name}"):
                    shutil.copy(f"{self.dir}/{name}", keep_log_in)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _unmount_all(self):
        """Every mount under the directory (rootfs bind mounts, /dev/shm, network namespaces),
        deepest first."""
        points = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = line.split()[4].encode().decode("unicode_escape")
                if point.startswith(self.dir + "/"):
                    points.append(point)
        for point in sorted(set(points), key=len, reverse=True):
            subprocess.run(["/bin/umount", "--lazy", point], capture_output=True)
