// cluster_bench: 1,000 pod ADDs (then DELs) spread over 10 simulated nodes against a real etcd
// cluster (cluster mode, docs/cluster.md), beside the same pods without etcd (pool mode, each
// node its own state), and the cost of one block claim through the cluster helper, alone and
// with concurrent claimers (the store's side of the paper model in docs/cluster.md).
//   cluster_bench --plugin build/release/shmipam --helper build/release/shmipam-cluster
//                 --endpoints http://127.0.0.1:2379,... [--nodes 10] [--pods 1000] [-k 10]
// Each node is its own runDir, dataDir and nodeName; the pods' ADDs run k at a time (a fresh
// plugin process each, as kubelets do), round robin over the nodes. Journal durability "none"
// in both modes, so what differs is the cluster.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/exec_spawner.h"
#include "cluster/helper_protocol.h"

using nlohmann::json;
using shmipam::bench::percentiles;
using shmipam::bench::spawn_and_wait;

namespace {

struct Phase {
    std::vector<double> micros;
    std::vector<std::string> addresses;
    size_t failures = 0;
    std::string first_failure;
    double wall_s = 0;
};

std::map<std::string, std::string> cni_env(const std::string& command, const std::string& pod) {
    return {{"CNI_COMMAND", command},
            {"CNI_CONTAINERID", pod},
            {"CNI_NETNS", "/x"},
            {"CNI_IFNAME", "eth0"},
            {"CNI_PATH", "/x"},
            {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + pod}};
}

// `pods` calls of `command`, k at a time, pod i on node i % configs.size().
Phase run(const std::string& plugin, const std::vector<std::string>& configs,
          const std::string& command, size_t pods, size_t k, const std::string& prefix) {
    Phase ph;
    std::mutex mu;
    std::atomic<size_t> next{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (size_t w = 0; w < k; ++w) {
        workers.emplace_back([&] {
            for (size_t i = next++; i < pods; i = next++) {
                const std::string pod = prefix + std::to_string(i);
                auto r = spawn_and_wait(plugin, cni_env(command, pod), configs[i % configs.size()]);
                std::lock_guard<std::mutex> lock(mu);
                ph.micros.push_back(r.micros);
                if (r.exit_code != 0) {
                    if (ph.failures++ == 0) ph.first_failure = r.out;
                    continue;
                }
                if (command == "ADD") {
                    const json out = json::parse(r.out, nullptr, false);
                    if (out.is_object() && out.contains("ips")) {
                        ph.addresses.push_back(out["ips"][0].value("address", ""));
                    }
                }
            }
        });
    }
    for (auto& t : workers) t.join();
    ph.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return ph;
}

json phase_json(const Phase& ph) {
    const auto p = percentiles(ph.micros);
    return {{"calls", ph.micros.size()}, {"failures", ph.failures}, {"wall_s", ph.wall_s},
            {"p50_ms", p.p50 / 1000},    {"p99_ms", p.p99 / 1000},  {"max_ms", p.max / 1000}};
}

void print_phase(const char* name, const Phase& ph) {
    const auto p = percentiles(ph.micros);
    std::printf("| %s | %zu | %zu | %.2f s | %.1f | %.2f ms | %.2f ms | %.2f ms |\n", name,
                ph.micros.size(), ph.failures, ph.wall_s, double(ph.micros.size()) / ph.wall_s,
                p.p50 / 1000, p.p99 / 1000, p.max / 1000);
}

size_t count_lines(const std::string& path) {
    std::ifstream f(path);
    size_t n = 0;
    for (std::string l; std::getline(f, l);) n += !l.empty();
    return n;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"cluster_bench: 1,000 pods over 10 simulated nodes, with and without etcd"};
    std::string plugin, helper, endpoints, work = "/tmp/shmipam-cluster-bench", json_out;
    size_t nodes = 10, pods = 1000, k = 10, claims = 40, claimers = 8;
    app.add_option("--plugin", plugin, "the plugin binary")->required();
    app.add_option("--helper", helper, "the cluster helper binary")->required();
    app.add_option("--endpoints", endpoints, "etcd client URLs, comma-separated")->required();
    app.add_option("--nodes", nodes, "simulated nodes");
    app.add_option("--pods", pods, "pods (ADDs, then DELs)");
    app.add_option("-k,--concurrency", k, "calls in flight at once");
    app.add_option("--claims", claims, "block claims per claimer, for the claim cost");
    app.add_option("--claimers", claimers, "concurrent claimers, for the claim cost");
    app.add_option("--work", work, "state directory");
    app.add_option("--json", json_out, "write the results as JSON here");
    CLI11_PARSE(app, argc, argv);

    std::system(("rm -rf '" + work + "' && mkdir -p '" + work + "/pools'").c_str());
    // One pool for the whole cluster: a /16, cut into Calico's /26 blocks.
    std::ofstream(work + "/pools/pool.yaml")
        << "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
           "metadata: {name: bench}\nspec: {subnet: 10.200.0.0/16, gateway: 10.200.0.1, "
           "ips: [\"10.200.0.2-10.200.255.254\"], "
           "default: true}\n";
    ::sleep(3);  // out of the pools directory's racy window (docs/pools.md)
    json etcd{{"endpoints", json::array()},
              {"prefix", "/shmipam-bench-" + std::to_string(::getpid())}};
    std::stringstream eps(endpoints);
    for (std::string e; std::getline(eps, e, ',');) etcd["endpoints"].push_back(e);

    const auto configs = [&](const std::string& mode, bool cluster) {
        std::vector<std::string> out;
        for (size_t n = 0; n < nodes; ++n) {
            const std::string dir = work + "/" + mode + "/node-" + std::to_string(n);
            json ipam{{"type", "shmipam"},
                      {"runDir", dir + "/run"},
                      {"dataDir", dir + "/data"},
                      {"poolsDir", work + "/pools"},
                      {"nodeName", "node-" + std::to_string(n)},
                      {"durability", "none"},
                      {"reuseDelay", 0}};
            if (cluster) {
                ipam["etcd"] = etcd;
                ipam["clusterHelper"] = helper;
            }
            out.push_back(
                json{{"cniVersion", "1.1.0"}, {"name", "bench"}, {"type", "bridge"}, {"ipam", ipam}}
                    .dump());
        }
        return out;
    };
    const auto cluster_cfgs = configs("cluster", true);
    const auto local_cfgs = configs("local", false);

    std::printf(
        "%zu pods over %zu simulated nodes, %zu calls in flight, pool 10.200.0.0/16 in /26 "
        "blocks\n\n",
        pods, nodes, k);
    std::printf("| phase | calls | failed | wall | calls/s | p50 | p99 | max |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    const Phase cluster_add = run(plugin, cluster_cfgs, "ADD", pods, k, "c");
    print_phase("cluster mode ADD", cluster_add);
    const Phase local_add = run(plugin, local_cfgs, "ADD", pods, k, "l");
    print_phase("pool mode, no etcd, ADD", local_add);
    const Phase cluster_del = run(plugin, cluster_cfgs, "DEL", pods, k, "c");
    print_phase("cluster mode DEL", cluster_del);
    const Phase local_del = run(plugin, local_cfgs, "DEL", pods, k, "l");
    print_phase("pool mode, no etcd, DEL", local_del);

    const std::set<std::string> distinct(cluster_add.addresses.begin(),
                                         cluster_add.addresses.end());
    size_t blocks = 0;
    for (size_t n = 0; n < nodes; ++n) {
        blocks += count_lines(work + "/cluster/node-" + std::to_string(n) +
                              "/data/_cluster/bench.blocks");
    }
    std::printf("\ncluster mode: %zu addresses, %zu distinct; %zu blocks held after the DELs\n",
                cluster_add.addresses.size(), distinct.size(), blocks);
    if (!cluster_add.first_failure.empty()) {
        std::printf("first failure: %s\n", cluster_add.first_failure.c_str());
    }

    // The claim's cost: the helper exec'd for a block, by one claimer, then by several at once
    // (distinct nodes, so every call claims), as the store sees the plugin's rare path.
    std::printf(
        "\nBlock claims through the helper (exec, 2 range reads, 1 transaction, the "
        "cache's write and sync):\n\n");
    std::printf(
        "| claimers | claims | wall | claims/s | p50 | p99 |\n|---:|---:|---:|---:|---:|---:|\n");
    json claim_rows = json::array();
    for (size_t c : {size_t{1}, claimers}) {
        std::vector<double> micros;
        std::mutex mu;
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> ts;
        for (size_t w = 0; w < c; ++w) {
            ts.emplace_back([&, w] {
                const std::string node = "claimer-" + std::to_string(c) + "-" + std::to_string(w);
                shmipam::cluster::protocol::ClaimBlock req;
                req.scope = {etcd, "claims", node, work + "/claims/" + node};
                // Apart from the ADDs' pool (10.200.0.0/16): the store refuses overlapping pools.
                req.geometry.pool_cidr = *shmipam::engine::Cidr::parse("100.64.0.0/10");
                req.geometry.block_prefix = 26;
                req.max_blocks = 100000;
                const std::string text = shmipam::cluster::protocol::encode(req);
                for (size_t i = 0; i < claims; ++i) {
                    auto r = spawn_and_wait(helper, {}, text);
                    std::lock_guard<std::mutex> lock(mu);
                    if (r.exit_code == 0) micros.push_back(r.micros);
                }
            });
        }
        for (auto& t : ts) t.join();
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const auto p = percentiles(micros);
        std::printf("| %zu | %zu | %.2f s | %.1f | %.1f ms | %.1f ms |\n", c, micros.size(), wall,
                    double(micros.size()) / wall, p.p50 / 1000, p.p99 / 1000);
        claim_rows.push_back({{"claimers", c},
                              {"claims", micros.size()},
                              {"wall_s", wall},
                              {"per_s", double(micros.size()) / wall},
                              {"p50_ms", p.p50 / 1000},
                              {"p99_ms", p.p99 / 1000}});
    }
    if (!json_out.empty()) {
        std::ofstream(json_out) << json{{"nodes", nodes},
                                        {"pods", pods},
                                        {"concurrency", k},
                                        {"cluster_add", phase_json(cluster_add)},
                                        {"local_add", phase_json(local_add)},
                                        {"cluster_del", phase_json(cluster_del)},
                                        {"local_del", phase_json(local_del)},
                                        {"distinct_addresses", distinct.size()},
                                        {"blocks_after_dels", blocks},
                                        {"claims", claim_rows}}
                                       .dump(2)
                                << "\n";
    }
    return cluster_add.failures == 0 && distinct.size() == cluster_add.addresses.size() ? 0 : 1;
}
