#include "tools/render/cluster_recover.h"

namespace shmipam::tools {

namespace {

const char* outcome_name(RecoverRow::Outcome o, bool applied) {
    switch (o) {
        case RecoverRow::Outcome::kPresent:
            return "present";
        case RecoverRow::Outcome::kMissing:
            return applied ? "missing" : "would re-create";
        case RecoverRow::Outcome::kRecreated:
            return "re-created";
        case RecoverRow::Outcome::kConflict:
            return "conflict";
        case RecoverRow::Outcome::kCannot:
            return "cannot re-create";
    }
    return "?";
}

}  // namespace

nlohmann::json cluster_recover_json(const RecoverReport& r, bool applied) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : r.rows) {
        rows.push_back({{"pool", row.pool},
                        {"what", row.what},
                        {"outcome", outcome_name(row.outcome, applied)},
                        {"why", row.why}});
    }
    return {{"node", r.node},
            {"applied", applied},
            {"storeRevision", r.store_revision},
            {"rememberedRevision", r.remembered_revision},
            {"storeWentBack", r.floor_ahead},
            {"clusterIdChanged", r.id_changed},
            {"floorProblem", r.floor_problem},
            {"accepted", r.accepted},
            {"acceptedRevision", r.accepted_revision},
            {"rows", rows}};
}

std::string cluster_recover_text(const RecoverReport& r, bool applied) {
    std::string out = "node " + r.node + ": the store is at revision " +
                      std::to_string(r.store_revision) + ", this node remembers " +
                      (r.floor_problem.empty() ? std::to_string(r.remembered_revision)
                                               : "nothing readable (" + r.floor_problem + ")") +
                      (r.floor_ahead ? " (the store went back in time)" : "") + "\n";
    if (r.id_changed) out += "the store's cluster id is not the one this node remembers\n";
    for (const auto& row : r.rows) {
        out += std::string(outcome_name(row.outcome, applied)) + " " + row.pool + " " + row.what +
               (row.why.empty() ? "" : ": " + row.why) + "\n";
    }
    if (r.rows.empty()) out += "this node holds no block and no fixed claim\n";
    const size_t conflicts =
        r.count(RecoverRow::Outcome::kConflict) + r.count(RecoverRow::Outcome::kCannot);
    if (applied && r.accepted) {
        out += "accepted the store at revision " + std::to_string(r.accepted_revision) +
               ": this node's helpers claim from it again\n";
    } else if (applied) {
        out += std::to_string(conflicts) +
               " left undone: the store is not accepted, this node's helpers stay refused "
               "(resolve them, then run recover --apply again)\n";
    } else if (r.work_left(false)) {
        out += "dry run: --apply re-creates what is missing and accepts the store";
        out += conflicts != 0 ? " (not while a conflict remains)\n" : "\n";
    }
    return out;
}

}  // namespace shmipam::tools
