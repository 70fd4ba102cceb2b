// shmipamctl metrics: Prometheus text for one network or all, printed or written atomically
// for node_exporter's textfile collector.
#include <unistd.h>

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

// The metrics text of one network or all of them, or the exit code of what could not be read.
Expected<std::string> collect(const Options& o) {
    std::vector<std::string> names;
    if (!o.network.empty()) {
        names.push_back(o.network);
    } else {
        std::string err;
        names = networks_under(o.run_dir, &err);
        if (!err.empty()) return make_error(Code::kIo, err);
    }
    std::vector<engine::NetworkDump> dumps;
    std::vector<ClaimCounts> claims;
    for (const auto& n : names) {
        Options one = o;
        one.network = n;
        auto store = open_network(one, shm::Access::kReadOnly);
        if (!store) return store.error();
        auto d = engine::dump(**store);
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
    return metrics_text(dumps, claims);
}

// node_exporter's textfile collector reads *.prom: written aside, renamed into place, so that
// it never reads half a file.
Status write_textfile(const std::string& dir, const std::string& text) {
    const std::string final_path = dir + "/shmipam.prom";
    const std::string tmp = final_path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream f(tmp);
        f << text;
        if (!f) return make_error(Code::kIo, "cannot write " + tmp);
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return make_error(Code::kIo, "cannot rename to " + final_path + ": " + std::strerror(err));
    }
    return Ok{};
}

}  // namespace

int cmd_metrics(const Options& o) {
    if (o.textfile_dir.empty()) {
        auto text = collect(o);
        if (!text) return cannot_read(text.error());
        std::cout << *text;
        return kExitClean;
    }
    // --every: the loop of a metrics container (deploy/kubernetes): a round that cannot read
    // (a network being created, say) says so and the next round tries again.
    for (;;) {
        auto text = collect(o);
        Status st = text ? write_textfile(o.textfile_dir, *text) : Status(text.error());
        if (!st && o.every_s <= 0) return cannot_read(st.error());
        if (!st) std::cerr << "shmipamctl metrics: " << st.error().msg << "\n";
        if (o.every_s <= 0) return kExitClean;
        std::this_thread::sleep_for(std::chrono::duration<double>(o.every_s));
    }
}

}  // namespace shmipam::tools
