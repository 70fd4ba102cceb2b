// The JSON renderings of the engine's dump and verify reports (shmipamctl dump, verify --json).
#include "tools/render/json.h"

#include "base/clock.h"

namespace shmipam::tools {

using nlohmann::json;

json block_json(const engine::BlockView& b) {
    return {{"cidr", b.cidr},
            {"slots", b.slots},
            {"inUse", b.in_use},
            {"cooling", b.cooling},
            {"claims", b.claims},
            {"releases", b.releases},
            {"casRetries", b.cas_retries},
            {"rollbacks", b.rollbacks},
            {"utilisation", b.slots ? double(b.in_use) / double(b.slots) : 0.0}};
}

json dump_to_json(const engine::NetworkDump& d) {
    json out;
    out["network"] = d.network;
    out["dataDir"] = d.data_dir;
    out["ranges"] = d.ranges;
    out["reuseDelayMs"] = d.reuse_delay_ms;
    out["counters"] = {{"adds", d.adds},
                       {"dels", d.dels},
                       {"deadLeasesReaped", d.dead_leases_reaped},
                       {"busyRejections", d.busy_rejections},
                       {"rebootReclaims", d.reboot_reclaims},
                       {"rebuildSkippedRecords", d.rebuild_skipped_records}};
    out["blocks"] = json::array();
    for (const auto& b : d.blocks) out["blocks"].push_back(block_json(b));
    out["allocations"] = json::array();
    for (const auto& s : d.slots) {
        json j{
            {"address", s.address.to_string()}, {"state", s.state}, {"generation", s.generation}};
        if (s.holder_pid != 0) j["holderPid"] = s.holder_pid;
        if (!s.container_id.empty()) {
            j["containerID"] = s.container_id;
            j["ifname"] = s.ifname;
        }
        if (!s.pod.empty()) j["pod"] = s.pod;
        if (s.imported) j["importedFromHostLocal"] = true;
        if (s.claim) j["claim"] = true;
        if (!s.used_by.empty()) j["usedBy"] = s.used_by;
        if (s.allocated_unix_ns != 0) j["allocatedUnixNs"] = s.allocated_unix_ns;
        if (s.state == "cooling") {
            j["releasedBootNs"] = s.released_boot_ns;
            const uint64_t until = s.released_boot_ns + d.reuse_delay_ms * 1'000'000;
            const uint64_t now = base::boot_ns();
            j["coolingMsLeft"] = now >= until ? 0 : (until - now) / 1'000'000;
        }
        out["allocations"].push_back(j);
    }
    out["leases"] = json::array();
    for (const auto& l : d.leases) {
        out["leases"].push_back({{"index", l.index}, {"pid", l.pid}, {"alive", l.alive}});
    }
    return out;
}

json verify_to_json(const engine::VerifyReport& r) {
    json out;
    out["clean"] = r.violations.empty();
    out["slotsChecked"] = r.slots_checked;
    out["entriesChecked"] = r.entries_checked;
    out["hintMismatches"] = r.hint_mismatches;
    out["journalRecords"] = r.journal_records;
    out["journalInvalidRecords"] = r.journal_invalid;
    out["journalStrayRecords"] = r.journal_strays;
    out["violations"] = json::array();
    for (const auto& v : r.violations)
        out["violations"].push_back({{"kind", v.kind}, {"detail", v.detail}});
    return out;
}

std::string json_text(const json& j) {
    return j.dump(2) + "\n";
}

}  // namespace shmipam::tools
