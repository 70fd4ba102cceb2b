#!/usr/bin/env bash
# A local etcd cluster on loopback for the cluster demo and benchmark (docs/cluster.md): N
# members (default 3) on free ports, data and logs under DIR, each started in the background
# with its pid in DIR/<member>.pid.
#   local-etcd.sh start DIR [MEMBERS]   prints the client URLs, comma-separated, once all answer
#   local-etcd.sh restart DIR           starts every member again on its data directory
#   local-etcd.sh leader DIR            prints the name of the member that leads (m0, m1, ...)
#   local-etcd.sh kill DIR MEMBER       SIGKILLs one member
#   local-etcd.sh stop DIR              SIGKILLs every member
set -euo pipefail

cmd=${1:?usage: local-etcd.sh start|restart|leader|kill|stop DIR [...]}
dir=${2:?the cluster directory}

# A port outside the kernel's ephemeral range that no test or other cluster of this machine was
# handed lately (the tests' port protocol, tests/support/test_ports.h): no connection opened
# before etcd binds it can have been given it.
reserve_port() { port=$(python3 "$(dirname "$0")/../tests/support/test_ports.py"); }

endpoints() { paste -sd, "$dir/endpoints"; }

case "$cmd" in
start)
    members=${3:-3}
    mkdir -p "$dir"
    : >"$dir/endpoints"
    initial=""
    declare -a names clients peers
    for i in $(seq 0 $((members - 1))); do
        reserve_port; clients[i]=$port
        reserve_port; peers[i]=$port
        names[i]="m$i"
        initial+="${initial:+,}m$i=http://127.0.0.1:${peers[i]}"
        echo "http://127.0.0.1:${clients[i]}" >>"$dir/endpoints"
    done
    for i in $(seq 0 $((members - 1))); do
        # Kept, so that `restart` starts the member again on its data directory.
        printf '%q ' etcd --name "${names[i]}" --data-dir "$dir/${names[i]}" \
            --listen-client-urls "http://127.0.0.1:${clients[i]}" \
            --advertise-client-urls "http://127.0.0.1:${clients[i]}" \
            --listen-peer-urls "http://127.0.0.1:${peers[i]}" \
            --initial-advertise-peer-urls "http://127.0.0.1:${peers[i]}" \
            --initial-cluster "$initial" --initial-cluster-token "shmipam-$$" \
            --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 \
            --logger zap --log-level warn >"$dir/${names[i]}.cmd"
    done
    bash "$0" restart "$dir"
    ;;
restart)
    for f in "$dir"/*.cmd; do
        member=$(basename "$f" .cmd)
        eval "$(cat "$f")" '>>"$dir/$member.log" 2>&1 &'
        echo $! >"$dir/$member.pid"
    done
    for _ in $(seq 100); do
        if ETCDCTL_API=3 etcdctl --endpoints "$(endpoints)" endpoint health >/dev/null 2>&1; then
            endpoints
            exit 0
        fi
        sleep 0.1
    done
    echo "etcd did not become healthy; logs in $dir" >&2
    exit 1
    ;;
leader)
    url=$(ETCDCTL_API=3 etcdctl --endpoints "$(endpoints)" endpoint status -w simple 2>/dev/null |
        awk -F', ' '$5 == "true" {print $1}')
    line=$(grep -nx "$url" "$dir/endpoints" | cut -d: -f1)
    [ -n "$line" ] && echo "m$((line - 1))"
    ;;
kill)
    member=${3:?the member name (m0, m1, ...)}
    kill -9 "$(cat "$dir/$member.pid")" 2>/dev/null || true
    ;;
stop)
    for f in "$dir"/*.pid; do
        [ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
    done
    ;;
*)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
