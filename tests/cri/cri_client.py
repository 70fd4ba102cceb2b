"""A minimal CRI client: the calls the kubelet makes to run and tear down pod sandboxes.

gRPC on containerd's unix socket with the messages of runtime_v1.proto (protoc generates
runtime_v1_pb2 into the build directory; the suite puts that directory on sys.path). Each
method is called by its full name, as the kubelet's generated stub does; no service stubs are
generated. Debian's python3-grpcio and python3-protobuf: run with /usr/bin/python3.
"""

import json

import grpc

import runtime_v1_pb2 as pb

_SERVICE = "/runtime.v1.RuntimeService/"


class CriClient:
    """RuntimeService calls on one endpoint (unix socket path)."""

    def __init__(self, socket_path, timeout=60.0):
        self.timeout = timeout
        # Its own subchannel: one another client of the same socket left failing (containerd
        # was not up yet) would make this one wait out gRPC's reconnect backoff too.
        self.channel = grpc.insecure_channel("unix://" + socket_path,
                                             options=[("grpc.use_local_subchannel_pool", 1)])
        self._calls = {}
        for method, request, response in (
                ("Version", pb.VersionRequest, pb.VersionResponse),
                ("Status", pb.StatusRequest, pb.StatusResponse),
                ("RunPodSandbox", pb.RunPodSandboxRequest, pb.RunPodSandboxResponse),
                ("PodSandboxStatus", pb.PodSandboxStatusRequest, pb.PodSandboxStatusResponse),
                ("StopPodSandbox", pb.StopPodSandboxRequest, pb.StopPodSandboxResponse),
                ("RemovePodSandbox", pb.RemovePodSandboxRequest, pb.RemovePodSandboxResponse),
                ("ListPodSandbox", pb.ListPodSandboxRequest, pb.ListPodSandboxResponse)):
            self._calls[method] = self.channel.unary_unary(
                _SERVICE + method, request_serializer=request.SerializeToString,
                response_deserializer=response.FromString)

    def close(self):
        self.channel.close()

    def _call(self, method, request, timeout=None):
        return self._calls[method](request, timeout=timeout or self.timeout)

    def version(self, timeout=None):
        return self._call("Version", pb.VersionRequest(version="v1"), timeout)

    def status(self):
        """The runtime's status, verbose: info["cniconfig"] is the CNI config containerd loaded."""
        return self._call("Status", pb.StatusRequest(verbose=True))

    def run_pod_sandbox(self, name, namespace, uid, attempt=0, labels=None, annotations=None):
        """RunPodSandbox as the kubelet sends it (metadata, hostname, labels, annotations,
        namespaces of the pod, a cgroup parent under the test's own); the sandbox id."""
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace=namespace,
                                           attempt=attempt),
            hostname=name,
            labels=labels or {},
            annotations=annotations or {},
            linux=pb.LinuxPodSandboxConfig(
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(network=pb.POD, pid=pb.CONTAINER,
                                                         ipc=pb.POD))))
        return self._call("RunPodSandbox", pb.RunPodSandboxRequest(config=config)).pod_sandbox_id

    def pod_sandbox_status(self, sandbox_id, verbose=False):
        return self._call("PodSandboxStatus",
                          pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=verbose))

    def sandbox_ips(self, sandbox_id):
        """Every address PodSandboxStatus reports for the sandbox (ip, then additional_ips)."""
        network = self.pod_sandbox_status(sandbox_id).status.network
        return [a for a in [network.ip] + [p.ip for p in network.additional_ips] if a]

    def sandbox_pid(self, sandbox_id):
        """The pause process's pid (verbose status: info["info"] is containerd's JSON)."""
        info = self.pod_sandbox_status(sandbox_id, verbose=True).info
        return json.loads(info["info"])["pid"]

    def stop_pod_sandbox(self, sandbox_id):
        self._call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))

    def remove_pod_sandbox(self, sandbox_id):
        self._call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))

    def list_pod_sandbox(self):
        return list(self._call("ListPodSandbox", pb.ListPodSandboxRequest()).items)
