// `ls` and `stats` as text and JSON (network_summary.h). The text columns are printf-aligned
// so that a person can scan them; scripts are meant to read --json.
#include "tools/render/network_summary.h"

#include <cstdio>

#include "tools/render/json.h"

namespace shmipam::tools {

using nlohmann::json;

namespace {

struct Totals {
    uint64_t slots = 0, in_use = 0, cooling = 0;
    uint64_t claims = 0, releases = 0, retries = 0, rollbacks = 0;
};

Totals totals(const engine::NetworkDump& d) {
    Totals t;
    for (const auto& b : d.blocks) {
        t.slots += b.slots;
        t.in_use += b.in_use;
        t.cooling += b.cooling;
        t.claims += b.claims;
        t.releases += b.releases;
        t.retries += b.cas_retries;
        t.rollbacks += b.rollbacks;
    }
    return t;
}

double share(uint64_t part, uint64_t whole) {
    return whole ? double(part) / double(whole) : 0.0;
}

std::string format(const char* fmt, auto... args) {
    char line[512];
    std::snprintf(line, sizeof line, fmt, args...);
    return line;
}

}  // namespace

json ls_json(const std::vector<LsRow>& rows) {
    json out = json::array();
    for (const auto& r : rows) {
        if (!r.error.empty()) {
            out.push_back({{"network", r.network}, {"error", r.error}});
            continue;
        }
        const engine::NetworkDump& d = r.dump;
        json blocks = json::array();
        for (const auto& b : d.blocks) {
            blocks.push_back({{"cidr", b.cidr},
                              {"inUse", b.in_use},
                              {"cooling", b.cooling},
                              {"slots", b.slots}});
        }
        const Totals t = totals(d);
        out.push_back({{"network", r.network},
                       {"dataDir", d.data_dir},
                       {"ranges", d.ranges},
                       {"reuseDelayMs", d.reuse_delay_ms},
                       {"blocks", blocks},
                       {"addresses", t.slots},
                       {"inUse", t.in_use},
                       {"cooling", t.cooling}});
    }
    return out;
}

std::string ls_text(const std::vector<LsRow>& rows) {
    std::string out = format("%-24s %-32s %7s %8s %8s %6s\n", "NETWORK", "DATADIR", "BLOCKS",
                             "IN USE", "COOLING", "USED");
    for (const auto& r : rows) {
        if (!r.error.empty()) {
            out += format("%-24s %s\n", r.network.c_str(), ("unreadable: " + r.error).c_str());
            continue;
        }
        const engine::NetworkDump& d = r.dump;
        const Totals t = totals(d);
        const double used = t.slots ? 100.0 * double(t.in_use) / double(t.slots) : 0;
        out += format("%-24s %-32s %7zu %8llu %8llu %5.1f%%\n", r.network.c_str(),
                      d.data_dir.c_str(), d.blocks.size(), (unsigned long long)t.in_use,
                      (unsigned long long)t.cooling, used);
        out += format("  ranges %s; reuseDelay %.1fs\n", d.ranges.c_str(),
                      double(d.reuse_delay_ms) / 1000);
        for (const auto& b : d.blocks) {
            out += format("  %-22s %6llu in use, %4llu cooling of %llu\n", b.cidr.c_str(),
                          (unsigned long long)b.in_use, (unsigned long long)b.cooling,
                          (unsigned long long)b.slots);
        }
    }
    return out;
}

json stats_json(const engine::NetworkDump& d) {
    const Totals t = totals(d);
    json blocks = json::array();
    for (const auto& b : d.blocks) blocks.push_back(block_json(b));
    json out{{"network", d.network},
             {"adds", d.adds},
             {"dels", d.dels},
             {"claims", t.claims},
             {"releases", t.releases},
             {"casRetries", t.retries},
             {"rollbacks", t.rollbacks},
             {"deadLeasesReaped", d.dead_leases_reaped},
             {"busyRejections", d.busy_rejections},
             {"rebootReclaims", d.reboot_reclaims},
             {"rebuildSkippedRecords", d.rebuild_skipped_records},
             {"leasesHeld", d.leases.size()},
             {"utilisation", share(t.in_use, t.slots)},
             {"ranges", json::array()},
             {"blocks", blocks}};
    for (const auto& r : d.range_views) {
        out["ranges"].push_back({{"rangeSet", r.range_set},
                                 {"subnet", r.subnet},
                                 {"range", r.start.to_string() + "-" + r.end.to_string()},
                                 {"size", r.size},
                                 {"inUse", r.in_use},
                                 {"cooling", r.cooling},
                                 {"utilisation", share(r.in_use, r.size)}});
    }
    return out;
}

std::string stats_text(const engine::NetworkDump& d) {
    const Totals t = totals(d);
    std::string out = format(
        "network %s: %llu ADDs, %llu DELs; %llu claims, %llu releases, %llu CAS retries, "
        "%llu rollbacks, %llu dead leases reaped, %llu busy rejections, %zu leases held\n",
        d.network.c_str(), (unsigned long long)d.adds, (unsigned long long)d.dels,
        (unsigned long long)t.claims, (unsigned long long)t.releases, (unsigned long long)t.retries,
        (unsigned long long)t.rollbacks, (unsigned long long)d.dead_leases_reaped,
        (unsigned long long)d.busy_rejections, d.leases.size());
    if (d.rebuild_skipped_records > 0) {
        out += format("  the rebuild that built this state skipped %llu damaged journal records\n",
                      (unsigned long long)d.rebuild_skipped_records);
    }
    for (const auto& r : d.range_views) {
        const std::string range = r.start.to_string() + "-" + r.end.to_string();
        out += format("  range set %d %s %s: %5.1f%% used (%llu in use, %llu cooling of %llu)\n",
                      int(r.range_set), r.subnet.c_str(), range.c_str(),
                      100 * share(r.in_use, r.size), (unsigned long long)r.in_use,
                      (unsigned long long)r.cooling, (unsigned long long)r.size);
    }
    for (const auto& b : d.blocks) {
        out += format("  %-22s %5.1f%% used (%llu in use, %llu cooling of %llu)\n", b.cidr.c_str(),
                      100 * share(b.in_use, b.slots), (unsigned long long)b.in_use,
                      (unsigned long long)b.cooling, (unsigned long long)b.slots);
    }
    return out;
}

}  // namespace shmipam::tools
