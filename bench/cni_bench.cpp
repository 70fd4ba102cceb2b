// cni_bench: the same workloads through any CNI IPAM plugin binaries, side by side, in one run,
// each call a fresh process spawned by a pool of threads (as a Go runtime execs plugins):
//   floor   /bin/true and a static no-op through the same spawner
//   seq     N sequential ADDs then N DELs, latency by occupancy (tenths of N)
//   conc    ADDs then DELs with K concurrent callers, for each K: ops/s and percentiles
//   fill    ADDs into a /22 until it is full: first 50 against last 50
//   churn   a /16 populated with live allocations, then an open-loop ADD/DEL mix at a target
//           rate; latency from each call's scheduled start (queueing included)
//   variants  shmipam alone: data dir on disk or tmpfs, durability fsync or none, fdatasync or
//           io_uring; with pwrite+fdatasync measured in the same run
//   log     shmipam alone: the invocation log off, at info, at debug
//   targets the targets, computed from the figures above
// Every ADD's address is checked for duplicates and every failure counted; a run with either
// is marked invalid. Prints Markdown (and writes JSON with --json, SVG plots with --svg-dir).
#include <fcntl.h>
#include <unistd.h>

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
#include "bench/svg_plot.h"

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
    std::vector<double> cpu_micros;  // each call's own CPU time
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
                       const std::string& subnet, const json& extra = json::object()) {
    json ipam{{"type", p.name},
              {"dataDir", dir + "/data"},
              {"ranges", json::array({json::array({{{"subnet", subnet}}})})}};
    // Every shmipam build under comparison (shmipam, shmipam-old, ...) keeps its arenas apart.
    if (p.name.rfind("shmipam", 0) == 0) ipam["runDir"] = dir + "/run";
    for (const auto& [k, v] : extra.items()) ipam[k] = v;
    return json{{"cniVersion", "1.0.0"}, {"name", net}, {"type", "bridge"}, {"ipam", ipam}}.dump();
}

// ids[i] through the plugin with k callers; `seen` collects ADD addresses (duplicates counted).
Run drive(const std::string& binary, const std::string& cmd, const std::vector<std::string>& ids,
          const std::string& config, int k, std::set<std::string>* seen,
          std::map<std::string, std::string>* address_of = nullptr) {
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
                run.cpu_micros.push_back(r.cpu_micros);
                if (r.exit_code != 0) {
                    ++run.failures;
                    if (run.first_errors.size() < 3) run.first_errors.push_back(r.out);
                    continue;
                }
                if (seen != nullptr && cmd == "ADD") {
                    auto j = json::parse(r.out, nullptr, false);
                    if (j.is_object() && j.contains("ips")) {
                        for (const auto& ip : j["ips"]) {
                            const std::string a = ip["address"].get<std::string>();
                            if (!seen->insert(a).second) ++run.duplicates;
                            if (address_of != nullptr) (*address_of)[ids[i]] = a;
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
            {"cpuP50ms", percentiles(r.cpu_micros).p50 / 1000},
            {"failures", r.failures},
            {"duplicates", r.duplicates}};
}

// pwrite + fdatasync of 64 bytes, n times, in dir: the durable-commit floor of that filesystem.
std::vector<double> fdatasync_floor(const std::string& dir, int n) {
    std::vector<double> out;
    const std::string path = dir + "/fdatasync-probe";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return out;
    char buf[64] = {1};
    for (int i = 0; i < n; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        if (::pwrite(fd, buf, sizeof buf, off_t(i) * 64) != ssize_t(sizeof buf) ||
            ::fdatasync(fd) != 0) {
            break;
        }
        out.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    ::close(fd);
    ::unlink(path.c_str());
    return out;
}

// host-local's state written directly, as host-local itself writes it (one file per address
// holding "<container id>\r\n<ifname>", and last_reserved_ip.0): populating 5,000 allocations
// through host-local itself would take minutes, each ADD reading every file.
void populate_host_local(const std::string& net_dir, const std::vector<std::string>& ids,
                         std::map<std::string, std::string>& address_of) {
    std::filesystem::create_directories(net_dir);
    std::string last;
    for (size_t i = 0; i < ids.size(); ++i) {
        const size_t host = i + 2;  // 10.203.0.2 onwards
        const std::string ip =
            "10.203." + std::to_string(host / 256) + "." + std::to_string(host % 256);
        std::ofstream(net_dir + "/" + ip) << ids[i] << "\r\neth0";
        address_of[ids[i]] = ip + "/16";
        last = ip;
    }
    std::ofstream(net_dir + "/last_reserved_ip.0") << last;
}

struct Churn {
    Run add, del;
    double seconds = 0;
    size_t duplicates = 0;
};

// An open-loop ADD/DEL mix: call i is due at start + i / rate (ADDs of new attachments and DELs
// of live ones, alternating), run by a pool of `callers`; each latency runs from the call's due
// time, so a plugin that falls behind pays for its queue.
Churn churn(const std::string& binary, const std::string& config,
            const std::vector<std::string>& live, std::map<std::string, std::string> address_of,
            size_t n, double rate, int callers) {
    std::set<std::string> in_use;
    for (const auto& [id, a] : address_of) in_use.insert(a);
    Churn c;
    std::mutex mu;
    std::atomic<size_t> next{0};
    const auto t0 = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    std::vector<std::thread> pool;
    for (int w = 0; w < callers; ++w) {
        pool.emplace_back([&] {
            for (size_t i = next++; i < n && i / 2 < live.size(); i = next++) {
                const bool add = i % 2 == 0;
                const std::string id = add ? "churn" + std::to_string(i) : live[i / 2];
                const auto due =
                    t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(double(i) / rate));
                std::this_thread::sleep_until(due);
                if (!add) {
                    // Not in use from the moment its DEL starts (a quick reuse is no duplicate).
                    std::lock_guard<std::mutex> g(mu);
                    in_use.erase(address_of[id]);
                }
                auto r = spawn_and_wait(binary, env_for(add ? "ADD" : "DEL", id), config);
                const double micros = std::chrono::duration<double, std::micro>(
                                          std::chrono::steady_clock::now() - due)
                                          .count();
                std::lock_guard<std::mutex> g(mu);
                Run& run = add ? c.add : c.del;
                run.micros.push_back(micros);
                if (r.exit_code != 0) {
                    ++run.failures;
                    if (run.first_errors.size() < 3) run.first_errors.push_back(r.out);
                    continue;
                }
                if (add) {
                    auto j = json::parse(r.out, nullptr, false);
                    if (j.is_object() && j.contains("ips") && !j["ips"].empty()) {
                        const std::string a = j["ips"][0]["address"];
                        if (!in_use.insert(a).second) ++c.duplicates;
                    }
                }
            }
        });
    }
    for (auto& t : pool) t.join();
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    c.add.seconds = c.del.seconds = c.seconds;
    return c;
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
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
    bool fill = true, do_churn = true, variants = true, log_cost = true;
    std::string svg_dir, tmpfs = "/dev/shm";
    size_t churn_live = 5000, churn_ops = 300;
    double churn_rate = 10;
    app.add_option("--plugin", plugin_args, "NAME=PATH (NAME is the ipam type)")->required();
    app.add_option("--work", work, "directory for the plugins' state (a disk or a tmpfs)");
    app.add_option("--noop", noop, "a static no-op binary for the floor");
    app.add_option("--seq", seq_n, "sequential ADDs (then DELs)");
    app.add_option("--conc", conc_n, "ADDs (then DELs) per concurrency level");
    app.add_option("-k", ks, "concurrency levels");
    app.add_flag("!--no-fill", fill, "skip the /22 fill");
    app.add_option("--json", json_out, "write the results as JSON here");
    app.add_option("--svg-dir", svg_dir, "write the plots (SVG) into this directory");
    app.add_option("--tmpfs", tmpfs, "a tmpfs directory for the variants");
    app.add_option("--churn-live", churn_live, "live allocations before the churn");
    app.add_option("--churn-ops", churn_ops, "churn calls (ADDs and DELs alternating)");
    app.add_option("--churn-rate", churn_rate, "churn calls per second (open loop)");
    app.add_flag("!--no-churn", do_churn, "skip the churn");
    app.add_flag("!--no-variants", variants, "skip shmipam's durability variants");
    app.add_flag("!--no-log", log_cost, "skip the invocation log's cost");
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
        "## Floor: the same spawner, no IPAM work\n\n| binary | p50 ms | p99 ms | CPU ms per call "
        "(p50) | ops/s at K=32 |\n|---|---:|---:|---:|---:|\n");
    std::map<std::string, std::vector<double>> seq_add_micros;               // for the CDF plot
    std::map<std::string, std::vector<std::pair<double, double>>> ops_by_k;  // for the K plot
    // shmipam given an empty config answers an error at once: its start-up cost alone, to split
    // what a call costs into starting the binary and doing the IPAM work.
    std::string startup_probe;
    for (const auto& p : plugins) {
        if (p.name == "shmipam") startup_probe = p.path;
    }
    for (const auto& [name, bin] : std::vector<std::pair<std::string, std::string>>{
             {"/bin/true", "/bin/true"},
             {"static no-op", noop},
             {"shmipam start-up only (config rejected)", startup_probe}}) {
        if (bin.empty()) continue;
        const std::string cfg = "{}";
        Run one = drive(bin, "ADD", ids("f", 500), cfg, 1, nullptr);
        Run many = drive(bin, "ADD", ids("f", 2000), cfg, 32, nullptr);
        results["floor"][name] = {{"k1", stats_json(one)}, {"k32", stats_json(many)}};
        if (name != "shmipam start-up only (config rejected)") seq_add_micros[name] = one.micros;
        if (name == "/bin/true") {
            for (int k : ks) {
                Run r = k == 32 ? many : drive(bin, "ADD", ids("f", conc_n), cfg, k, nullptr);
                ops_by_k[name].push_back({double(k), double(r.micros.size()) / r.seconds});
                results["floor"][name]["byK"][std::to_string(k)] = stats_json(r);
            }
        }
        const auto p = percentiles(one.micros);
        std::printf("| %s | %s | %s | %s | %.0f |\n", name.c_str(), ms(p.p50 / 1000).c_str(),
                    ms(p.p99 / 1000).c_str(), ms(percentiles(one.cpu_micros).p50 / 1000).c_str(),
                    double(many.micros.size()) / many.seconds);
    }

    // Sequential, by occupancy.
    std::printf(
        "\n## Sequential: %zu ADDs then %zu DELs, one caller (p50 ms by occupancy tenth)\n\n",
        seq_n, seq_n);
    std::printf("| plugin | op |");
    for (int t = 0; t < 10; ++t) std::printf(" %d%% |", t * 10);
    std::printf(" all p50 | all p99 | CPU ms per call (p50) |\n|---|---|");
    for (int t = 0; t < 13; ++t) std::printf("---:|");
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
            std::printf(" %s | %s | %s |\n", ms(all.p50 / 1000).c_str(), ms(all.p99 / 1000).c_str(),
                        ms(percentiles(r.cpu_micros).p50 / 1000).c_str());
            results["seq"][p.name][cmd] = stats_json(r);
            if (std::string(cmd) == "ADD") seq_add_micros[p.name] = r.micros;
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
            ops_by_k[p.name].push_back({double(k), double(add.micros.size()) / add.seconds});
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
    // Churn over a populated /16.
    if (do_churn) {
        std::printf(
            "\n## Churn: %zu live allocations in a /16, then %zu calls (ADD and DEL alternating) "
            "at %.0f/s, open loop, up to 32 callers\n\nLatency from each call's due time, so "
            "queueing behind a slow plugin counts.\n\n| plugin | op | done/s | p50 ms | p90 ms | "
            "p99 ms | max ms |\n|---|---|---:|---:|---:|---:|---:|\n",
            churn_live, churn_ops, churn_rate);
        for (const auto& p : plugins) {
            const std::string dir = fresh_dir(p.name + "-churn");
            const std::string cfg = config_for(p, dir, "churn", "10.203.0.0/16");
            const auto live = ids("live", churn_live);
            std::map<std::string, std::string> address_of;
            if (p.name == "host-local") {
                populate_host_local(dir + "/data/churn", live, address_of);
            } else {
                std::set<std::string> seen;
                Run pop = drive(p.path, "ADD", live, cfg, 8, &seen, &address_of);
                valid &= pop.failures == 0 && pop.duplicates == 0;
            }
            Churn c = churn(p.path, cfg, live, address_of, churn_ops, churn_rate, 32);
            valid &= c.add.failures == 0 && c.del.failures == 0 && c.duplicates == 0;
            for (const auto* r : {&c.add, &c.del}) {
                const auto q = percentiles(r->micros);
                const char* op = r == &c.add ? "ADD" : "DEL";
                std::printf("| %s | %s | %.1f | %s | %s | %s | %s |\n", p.name.c_str(), op,
                            double(r->micros.size()) / c.seconds, ms(q.p50 / 1000).c_str(),
                            ms(q.p90 / 1000).c_str(), ms(q.p99 / 1000).c_str(),
                            ms(q.max / 1000).c_str());
                results["churn"][p.name][op] = stats_json(*r);
                if (r->failures) std::printf("\n%s failures: %s\n", op, r->first_errors[0].c_str());
            }
        }
    }

    // shmipam's durability variants, with the fdatasync floor of the same filesystems.
    double disk_sync_p50 = 0, disk_fsync_add_p50 = 0, tmpfs_none_add_p50 = 0;
    const auto shm_plugin = std::find_if(plugins.begin(), plugins.end(),
                                         [](const Plugin& p) { return p.name == "shmipam"; });
    if (variants && shm_plugin != plugins.end()) {
        const auto disk_sync = percentiles(fdatasync_floor(work, 300));
        const auto tmpfs_sync = percentiles(fdatasync_floor(tmpfs, 300));
        disk_sync_p50 = disk_sync.p50 / 1000;
        std::printf(
            "\n## shmipam: where the state lives and how it is made durable\n\npwrite + "
            "fdatasync of 64 bytes, same run: disk p50 %s / p99 %s ms, tmpfs p50 %s / p99 %s "
            "ms.\n\n| data dir | durability | backend | ADD p50 ms | ADD p99 ms | CPU ms per ADD "
            "(p50) | ADD ops/s at K=32 |\n|---|---|---|---:|---:|---:|---:|\n",
            ms(disk_sync.p50 / 1000).c_str(), ms(disk_sync.p99 / 1000).c_str(),
            ms(tmpfs_sync.p50 / 1000).c_str(), ms(tmpfs_sync.p99 / 1000).c_str());
        results["fdatasync"] = {
            {"disk", {{"p50ms", disk_sync.p50 / 1000}, {"p99ms", disk_sync.p99 / 1000}}},
            {"tmpfs", {{"p50ms", tmpfs_sync.p50 / 1000}, {"p99ms", tmpfs_sync.p99 / 1000}}}};
        struct Variant {
            const char* where;
            const char* durability;
            const char* backend;
        };
        for (const Variant v :
             {Variant{"disk", "fsync", "fdatasync"}, Variant{"disk", "fsync", "io_uring"},
              Variant{"disk", "none", "-"}, Variant{"tmpfs", "none", "-"},
              Variant{"tmpfs", "fsync", "fdatasync"}, Variant{"tmpfs", "fsync", "io_uring"}}) {
            const std::string base = std::string(v.where) == "disk" ? work : tmpfs;
            const std::string dir = base + "/shmipam-variant";
            std::filesystem::remove_all(dir);
            std::filesystem::create_directories(dir);
            json extra{{"durability", v.durability}};
            if (std::string(v.backend) != "-") extra["durabilityBackend"] = v.backend;
            const std::string cfg = config_for(*shm_plugin, dir, "variant", "10.204.0.0/16", extra);
            std::set<std::string> seen;
            drive(shm_plugin->path, "ADD", {"warm"}, cfg, 1, &seen);
            Run seq = drive(shm_plugin->path, "ADD", ids("v", 300), cfg, 1, &seen);
            Run conc = drive(shm_plugin->path, "ADD", ids("w", 400), cfg, 32, &seen);
            std::filesystem::remove_all(dir);
            valid &= seq.failures == 0 && conc.failures == 0 && seq.duplicates == 0 &&
                     conc.duplicates == 0;
            const auto q = percentiles(seq.micros);
            std::printf("| %s | %s | %s | %s | %s | %s | %.0f |\n", v.where, v.durability,
                        v.backend, ms(q.p50 / 1000).c_str(), ms(q.p99 / 1000).c_str(),
                        ms(percentiles(seq.cpu_micros).p50 / 1000).c_str(),
                        double(conc.micros.size()) / conc.seconds);
            const std::string key = std::string(v.where) + "/" + v.durability + "/" + v.backend;
            results["variants"][key] = {{"seq", stats_json(seq)}, {"k32", stats_json(conc)}};
            if (key == "disk/fsync/fdatasync") disk_fsync_add_p50 = q.p50 / 1000;
            if (key == "tmpfs/none/-") tmpfs_none_add_p50 = q.p50 / 1000;
        }
    }

    // The invocation log's cost (ipam.logFile): off, info, debug, in rounds taken in turn so
    // that the machine's drift hits each alike; state on tmpfs without fsync (the log's cost
    // alone), the log file on the work directory's file system.
    if (log_cost && shm_plugin != plugins.end()) {
        std::printf(
            "\n## shmipam: the invocation log's cost\n\nSequential ADDs, state on tmpfs with "
            "durability none, the log on %s; %d rounds of 100 ADDs per setting, taken in turn."
            "\n\n| logFile | ADD p50 ms | ADD p99 ms | CPU ms per ADD (p50) |\n|---|---:|---:|---:|"
            "\n",
            work.c_str(), 6);
        struct Setting {
            const char* name;
            json extra;
            std::vector<double> micros, cpu;
        };
        std::vector<Setting> settings{
            {"off", json::object(), {}, {}},
            {"info", {{"logFile", work + "/bench-log/info.log"}}, {}, {}},
            {"debug", {{"logFile", work + "/bench-log/debug.log"}, {"logLevel", "debug"}}, {}, {}}};
        std::filesystem::create_directories(work + "/bench-log");
        for (int round = 0; round < 6; ++round) {
            for (auto& st : settings) {
                const std::string dir = tmpfs + "/shmipam-log-" + st.name;
                json extra = st.extra;
                extra["durability"] = "none";
                const std::string cfg =
                    config_for(*shm_plugin, dir, "logged", "10.205.0.0/16", extra);
                std::set<std::string> seen;
                if (round == 0) drive(shm_plugin->path, "ADD", {"warm"}, cfg, 1, &seen);
                Run r = drive(shm_plugin->path, "ADD", ids("l" + std::to_string(round) + "-", 100),
                              cfg, 1, nullptr);
                valid &= r.failures == 0;
                st.micros.insert(st.micros.end(), r.micros.begin(), r.micros.end());
                st.cpu.insert(st.cpu.end(), r.cpu_micros.begin(), r.cpu_micros.end());
            }
        }
        for (auto& st : settings) {
            const auto q = percentiles(st.micros);
            std::printf("| %s | %s | %s | %s |\n", st.name, ms(q.p50 / 1000).c_str(),
                        ms(q.p99 / 1000).c_str(), ms(percentiles(st.cpu).p50 / 1000).c_str());
            results["log"][st.name] = {{"p50ms", q.p50 / 1000}, {"p99ms", q.p99 / 1000}};
            std::filesystem::remove_all(tmpfs + "/shmipam-log-" + st.name);
        }
        std::filesystem::remove_all(work + "/bench-log");
    }

    // The targets, from this run's figures.
    auto get = [&](const json& j, std::initializer_list<std::string> path) -> double {
        const json* cur = &j;
        for (const auto& k : path) {
            if (!cur->is_object() || !cur->contains(k)) return 0;
            cur = &(*cur)[k];
        }
        return cur->is_number() ? cur->get<double>() : 0;
    };
    const double noop_p50 = get(results, {"floor", "static no-op", "k1", "p50ms"});
    const double true_k32 = get(results, {"floor", "/bin/true", "k32", "opsPerSecond"});
    const double shm_k32 = get(results, {"conc", "shmipam", "32", "add", "opsPerSecond"});
    const double shm_p99 = get(results, {"conc", "shmipam", "32", "add", "p99ms"});
    const double hl_p99 = get(results, {"conc", "host-local", "32", "add", "p99ms"});
    const double first50 = get(results, {"fill", "shmipam", "first50p50ms"});
    const double last50 = get(results, {"fill", "shmipam", "last50p50ms"});
    std::printf("\n## Targets (this run)\n\n| target | measured | met |\n|---|---|---|\n");
    auto row = [&](const std::string& what, const std::string& measured, bool met) {
        std::printf("| %s | %s | %s |\n", what.c_str(), measured.c_str(), met ? "yes" : "**no**");
        results["targets"].push_back({{"target", what}, {"measured", measured}, {"met", met}});
    };
    if (disk_fsync_add_p50 > 0 && noop_p50 > 0) {
        const double bound = noop_p50 + disk_sync_p50 + 0.1;
        row("disk, fsync: ADD p50 <= no-op p50 + fdatasync p50 + 0.1 ms",
            ms(disk_fsync_add_p50) + " ms vs " + ms(bound) + " ms", disk_fsync_add_p50 <= bound);
    }
    if (tmpfs_none_add_p50 > 0 && noop_p50 > 0) {
        row("tmpfs, none: ADD p50 <= 1.25 x no-op p50",
            ms(tmpfs_none_add_p50) + " ms vs " + ms(1.25 * noop_p50) + " ms",
            tmpfs_none_add_p50 <= 1.25 * noop_p50);
    }
    if (first50 > 0) {
        row("flat: last 50 of a /22 within noise of the first 50 (<= 1.2x)",
            ms(last50) + " vs " + ms(first50) + " ms", last50 <= 1.2 * first50);
    }
    if (true_k32 > 0 && shm_k32 > 0) {
        char b[96];
        std::snprintf(b, sizeof b, "%.0f vs %.0f ADD/s (%.2fx)", shm_k32, true_k32,
                      shm_k32 / true_k32);
        row("K=32: >= 0.7x /bin/true's throughput", b, shm_k32 >= 0.7 * true_k32);
    }
    if (hl_p99 > 0 && shm_p99 > 0) {
        char b[160];
        const double true_p99 = get(results, {"floor", "/bin/true", "k32", "p99ms"});
        std::snprintf(b, sizeof b, "%.1f vs %.1f ms (%.2fx; /bin/true's own: %.1f ms)", shm_p99,
                      hl_p99, shm_p99 / hl_p99, true_p99);
        row("K=32: p99 <= 1/10 of host-local's", b, shm_p99 <= 0.1 * hl_p99);
    }

    if (!svg_dir.empty()) {
        std::filesystem::create_directories(svg_dir);
        std::vector<shmipam::bench::Series> cdf, byk;
        for (const auto& [name, micros] : seq_add_micros) {
            std::vector<double> msv;
            for (double m : micros) msv.push_back(m / 1000);
            cdf.push_back(
                {name == "/bin/true" || name == "static no-op" ? name + " (floor)" : name + " ADD",
                 shmipam::bench::cdf_points(msv)});
        }
        for (const auto& [name, pts] : ops_by_k) {
            byk.push_back({name == "/bin/true" ? "/bin/true (floor)" : name + " ADD", pts});
        }
        write_file(svg_dir + "/bench-latency-cdf.svg",
                   shmipam::bench::line_chart(
                       {"Sequential ADD latency, one caller (CDF)", "latency per call (ms, log)",
                        "fraction of calls", true, false},
                       cdf));
        write_file(
            svg_dir + "/bench-ops-by-k.svg",
            shmipam::bench::line_chart({"ADD throughput by concurrent callers",
                                        "concurrent callers K (log)", "calls/s (log)", true, true},
                                       byk));
    }
    results["valid"] = valid;
    std::printf("\n%s\n", valid ? "Run valid: no duplicate address, no failed call."
                                : "RUN INVALID: duplicates or failures (see above).");
    if (!json_out.empty()) std::ofstream(json_out) << results.dump(2) << "\n";
    return valid ? 0 : 1;
}
