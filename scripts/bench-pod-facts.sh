#!/usr/bin/env bash
# What reading a pod from the API server costs an ADD, and what the API costs an ADD that needs
# nothing from it (docs/benchmarks.md, "Pod facts from the API server"): bench/pool_bench's
# modes ranges, pools-1, api-unneeded and api-read in one run, against the API server's
# stand-in (tests/support/kube_api_standin.py, TLS and a bearer token on loopback) holding the
# pod the bench runs.
#   bash scripts/bench-pod-facts.sh [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-400}
cmake --preset release >/dev/null
cmake --build --preset release --target shmipam shmipam-kube pool_bench >/dev/null
work=$(mktemp -d "${TMPDIR:-/var/tmp}/bench-pod-facts-XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/root"
echo bench-token >"$work/root/_token"
/usr/bin/python3 - "$work" <<'PY'
import base64, sys
sys.path.insert(0, "tests/support")
import kube_api_standin as k
work = sys.argv[1]
k.make_certificates(work)
k.put_object(f"{work}/root", k.pod_object("default", "p", labels={"app": "db"},
             owners=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "p-rs",
                      "uid": "u", "controller": True}]))
PY
/usr/bin/python3 tests/support/kube_api_standin.py --root "$work/root" --cert "$work/server.crt" \
    --key "$work/server.key" --port-file "$work/port" &
pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
ca=$(base64 -w0 "$work/ca.crt")
cat >"$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "https://127.0.0.1:$port", certificate-authority-data: $ca}}]
users: [{name: bench, user: {token: bench-token}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
KC
build/release/bench/pool_bench --plugin build/release/shmipam --work "$work/bench" \
    --calls "$calls" --rounds 4 --pools 1 --kubeconfig "$work/kubeconfig" \
    --kube-helper build/release/shmipam-kube
echo
echo "API requests served: $(grep -c ' 200 ' "$work/root/_requests.log" || true)" \
     "(api-read's ADDs, one each; api-unneeded's none)"
