// The Prometheus text exposition of shmipamctl metrics (prometheus.h): one family per
// counter or gauge, every sample labelled with its network (and block or range).
#include "tools/render/prometheus.h"

#include <map>

namespace shmipam::tools {

namespace {

std::string escape_label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

struct Family {
    const char* name;
    const char* type;
    const char* help;
    std::vector<std::string> samples;
};

std::string exposition(const std::vector<Family>& fams) {
    std::string out;
    for (const auto& f : fams) {
        out += std::string("# HELP ") + f.name + " " + f.help + "\n";
        out += std::string("# TYPE ") + f.name + " " + f.type + "\n";
        for (const auto& s : f.samples) out += s + "\n";
    }
    return out;
}

}  // namespace

std::string metrics_text(const std::vector<engine::NetworkDump>& networks,
                         const std::vector<ClaimCounts>& claims) {
    std::vector<Family> fams = {
        {"shmipam_addresses",
         "gauge",
         "Addresses of a block by state (free includes never used).",
         {}},
        {"shmipam_block_size_addresses", "gauge", "Addresses in a block.", {}},
        {"shmipam_claims_total", "counter", "Addresses allocated in a block.", {}},
        {"shmipam_releases_total", "counter", "Addresses released in a block.", {}},
        {"shmipam_cas_retries_total", "counter", "Claim CASes lost to a concurrent claimer.", {}},
        {"shmipam_rollbacks_total", "counter", "Claims rolled back (errors, dead claimers).", {}},
        {"shmipam_adds_total", "counter", "Committed ADDs of a network.", {}},
        {"shmipam_dels_total", "counter", "Attachments released (DEL, GC, shmipamctl).", {}},
        {"shmipam_dead_leases_reaped_total",
         "counter",
         "Leases of dead invocations recovered.",
         {}},
        {"shmipam_busy_rejections_total",
         "counter",
         "ADDs answered 11 because the same attachment was being added.",
         {}},
        {"shmipam_leases_held", "gauge", "Leases held now (invocations changing state).", {}},
        {"shmipam_reboot_reclaims_total",
         "counter",
         "Addresses of another boot's sandboxes reclaimed when the state was rebuilt.",
         {}},
        {"shmipam_range_addresses",
         "gauge",
         "Addresses of a configured range by state (in_use, cooling).",
         {}},
        {"shmipam_rebuild_skipped_records",
         "gauge",
         "Damaged journal records the rebuild that built the network's state skipped.",
         {}},
        {"shmipam_fixed_address_claims",
         "gauge",
         "Fixed-address claims (StatefulSet pods, VMs) by use: in_use or idle.",
         {}},
        // Apart from the states above: a sum over `state` never counts the size in.
        {"shmipam_range_size_addresses", "gauge", "Addresses of a configured range.", {}},
    };
    auto add = [&](size_t fam, const std::string& labels, uint64_t v) {
        fams[fam].samples.push_back(std::string(fams[fam].name) + "{" + labels + "} " +
                                    std::to_string(v));
    };
    for (size_t k = 0; k < networks.size(); ++k) {
        const engine::NetworkDump& n = networks[k];
        const std::string net = "network=\"" + escape_label(n.network) + "\"";
        if (k < claims.size()) {
            add(14, net + ",state=\"in_use\"", claims[k].in_use);
            add(14, net + ",state=\"idle\"", claims[k].idle);
        }
        for (const auto& b : n.blocks) {
            const std::string bl = net + ",block=\"" + escape_label(b.cidr) + "\"";
            uint64_t allocated = 0, other = 0;
            for (const auto& s : n.slots) {
                if (s.block != b.cidr) continue;
                if (s.state == "allocated") {
                    ++allocated;
                } else if (s.state != "cooling") {
                    ++other;
                }
            }
            add(0, bl + ",state=\"allocated\"", allocated);
            add(0, bl + ",state=\"cooling\"", b.cooling);
            add(0, bl + ",state=\"transient\"", other);
            add(0, bl + ",state=\"free\"", b.slots - allocated - b.cooling - other);
            add(1, bl, b.slots);
            add(2, bl, b.claims);
            add(3, bl, b.releases);
            add(4, bl, b.cas_retries);
            add(5, bl, b.rollbacks);
        }
        add(6, net, n.adds);
        add(7, net, n.dels);
        add(8, net, n.dead_leases_reaped);
        add(9, net, n.busy_rejections);
        add(10, net, n.leases.size());
        add(11, net, n.reboot_reclaims);
        add(13, net, n.rebuild_skipped_records);
        for (const auto& r : n.range_views) {
            const std::string rl =
                net + ",range_set=\"" + std::to_string(r.range_set) + "\",range=\"" +
                escape_label(r.start.to_string() + "-" + r.end.to_string()) + "\"";
            add(12, rl + ",state=\"in_use\"", r.in_use);
            add(12, rl + ",state=\"cooling\"", r.cooling);
            add(15, rl, r.size);
        }
    }
    return exposition(fams);
}

std::string recheck_metrics_text(const ipam::RecheckRecord& r) {
    const std::vector<Family> fams = {
        {"shmipam_owner_recheck_last_success_timestamp_seconds",
         "gauge",
         "When a check of the node's StatefulSet-held claims last read their sets (0: never).",
         {"shmipam_owner_recheck_last_success_timestamp_seconds " +
          std::to_string(r.last_success)}},
        {"shmipam_owner_recheck_last_check_timestamp_seconds",
         "gauge",
         "When the node's StatefulSet-held claims were last checked, failed or not.",
         {"shmipam_owner_recheck_last_check_timestamp_seconds " + std::to_string(r.last_check)}},
        {"shmipam_owner_recheck_errors_total",
         "counter",
         "Checks that could not read the StatefulSets (their claims kept until the next).",
         {"shmipam_owner_recheck_errors_total " + std::to_string(r.errors_total)}},
        {"shmipam_owner_recheck_claims_freed_total",
         "counter",
         "Idle claims freed because their StatefulSet no longer wants the pod.",
         {"shmipam_owner_recheck_claims_freed_total " + std::to_string(r.claims_freed_total)}},
        {"shmipam_owner_recheck_claims_kept_on_error",
         "gauge",
         "Idle claims the last walk could not check (0 after a walk that could).",
         {"shmipam_owner_recheck_claims_kept_on_error " + std::to_string(r.claims_kept_on_error)}},
    };
    return exposition(fams);
}

}  // namespace shmipam::tools
