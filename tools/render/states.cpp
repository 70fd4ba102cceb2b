#include "tools/render/states.h"

#include <sstream>

namespace shmipam::tools {

namespace {

nlohmann::json row_json(const StateRow& r) {
    nlohmann::json j{
        {"state", r.name}, {"arena", r.arena}, {"journal", r.journal}, {"inUse", r.in_use}};
    if (!r.error.empty()) j["error"] = r.error;
    return j;
}

void row_text(std::ostringstream& out, const StateRow& r) {
    out << r.name << ": ";
    if (!r.error.empty()) {
        out << "cannot be read (" << r.error << ")\n";
        return;
    }
    out << (r.in_use.empty() ? "nothing in use" : std::to_string(r.in_use.size()) + " in use")
        << (r.arena ? "" : " (no arena: rebuilt from its journal)") << "\n";
    for (const std::string& u : r.in_use) out << "  " << u << "\n";
}

}  // namespace

nlohmann::json states_json(const StatesAnswer& a) {
    nlohmann::json rows = nlohmann::json::array();
    for (const StateRow& r : a.withdrawn) rows.push_back(row_json(r));
    return nlohmann::json{{"finishedRemovals", a.finished}, {"withdrawn", std::move(rows)}};
}

std::string states_text(const StatesAnswer& a) {
    std::ostringstream out;
    for (const std::string& f : a.finished) {
        out << "finished the removal of " << f << " (left by a run that did not end)\n";
    }
    for (const StateRow& r : a.withdrawn) row_text(out, r);
    out << a.withdrawn.size() << " state" << (a.withdrawn.size() == 1 ? "" : "s")
        << " whose pool is gone\n";
    return out.str();
}

nlohmann::json state_removal_json(const StateRow& row, bool applied, bool removable, bool removed) {
    nlohmann::json j = row_json(row);
    j["applied"] = applied;
    j["removable"] = removable;
    j["removed"] = removed;
    return j;
}

std::string state_removal_text(const StateRow& row, bool applied, bool removable, bool removed) {
    std::ostringstream out;
    row_text(out, row);
    if (removed) {
        out << "removed " << row.name << "\n";
    } else if (!removable) {
        out << "kept " << row.name << ": in use (--force removes it anyway)\n";
    } else {
        out << "would remove " << row.name << " (dry run: --apply to remove)\n";
    }
    return out.str();
}

}  // namespace shmipam::tools
