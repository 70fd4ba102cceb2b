// Pool mode's cost per exec'd ADD: p50 latency and CPU per call with 1, 100 and 1,000 pool
// objects in poolsDir, against ranges mode, measured in one run with the modes interleaved
// call by call (this machine is noisy; compare within a run). The pod's pool is
// selected by the config's default_ipv4_ippool; the other pools are the cluster's, filtered out
// by nodeName, as on a real node. Journal durability "none", and both modes answer one address,
// its gateway and a default route, so what differs is the mode.
// With --kubeconfig (an API server holding pod default/p labelled app=db: scripts/
// bench-pod-facts.sh starts the stand-in), two more modes of one pool: `api-unneeded` (the API
// configured, a pod that needs nothing from it: no call) and `api-read` (the pool has podAffinity
// app=db: each ADD reads the pod through shmipam-kube).
//   pool_bench --plugin build/release/shmipam [--calls 400] [--pools 1 100 1000] [--json F]
//              [--kubeconfig F --kube-helper build/release/shmipam-kube]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/exec_spawner.h"

using nlohmann::json;
using shmipam::bench::percentiles;
using shmipam::bench::spawn_and_wait;

namespace {

// One pool, pool-0, for pods labelled app=db only.
std::string affinity_pool_file() {
    return "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
           "metadata: {name: pool-0}\nspec:\n  subnet: 10.100.0.0/24\n"
           "  ips: [\"10.100.0.2-10.100.0.250\"]\n  gateway: 10.100.0.1\n"
           "  podAffinity: {matchLabels: {app: db}}\n";
}

std::string pool_file(size_t n) {
    std::string out = "apiVersion: v1\nkind: List\nitems:\n";
    for (size_t i = 0; i < n; ++i) {
        const std::string net =
            "10." + std::to_string(100 + i / 250) + "." + std::to_string(i % 250);
        out +=
            "- apiVersion: spiderpool.spidernet.io/v2beta1\n  kind: SpiderIPPool\n"
            "  metadata: {name: pool-" +
            std::to_string(i) +
            "}\n"
            "  spec:\n    subnet: " +
            net + ".0/24\n    ips: [\"" + net + ".2-" + net + ".250\"]\n    gateway: " + net +
            ".1\n" + (i == 0 ? "" : "    nodeName: [node-" + std::to_string(i) + "]\n");
    }
    return out;
}

struct Mode {
    std::string name;
    json config;
    std::vector<double> add_us, add_cpu_us;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"pool_bench: pool mode's ADD cost against ranges mode, one process per call"};
    std::string plugin, work = "/tmp/shmipam-pool-bench", json_out;
    size_t calls = 400, rounds = 8;
    std::vector<size_t> pool_counts{1, 100, 1000};
    app.add_option("--plugin", plugin, "the plugin binary")->required();
    app.add_option("--work", work, "state directory");
    app.add_option("--calls", calls, "ADDs (then DELs) per mode");
    app.add_option("--rounds", rounds, "rounds the calls are split into, modes interleaved");
    app.add_option("--pools", pool_counts, "pool object counts");
    app.add_option("--json", json_out, "write the results as JSON here");
    std::string kubeconfig, kube_helper;
    app.add_option("--kubeconfig", kubeconfig, "an API server's kubeconfig: the api-* modes");
    app.add_option("--kube-helper", kube_helper, "shmipam-kube, with --kubeconfig");
    CLI11_PARSE(app, argc, argv);

    std::system(("rm -rf '" + work + "' && mkdir -p '" + work + "'").c_str());
    std::vector<Mode> modes;
    auto base = [&](const std::string& name) {
        return json{{"cniVersion", "1.1.0"},
                    {"name", name},
                    {"type", "bridge"},
                    {"ipam",
                     {{"type", "shmipam"},
                      {"runDir", work + "/run"},
                      {"dataDir", work + "/data"},
                      {"durability", "none"},
                      {"reuseDelay", 0}}}};
    };
    Mode ranges{"ranges", base("ranges"), {}, {}};
    ranges.config["ipam"]["ranges"] = json::parse(R"([[{"subnet": "10.99.0.0/24"}]])");
    // The same answer as a pool's: one address with its gateway, and a default route through
    // it (which pool mode adds for a pool with a gateway, as Spiderpool does).
    ranges.config["ipam"]["routes"] = json::parse(R"([{"dst": "0.0.0.0/0", "gw": "10.99.0.1"}])");
    modes.push_back(ranges);
    for (size_t n : pool_counts) {
        const std::string dir = work + "/pools-" + std::to_string(n);
        ::mkdir(dir.c_str(), 0755);
        std::ofstream(dir + "/pools.yaml") << pool_file(n);
        // Files edited a while ago, as on a node between syncs: the first call builds the
        // snapshot (a file changed within two seconds is re-read until it settles).
        const struct timespec old[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
        ::utimensat(AT_FDCWD, (dir + "/pools.yaml").c_str(), old, 0);
        Mode m{"pools-" + std::to_string(n), base("pools-" + std::to_string(n)), {}, {}};
        m.config["ipam"]["poolsDir"] = dir;
        m.config["ipam"]["nodeName"] = "node-0";
        m.config["ipam"]["default_ipv4_ippool"] = json::array({"pool-0"});
        modes.push_back(m);
    }
    if (!kubeconfig.empty()) {
        for (const char* name : {"api-unneeded", "api-read"}) {
            const std::string dir = work + "/" + name;
            ::mkdir(dir.c_str(), 0755);
            std::ofstream(dir + "/pools.yaml")
                << (std::string(name) == "api-read" ? affinity_pool_file() : pool_file(1));
            const struct timespec old[2] = {{::time(nullptr) - 3600, 0},
                                            {::time(nullptr) - 3600, 0}};
            ::utimensat(AT_FDCWD, (dir + "/pools.yaml").c_str(), old, 0);
            Mode m{name, base(name), {}, {}};
            m.config["ipam"]["poolsDir"] = dir;
            m.config["ipam"]["nodeName"] = "node-0";
            m.config["ipam"]["default_ipv4_ippool"] = json::array({"pool-0"});
            m.config["ipam"]["kubernetes"] = {{"kubeconfig", kubeconfig},
                                              {"helper", kube_helper}};
            modes.push_back(m);
        }
    }
    // Each mode's pool is its own state: pools-N use pool-0 of their own dataDir.
    for (auto& m : modes) {
        if (m.name != "ranges") {
            m.config["ipam"]["runDir"] = work + "/run-" + m.name;
            m.config["ipam"]["dataDir"] = work + "/data-" + m.name;
        }
    }
    // The files' ctime is now (utimensat cannot set it): wait out the two-second racy window.
    ::sleep(3);
    // Modes interleave call by call: the i-th ADD of every mode runs within milliseconds of the
    // others, so drift on this noisy machine (seconds long) reaches every mode alike, and the
    // i-th ADDs of two modes form a pair whose difference is the mode's own cost.
    const size_t per_round = std::max<size_t>(1, calls / rounds);
    size_t id = 0;
    auto add = [&](Mode& m, const std::string& cfg, const std::string& cid) {
        auto res = spawn_and_wait(plugin,
                                  {{"CNI_COMMAND", "ADD"},
                                   {"CNI_CONTAINERID", cid},
                                   {"CNI_NETNS", "/x"},
                                   {"CNI_IFNAME", "eth0"},
                                   {"CNI_PATH", "/x"},
                                   {"CNI_ARGS",
                                    "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;"
                                    "K8S_POD_NAME=p"}},
                                  cfg);
        if (res.exit_code != 0) {
            std::fprintf(stderr, "%s: ADD failed: %s\n", m.name.c_str(), res.out.c_str());
            std::exit(1);
        }
        m.add_us.push_back(res.micros);
        m.add_cpu_us.push_back(res.cpu_micros);
    };
    std::vector<std::string> configs;
    for (const auto& m : modes) configs.push_back(m.config.dump());
    for (size_t r = 0; r < rounds; ++r) {
        std::vector<std::string> ids;
        for (size_t i = 0; i < per_round; ++i) {
            ids.push_back("c" + std::to_string(id++));
            // Each call starts with another mode: no mode always runs first (or last).
            for (size_t k = 0; k < modes.size(); ++k) {
                const size_t j = (i + r + k) % modes.size();
                add(modes[j], configs[j], ids.back());
            }
        }
        for (size_t j = 0; j < modes.size(); ++j) {
            for (const auto& c : ids) {
                spawn_and_wait(plugin,
                               {{"CNI_COMMAND", "DEL"},
                                {"CNI_CONTAINERID", c},
                                {"CNI_NETNS", "/x"},
                                {"CNI_IFNAME", "eth0"},
                                {"CNI_PATH", "/x"}},
                               configs[j]);
            }
        }
    }
    json out = json::array();
    std::printf(
        "| mode | ADD p50 (ms) | ADD p90 (ms) | CPU per ADD (ms) | p50 vs ranges | median of "
        "paired "
        "differences |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    const double ranges_p50 = percentiles(modes[0].add_us).p50;
    for (const auto& m : modes) {
        const auto p = percentiles(m.add_us);
        const auto c = percentiles(m.add_cpu_us);
        std::vector<double> paired;
        for (size_t i = 0; i < m.add_us.size(); ++i)
            paired.push_back(m.add_us[i] - modes[0].add_us[i]);
        const double paired_p50 = percentiles(paired).p50;
        std::printf("| %s | %.3f | %.3f | %.3f | %+.3f ms | %+.3f ms |\n", m.name.c_str(),
                    p.p50 / 1000, p.p90 / 1000, c.mean / 1000, (p.p50 - ranges_p50) / 1000,
                    paired_p50 / 1000);
        out.push_back({{"mode", m.name},
                       {"add_p50_us", p.p50},
                       {"add_p90_us", p.p90},
                       {"cpu_mean_us", c.mean},
                       {"paired_difference_p50_us", paired_p50},
                       {"samples", m.add_us.size()}});
    }
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
    return 0;
}
