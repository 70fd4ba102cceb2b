#!/usr/bin/env bash
# Installs the Debian packages shmipam needs to build, test and benchmark.
# Idempotent and quick when everything is present: apt is only touched when a package is missing.
set -euo pipefail

packages=(
    g++ cmake ninja-build pkg-config
    lld                   # links the plugin with its functions in plugin/plugin.order (exec speed)
    libboost-dev          # Boost.Interprocess: file_mapping / mapped_region (header-only)
    liburing-dev          # io_uring durability backend
    libjemalloc-dev       # allocator for shmipamctl and benchmarks (never the plugin)
    libspdlog-dev         # logging in shmipamctl (never the plugin: start-up cost)
    nlohmann-json3-dev    # JSON for CNI stdin/stdout
    libyaml-dev           # pool objects as YAML (poolsDir), as kubectl writes them (C: no start-up cost)
    libcli11-dev          # shmipamctl command line
    libgtest-dev libgmock-dev
    libbenchmark-dev
    containernetworking-plugins  # real bridge + host-local for end-to-end and migration tests
    iproute2              # ip netns for end-to-end tests
    iputils-ping          # reachability between test namespaces
    libcurl4-openssl-dev  # HTTPS for the helpers: etcd's v3 JSON gateway, the Kubernetes API (never the plugin)
    etcd-server           # a real 3-member etcd for the cluster tests (tests/support/etcd_cluster.h)
    etcd-client           # etcdctl: the cluster tests turn on etcd's authentication with it
    openssl               # the tests' CAs and certificates (etcd, the Kubernetes API's stand-in)
    python3               # the Kubernetes API server's stand-in (tests/support/kube_api_standin.py)
    podman runc           # a real container runtime for the end-to-end tests (CNI network backend)
    busybox-static        # the test containers' whole root file system (no image pulled)
    containerd            # the runtime Kubernetes uses: its CRI runs the tests/cri suite's pod sandboxes
                          #   (run privately by the suite; the package starts no service without systemd)
    python3-grpcio        # the tests/cri suite's CRI client: gRPC on containerd's socket
    python3-protobuf      # the CRI messages in Python (the runtime of what protoc generates)
    protobuf-compiler     # protoc: tests/cri/runtime_v1.proto to Python at build time
    prometheus prometheus-node-exporter  # the metrics test: a real scrape of the textfile collector
    tinyproxy             # a real HTTP proxy for a kubeconfig's proxy-url (tests/support/http_proxy.h)
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing ${#missing[@]} packages with apt-get (minutes on a fresh machine; apt's own" \
    "output is kept quiet): ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
started=$SECONDS
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed in $((SECONDS - started)) s" >&2
