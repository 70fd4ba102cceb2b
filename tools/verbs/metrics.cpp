// shmipamctl metrics: Prometheus text for one network or all, printed or written atomically
// for node_exporter's textfile collector.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include "engine/inspect/inspect.h"
#include "tools/render/prometheus.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

struct MetricsOptions {
    std::string textfile_dir;  // write <dir>/shmipam.prom rather than print
    double every_s = 0;        // with textfile_dir: rewrite it this often until stopped
};

// The metrics text of one network or all of them, or the exit code of what could not be read.
// With `skipped`, a network that cannot be read is left out (and named there) rather than
// failing the whole text: one network being created must not freeze every other's metrics.
Expected<std::string> collect(const CommonOptions& common,
                              std::vector<std::string>* skipped = nullptr) {
    std::vector<std::string> names;
    if (!common.network.empty()) {
        names.push_back(common.network);
    } else {
        std::string err;
        names = networks_under(common.run_dir, &err);
        if (!err.empty()) return make_error(Code::kIo, err);
    }
    std::vector<engine::NetworkDump> dumps;
    std::vector<ClaimCounts> claims;
    for (const auto& n : names) {
        auto store = open_network(common.run_dir, n, shm::Access::kReadOnly);
        auto d = store ? engine::dump(**store) : Expected<engine::NetworkDump>(store.error());
        if (!d && skipped != nullptr) {
            skipped->push_back(n + ": " + d.error().msg);
            continue;
        }
        if (!d) return d.error();
        dumps.push_back(std::move(*d));
        engine::NetworkConfig none;
        ClaimCounts counts;
        for (const auto& c : engine::Allocator(**store, none).claims()) {
            if (c.use == engine::ClaimView::Use::kIdle) {
                ++counts.idle;
            } else if (c.use != engine::ClaimView::Use::kExpiring) {
                ++counts.in_use;
            }
        }
        claims.push_back(counts);
    }
    std::string text = metrics_text(dumps, claims);
    // The node's StatefulSet rechecks, when any ran under this run directory.
    auto rechecks = ipam::read_recheck_record(common.run_dir);
    if (!rechecks && skipped != nullptr) {
        skipped->push_back(rechecks.error().msg);
    } else if (!rechecks) {
        return rechecks.error();
    } else if (*rechecks) {
        text += recheck_metrics_text(**rechecks);
    }
    return text;
}

int cmd_metrics(const CommonOptions& common, const MetricsOptions& o) {
    if (o.textfile_dir.empty()) {
        auto text = collect(common);
        if (!text) return cannot_read(text.error());
        std::cout << *text;
        return kExitClean;
    }
    if (o.every_s <= 0) {
        auto text = collect(common);
        Status st =
            text ? write_textfile(o.textfile_dir, "shmipam.prom", *text) : Status(text.error());
        return st ? kExitClean : cannot_read(st.error());
    }
    // --every: the loop of a metrics container (deploy/kubernetes), often its PID 1, which
    // gets no SIGTERM without a handler: stopped at once, between two rounds or inside one
    // (a half-written file is a temporary name the collector never reads).
    struct sigaction stop {};
    stop.sa_handler = [](int) { ::_exit(0); };
    ::sigaction(SIGTERM, &stop, nullptr);
    ::sigaction(SIGINT, &stop, nullptr);
    for (;;) {
        std::vector<std::string> skipped;
        auto text = collect(common, &skipped);
        Status st =
            text ? write_textfile(o.textfile_dir, "shmipam.prom", *text) : Status(text.error());
        for (const auto& s : skipped) std::cerr << "shmipamctl metrics: skipped " << s << "\n";
        if (!st) std::cerr << "shmipamctl metrics: " << st.error().msg << "\n";
        std::this_thread::sleep_for(std::chrono::duration<double>(o.every_s));
    }
}

}  // namespace

void register_metrics(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb =
        app.add_subcommand("metrics", "Prometheus text format, for one network or all of them");
    add_network_argument(*verb, common, false);
    auto o = std::make_shared<MetricsOptions>();
    auto* textfile =
        verb->add_option("--textfile", o->textfile_dir,
                         "write <dir>/shmipam.prom atomically (node_exporter textfile collector)");
    verb->add_option("--every", o->every_s,
                     "with --textfile: rewrite it every this many seconds until stopped")
        ->check(CLI::PositiveNumber)
        ->needs(textfile);
    verb->callback([&common, o, &exit_code] { exit_code = cmd_metrics(common, *o); });
}

}  // namespace shmipam::tools
