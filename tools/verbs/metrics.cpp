// shmipamctl metrics: Prometheus text for one network or all, printed or written atomically
// for node_exporter's textfile collector.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/prometheus.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_metrics(const Options& o) {
    std::vector<std::string> names;
    if (!o.network.empty()) {
        names.push_back(o.network);
    } else {
        std::string err;
        names = networks_under(o.run_dir, &err);
        if (!err.empty()) return cannot_read(err);
    }
    std::vector<engine::NetworkDump> dumps;
    std::vector<ClaimCounts> claims;
    for (const auto& n : names) {
        Options one = o;
        one.network = n;
        auto store = open_network(one, shm::Access::kReadOnly);
        if (!store) return cannot_read(store.error());
        auto d = engine::dump(**store);
        if (!d) return cannot_read(d.error());
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
    const std::string text = metrics_text(dumps, claims);
    if (o.textfile_dir.empty()) {
        std::cout << text;
        return kExitClean;
    }
    // node_exporter's textfile collector reads *.prom: write aside, rename into place, so that
    // it never reads half a file.
    const std::string final_path = o.textfile_dir + "/shmipam.prom";
    const std::string tmp = final_path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream f(tmp);
        f << text;
        if (!f) return cannot_read("cannot write " + tmp);
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return cannot_read("cannot rename to " + final_path + ": " + std::strerror(err));
    }
    return kExitClean;
}

}  // namespace shmipam::tools
