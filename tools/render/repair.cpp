// `repair`'s sentences (repair.h). Each says what happens next, so that an operator knows
// whether anything is left to do.
#include "tools/render/repair.h"

namespace shmipam::tools {

std::string repair_index_unusable(const std::string& why, bool applied) {
    return "index unusable: " + why + "\n" + (applied ? "moved" : "would move") +
           " it aside to index.damaged.<time>; the next invocation rebuilds the network from its "
           "journal\n";
}

std::string repair_block_unusable(const std::string& why, bool applied) {
    return "block unusable: " + why + "\n" + (applied ? "retired" : "would retire") +
           " the network's state; the next invocation rebuilds it from its journal\n";
}

std::string repair_found(const std::vector<engine::Violation>& violations) {
    std::string out;
    for (const auto& v : violations) out += "found " + v.kind + ": " + v.detail + "\n";
    return out;
}

std::string repair_dry_run_verdict(bool nothing_to_do) {
    return nothing_to_do ? "nothing to repair\n" : "run with --apply to heal these\n";
}

std::string repair_healed(uint64_t rejournaled, const engine::SweepReport& swept) {
    std::string out;
    if (rejournaled > 0) {
        out += "journaled " + std::to_string(rejournaled) + " allocations the journal lacked\n";
    }
    out += "reaped " + std::to_string(swept.dead_leases) + " dead leases, healed " +
           std::to_string(swept.entries_healed) + " attachments and " +
           std::to_string(swept.slots_healed) + " addresses\n";
    return out;
}

std::string repair_retired_after_healing(size_t violations_left) {
    return std::to_string(violations_left) +
           " violations left after healing: retired the network's state; the next invocation "
           "rebuilds it from the journal\n";
}

}  // namespace shmipam::tools
