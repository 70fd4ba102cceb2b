// The human renderings of the engine's dump and verify reports (shmipamctl dump, verify).
#include "tools/render/text.h"

#include <cstdio>

#include "base/clock.h"

namespace shmipam::tools {

namespace {

std::string age(uint64_t since_unix_ns) {
    if (since_unix_ns == 0) return "-";
    const uint64_t now = base::unix_ns();
    const uint64_t s = now > since_unix_ns ? (now - since_unix_ns) / 1'000'000'000u : 0;
    char buf[32];
    if (s < 120) {
        std::snprintf(buf, sizeof buf, "%llus", (unsigned long long)s);
    } else if (s < 7200) {
        std::snprintf(buf, sizeof buf, "%llum", (unsigned long long)(s / 60));
    } else if (s < 172800) {
        std::snprintf(buf, sizeof buf, "%lluh", (unsigned long long)(s / 3600));
    } else {
        std::snprintf(buf, sizeof buf, "%llud", (unsigned long long)(s / 86400));
    }
    return buf;
}

std::string cooling_for(uint64_t released_boot_ns, uint64_t delay_ms) {
    const uint64_t now = base::boot_ns();
    const uint64_t until = released_boot_ns + delay_ms * 1'000'000;
    if (now >= until) return "cool-down over: reusable";
    return "cooling for " + std::to_string((until - now + 999'999'999) / 1'000'000'000) + "s more";
}

}  // namespace

std::string dump_to_table(const engine::NetworkDump& d) {
    std::string out = "network " + d.network + " (dataDir " + d.data_dir + ")\n";
    if (!d.ranges.empty()) out += "ranges " + d.ranges + "\n";
    char line[512];
    for (const auto& b : d.blocks) {
        std::snprintf(line, sizeof line, "block %-22s %6llu in use, %4llu cooling of %llu\n",
                      b.cidr.c_str(), (unsigned long long)b.in_use, (unsigned long long)b.cooling,
                      (unsigned long long)b.slots);
        out += line;
    }
    std::snprintf(line, sizeof line, "%-40s %-10s %-20s %-10s %-6s %s\n", "ADDRESS", "STATE",
                  "CONTAINER", "IFNAME", "AGE", "POD");
    out += line;
    for (const auto& s : d.slots) {
        std::string state = s.state;
        if (s.holder_pid != 0) state += " by pid " + std::to_string(s.holder_pid);
        std::string cid = s.container_id.substr(0, 20);
        std::string extra = s.pod;
        if (s.state == "cooling") extra = cooling_for(s.released_boot_ns, d.reuse_delay_ms);
        if (s.imported) extra += extra.empty() ? "(from host-local)" : " (from host-local)";
        if (s.claim) {
            const std::string c = s.used_by.empty()
                                      ? "(claim, idle)"
                                      : "(claim, used by " + s.used_by.substr(0, 12) + ")";
            extra += (extra.empty() ? "" : " ") + c;
        }
        std::snprintf(line, sizeof line, "%-40s %-10s %-20s %-10s %-6s %s\n",
                      s.address.to_string().c_str(), state.c_str(), cid.empty() ? "-" : cid.c_str(),
                      s.ifname.empty() ? "-" : s.ifname.c_str(),
                      s.state == "cooling" ? "-" : age(s.allocated_unix_ns).c_str(), extra.c_str());
        out += line;
    }
    size_t allocated = 0, cooling = 0;
    for (const auto& s : d.slots) {
        allocated += s.state == "allocated";
        cooling += s.state == "cooling";
    }
    std::snprintf(line, sizeof line,
                  "%zu allocated, %zu cooling, %zu other; %llu ADDs, %llu DELs, %llu dead leases "
                  "reaped\n",
                  allocated, cooling, d.slots.size() - allocated - cooling,
                  (unsigned long long)d.adds, (unsigned long long)d.dels,
                  (unsigned long long)d.dead_leases_reaped);
    out += line;
    return out;
}

std::string verify_to_text(const engine::VerifyReport& r) {
    std::string out;
    for (const auto& v : r.violations) out += "VIOLATION " + v.kind + ": " + v.detail + "\n";
    out += (r.violations.empty() ? "clean" : std::to_string(r.violations.size()) + " violations") +
           ": " + std::to_string(r.slots_checked) + " slots, " + std::to_string(r.entries_checked) +
           " attachments, " + std::to_string(r.journal_records) + " journal records checked (" +
           std::to_string(r.hint_mismatches) + " stale bitmap hints, " +
           std::to_string(r.journal_invalid) + " damaged journal records and " +
           std::to_string(r.journal_strays) + " stray records of retired indexes skipped)\n";
    return out;
}

}  // namespace shmipam::tools
