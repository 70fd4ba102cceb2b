// cni_bench: the same workloads through any CNI IPAM plugin binaries, side by side, in one run,
// each call a fresh process spawned by a pool of threads (as a Go runtime execs plugins):
//   floor   /bin/true and a static no-op through the same spawner
//   seq     N sequential ADDs then N DELs, latency by occupancy (tenths of N)
//   conc    ADDs then DELs with K concurrent callers, for each K: ops/s and percentiles
//   fill    ADDs into a /22 until it is full: first 50 against last 50
// Every ADD's address is checked for duplicates and every failure counted; a run with either
// is marked invalid. Prints Markdown (and writes JSON with --json).
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "bench/exec_spawner.h"

using nlohmann::json;
using shmipam::bench::percentiles;
using shmipam::bench::spawn_and_wait;

namespace {

struct Plugin {
    std::string name;
    std::string path;
};

struct Run {
    std::vector<double> micros;
    double seconds = 0;
    size_t failures = 0;
    size_t duplicates = 0;
    std::vector<std::string> first_errors;
};

std::map<std::string, std::string> env_for(const std::string& cmd, const std::string& id) {
    return {
        {"CNI_COMMAND", cmd},   {"CNI_CONTAINERID", id},      {"CNI_NETNS", "/var/run/netns/bench"},
        {"CNI_IFNAME", "eth0"}, {"CNI_PATH", "/usr/lib/cni"}, {"CNI_ARGS", "IgnoreUnknown=1"}};
}

std::string config_for(const Plugin& p, const std::string& dir, const std::string& net,
                       const std::string& subnet) {
    json ipam{{"type", p.name},
              {"dataDir", dir + "/data"},
              {"ranges", json::array({json::array({{{"subnet", subnet}}})})}};
    if (p.name == "shmipam") ipam["runDir"] = dir + "/run";
    return json{{"cniVersion", "1.0.0"}, {"name", net}, {"type", "bridge"}, {"ipam", ipam}}.dump();
}

// ids[i] through the plugin with k callers; `seen` collects ADD addresses (duplicates counted).
Run drive(const std::string& binary, const std::string& cmd, const std::vector<std::string>& ids,
          const std::string& config, int k, std::set<std::string>* seen) {
    Run run;
    std::mutex mu;
    std::atomic<size_t> next{0};
    run.micros.reserve(ids.size());
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int w = 0; w < k; ++w) {
        pool.emplace_back([&] {
            for (size_t i = next++; i < ids.size(); i = next++) {
                auto r = spawn_and_wait(binary, env_for(cmd, ids[i]), config);
                std::lock_guard<std::mutex> g(mu);
                run.micros.push_back(r.micros);
                if (r.exit_code != 0) {
                    ++run.failures;
                    if (run.first_errors.size() < 3) run.first_errors.push_back(r.out);
                    continue;
                }
                if (seen != nullptr && cmd == "ADD") {
                    auto j = json::parse(r.out, nullptr, false);
                    if (j.is_object() && j.contains("ips")) {
                        for (const auto& ip : j["ips"]) {
                            if (!seen->insert(ip["address"].get<std::string>()).second)
                                ++run.duplicates;
                        }
                    }
                }
            }
        });
    }
    for (auto& t : pool) t.join();
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return run;
}

std::vector<std::string> ids(const std::string& prefix, size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
    return out;
}

json stats_json(const Run& r) {
    const auto p = percentiles(r.micros);
    return {{"n", r.micros.size()},
            {"opsPerSecond", r.seconds > 0 ? double(r.micros.size()) / r.seconds : 0},
            {"p50ms", p.p50 / 1000},
            {"p90ms", p.p90 / 1000},
            {"p99ms", p.p99 / 1000},
            {"maxms", p.max / 1000},
            {"failures", r.failures},
            {"duplicates", r.duplicates}};
}

std::string ms(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"cni_bench: CNI IPAM plugins side by side, one process per call"};
    std::vector<std::string> plugin_args;
    std::string work = "/var/tmp/cni-bench", json_out, noop;
    size_t seq_n = 2000, conc_n = 400;
    std::vector<int> ks{1, 2, 8, 32, 128};
    bool fill = true;
    app.add_option("--plugin", plugin_args, "NAME=PATH (NAME is the ipam type)")->required();
    app.add_option("--work", work, "directory for the plugins' state (a disk or a tmpfs)");
    app.add_option("--noop", noop, "a static no-op binary for the floor");
    app.add_option("--seq", seq_n, "sequential ADDs (then DELs)");
    app.add_option("--conc", conc_n, "ADDs (then DELs) per concurrency level");
    app.add_option("-k", ks, "concurrency levels");
    app.add_flag("!--no-fill", fill, "skip the /22 fill");
    app.add_option("--json", json_out, "write the results as JSON here");
    CLI11_PARSE(app, argc, argv);

    std::vector<Plugin> plugins;
    for (const auto& a : plugin_args) {
        const size_t eq = a.find('=');
        if (eq == std::string::npos) {
            std::fprintf(stderr, "--plugin wants NAME=PATH\n");
            return 2;
        }
        plugins.push_back({a.substr(0, eq), a.substr(eq + 1)});
    }
    json results;
    bool valid = true;
    auto fresh_dir = [&](const std::string& what) {
        const std::string d = work + "/" + what;
        std::filesystem::remove_all(d);
        std::filesystem::create_directories(d);
        return d;
    };

    // Floor.
    std::printf(
        "## Floor: the same spawner, no IPAM work\n\n| binary | p50 ms | p99 ms | ops/s at K=32 "
        "|\n|---|---:|---:|---:|\n");
    for (const auto& [name, bin] : std::vector<std::pair<std::string, std::string>>{
             {"/bin/true", "/bin/true"}, {"static no-op", noop}}) {
        if (bin.empty()) continue;
        const std::string cfg = "{}";
        Run one = drive(bin, "ADD", ids("f", 500), cfg, 1, nullptr);
        Run many = drive(bin, "ADD", ids("f", 2000), cfg, 32, nullptr);
        results["floor"][name] = {{"k1", stats_json(one)}, {"k32", stats_json(many)}};
        const auto p = percentiles(one.micros);
        std::printf("| %s | %s | %s | %.0f |\n", name.c_str(), ms(p.p50 / 1000).c_str(),
                    ms(p.p99 / 1000).c_str(), double(many.micros.size()) / many.seconds);
    }

    // Sequential, by occupancy.
    std::printf(
        "\n## Sequential: %zu ADDs then %zu DELs, one caller (p50 ms by occupancy tenth)\n\n",
        seq_n, seq_n);
    std::printf("| plugin | op |");
    for (int t = 0; t < 10; ++t) std::printf(" %d%% |", t * 10);
    std::printf(" all p50 | all p99 |\n|---|---|");
    for (int t = 0; t < 12; ++t) std::printf("---:|");
    std::printf("\n");
    for (const auto& p : plugins) {
        const std::string dir = fresh_dir(p.name + "-seq");
        const std::string cfg = config_for(p, dir, "seq", "10.200.0.0/16");
        std::set<std::string> seen;
        const auto list = ids("s", seq_n);
        for (const char* cmd : {"ADD", "DEL"}) {
            Run r = drive(p.path, cmd, list, cfg, 1, std::string(cmd) == "ADD" ? &seen : nullptr);
            valid &= r.failures == 0 && r.duplicates == 0;
            std::printf("| %s | %s |", p.name.c_str(), cmd);
            json tenths = json::array();
            for (int t = 0; t < 10; ++t) {
                const size_t a = r.micros.size() * t / 10, b = r.micros.size() * (t + 1) / 10;
                const auto pt =
                    percentiles(std::vector<double>(r.micros.begin() + a, r.micros.begin() + b));
                tenths.push_back(pt.p50 / 1000);
                std::printf(" %s |", ms(pt.p50 / 1000).c_str());
            }
            const auto all = percentiles(r.micros);
            std::printf(" %s | %s |\n", ms(all.p50 / 1000).c_str(), ms(all.p99 / 1000).c_str());
            results["seq"][p.name][cmd] = stats_json(r);
            results["seq"][p.name][cmd]["p50msByTenth"] = tenths;
            if (r.failures)
                std::printf("\n%s %s failures: %s\n", p.name.c_str(), cmd,
                            r.first_errors.front().c_str());
        }
    }

    // Concurrency sweep.
    std::printf(
        "\n## Concurrent: %zu ADDs then %zu DELs per level, K callers\n\n| plugin | K | ADD ops/s "
        "| ADD p50 | ADD p90 | ADD p99 | ADD max | DEL ops/s | DEL p50 | DEL p99 "
        "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        conc_n, conc_n);
    for (const auto& p : plugins) {
        for (int k : ks) {
            const std::string dir = fresh_dir(p.name + "-k" + std::to_string(k));
            const std::string cfg = config_for(p, dir, "conc", "10.201.0.0/16");
            std::set<std::string> seen;
            const auto list = ids("c", conc_n);
            // Steady state: the network exists before the clock starts.
            drive(p.path, "ADD", {"warm"}, cfg, 1, nullptr);
            drive(p.path, "DEL", {"warm"}, cfg, 1, nullptr);
            Run add = drive(p.path, "ADD", list, cfg, k, &seen);
            Run del = drive(p.path, "DEL", list, cfg, k, nullptr);
            valid &= add.failures == 0 && add.duplicates == 0 && del.failures == 0;
            const auto a = percentiles(add.micros), d = percentiles(del.micros);
            std::printf("| %s | %d | %.0f | %s | %s | %s | %s | %.0f | %s | %s |\n", p.name.c_str(),
                        k, double(add.micros.size()) / add.seconds, ms(a.p50 / 1000).c_str(),
                        ms(a.p90 / 1000).c_str(), ms(a.p99 / 1000).c_str(),
                        ms(a.max / 1000).c_str(), double(del.micros.size()) / del.seconds,
                        ms(d.p50 / 1000).c_str(), ms(d.p99 / 1000).c_str());
            results["conc"][p.name][std::to_string(k)] = {{"add", stats_json(add)},
                                                          {"del", stats_json(del)}};
        }
    }

    // Fill a /22.
    if (fill) {
        std::printf(
            "\n## Fill a /22 to exhaustion, one caller\n\n| plugin | addresses | first 50 p50 ms | "
            "last 50 p50 ms | ADD after full |\n|---|---:|---:|---:|---|\n");
        for (const auto& p : plugins) {
            const std::string dir = fresh_dir(p.name + "-fill");
            const std::string cfg = config_for(p, dir, "fill", "10.202.0.0/22");
            std::set<std::string> seen;
            Run r = drive(p.path, "ADD", ids("x", 1021), cfg, 1, &seen);
            auto extra = spawn_and_wait(p.path, env_for("ADD", "one-more"), cfg);
            valid &= r.failures == 0 && r.duplicates == 0 && extra.exit_code != 0;
            const auto first =
                percentiles(std::vector<double>(r.micros.begin(), r.micros.begin() + 50));
            const auto last = percentiles(std::vector<double>(r.micros.end() - 50, r.micros.end()));
            auto ej = json::parse(extra.out, nullptr, false);
            const std::string code = ej.is_object() && ej.contains("code")
                                         ? "error " + ej["code"].dump()
                                         : "exit " + std::to_string(extra.exit_code);
            std::printf("| %s | %zu | %s | %s | %s |\n", p.name.c_str(), seen.size(),
                        ms(first.p50 / 1000).c_str(), ms(last.p50 / 1000).c_str(), code.c_str());
            results["fill"][p.name] = {{"addresses", seen.size()},
                                       {"first50p50ms", first.p50 / 1000},
                                       {"last50p50ms", last.p50 / 1000}};
        }
    }
    results["valid"] = valid;
    std::printf("\n%s\n", valid ? "Run valid: no duplicate address, no failed call."
                                : "RUN INVALID: duplicates or failures (see above).");
    if (!json_out.empty()) std::ofstream(json_out) << results.dump(2) << "\n";
    return valid ? 0 : 1;
}
