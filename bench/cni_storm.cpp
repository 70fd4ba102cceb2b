// cni_storm: drives a CNI IPAM plugin binary through N ADDs then N DELs with K concurrent
// callers (a pool of threads, each spawning one process at a time, as a runtime does), checks
// that no address was handed out twice, and prints latency figures. Used by the demo; the
// benchmark harness builds on the same spawner.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "bench/exec_spawner.h"

using shmipam::bench::ExecResult;

namespace {

struct Phase {
    std::vector<double> micros;
    std::vector<std::string> addresses;
    std::vector<std::string> errors;
    double wall_seconds = 0;
};

Phase run_phase(const std::string& plugin, const std::string& command, const std::string& config,
                int n, int concurrency, const std::string& prefix) {
    Phase ph;
    std::mutex mu;
    std::atomic<int> next{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int w = 0; w < concurrency; ++w) {
        pool.emplace_back([&] {
            for (int i = next++; i < n; i = next++) {
                std::map<std::string, std::string> env{
                    {"CNI_COMMAND", command},
                    {"CNI_CONTAINERID", prefix + std::to_string(i)},
                    {"CNI_NETNS", "/var/run/netns/demo"},
                    {"CNI_IFNAME", "eth0"},
                    {"CNI_PATH", "/usr/lib/cni"},
                    {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=pod-" +
                                     std::to_string(i)}};
                ExecResult r = shmipam::bench::spawn_and_wait(plugin, env, config);
                std::lock_guard<std::mutex> g(mu);
                ph.micros.push_back(r.micros);
                if (r.exit_code != 0) {
                    ph.errors.push_back(r.out.empty() ? "exit " + std::to_string(r.exit_code)
                                                      : r.out);
                    continue;
                }
                if (command == "ADD") {
                    auto j = nlohmann::json::parse(r.out, nullptr, false);
                    if (j.is_object() && j.contains("ips")) {
                        for (const auto& ip : j["ips"]) ph.addresses.push_back(ip["address"]);
                    }
                }
            }
        });
    }
    for (auto& t : pool) t.join();
    ph.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return ph;
}

void report(const char* name, const Phase& ph, int n) {
    const auto p = shmipam::bench::percentiles(ph.micros);
    std::printf(
        "%-4s %5d calls  %7.0f calls/s   p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  max %7.2f ms  "
        "errors %zu\n",
        name, n, double(n) / ph.wall_seconds, p.p50 / 1000, p.p90 / 1000, p.p99 / 1000,
        p.max / 1000, ph.errors.size());
}

}  // namespace

int run_adds(const std::string& plugin, const std::string& config, int n, int concurrency);

int main(int argc, char** argv) {
    CLI::App app{"cni_storm: concurrent ADD/DEL through a CNI IPAM plugin binary"};
    std::string plugin, config_path;
    int n = 300, concurrency = 32;
    std::string phase = "both";
    std::vector<std::string> ipam_overrides;
    app.add_option("--plugin", plugin, "plugin binary")->required();
    app.add_option("--config", config_path, "network config (JSON)")->required();
    app.add_option("-n,--count", n, "ADDs (then as many DELs)")->capture_default_str();
    app.add_option("-k,--concurrency", concurrency, "concurrent callers")->capture_default_str();
    app.add_option("--phase", phase, "add, del or both")
        ->check(CLI::IsMember({"add", "del", "both"}))
        ->capture_default_str();
    app.add_option("--set-ipam", ipam_overrides, "override an ipam string field: KEY=VALUE");
    CLI11_PARSE(app, argc, argv);

    std::ifstream in(config_path);
    std::stringstream ss;
    ss << in.rdbuf();
    auto doc = nlohmann::json::parse(ss.str(), nullptr, false);
    if (!doc.is_object() || !doc.contains("ipam")) {
        std::cerr << "cannot read a network config from " << config_path << "\n";
        return 2;
    }
    for (const auto& kv : ipam_overrides) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) {
            std::cerr << "--set-ipam wants KEY=VALUE\n";
            return 2;
        }
        doc["ipam"][kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    const std::string config = doc.dump();
    int rc = 0;
    if (phase != "del") rc |= run_adds(plugin, config, n, concurrency);
    if (phase != "add") {
        Phase del = run_phase(plugin, "DEL", config, n, concurrency, "demo-");
        report("DEL", del, n);
        if (!del.errors.empty()) rc = 1;
    }
    return rc;
}

int run_adds(const std::string& plugin, const std::string& config, int n, int concurrency) {
    Phase add = run_phase(plugin, "ADD", config, n, concurrency, "demo-");
    std::set<std::string> unique(add.addresses.begin(), add.addresses.end());
    std::printf("%d concurrent callers, %d ADDs: %zu addresses handed out, %zu distinct\n",
                concurrency, n, add.addresses.size(), unique.size());
    if (!add.addresses.empty()) {
        std::printf("first %s ... last %s (in completion order)\n", add.addresses.front().c_str(),
                    add.addresses.back().c_str());
    }
    report("ADD", add, n);
    for (size_t i = 0; i < std::min<size_t>(3, add.errors.size()); ++i) {
        std::printf("  error: %s", add.errors[i].c_str());
    }
    if (unique.size() != add.addresses.size()) std::printf("DUPLICATE ADDRESSES HANDED OUT\n");
    return unique.size() == add.addresses.size() && add.errors.empty() ? 0 : 1;
}
