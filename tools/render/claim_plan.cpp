#include "tools/render/claim_plan.h"

#include <sstream>

namespace shmipam::tools {

namespace {

const char* status_word(ClaimPlan::Status s, bool applied) {
    switch (s) {
        case ClaimPlan::Status::kCreate:
            return applied ? "not created" : "would create";
        case ClaimPlan::Status::kCreated:
            return "created";
        case ClaimPlan::Status::kPresent:
            return "already present";
        case ClaimPlan::Status::kConflict:
            return "refused";
    }
    return "?";
}

std::string addresses_of(const ClaimPlan& p) {
    std::string out;
    for (const auto& a : p.wanted.addresses) out += (out.empty() ? "" : ",") + a.to_string();
    return out;
}

}  // namespace

nlohmann::json claim_plans_json(const std::vector<ClaimPlan>& plans, bool applied) {
    nlohmann::json out = nlohmann::json::array();
    for (const ClaimPlan& p : plans) {
        nlohmann::json j{{"network", p.state},
                         {"claim", p.key},
                         {"pod", p.wanted.who.namespace_ + "/" + p.wanted.who.name},
                         {"ifname", p.wanted.ifname},
                         {"addresses", nlohmann::json::array()},
                         {"policy", policy_word(p.wanted.keep_idle, p.key.starts_with("vm:"))},
                         {"result", status_word(p.status, applied)}};
        for (const auto& a : p.wanted.addresses) j["addresses"].push_back(a.to_string());
        if (!p.why.empty()) j["why"] = p.why;
        out.push_back(std::move(j));
    }
    return nlohmann::json{{"applied", applied}, {"claims", std::move(out)}};
}

std::string claim_plans_text(const std::vector<ClaimPlan>& plans, bool applied) {
    std::ostringstream out;
    for (const ClaimPlan& p : plans) {
        out << status_word(p.status, applied) << ": " << p.key << " in " << p.state << " "
            << addresses_of(p) << " (policy "
            << policy_word(p.wanted.keep_idle, p.key.starts_with("vm:")) << ")";
        if (!p.why.empty()) out << ": " << p.why;
        out << "\n";
    }
    if (!applied) out << "(dry run: --apply to make the claims)\n";
    return out.str();
}

}  // namespace shmipam::tools
