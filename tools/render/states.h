// The answer of shmipamctl states: the pool states of a node whose pool or subnet is gone from
// the pools directory, what each still holds, and what states remove did (or would do).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace shmipam::tools {

struct StateRow {
    std::string name;  // pool/<name> or subnet/<name>
    bool arena = false, journal = false;
    std::vector<std::string> in_use;  // each address in use and by whom
    std::string error;                // the state could not be read
};

struct StatesAnswer {
    std::vector<std::string> finished;  // removals a killed run left, completed now
    std::vector<StateRow> withdrawn;    // states whose pool is gone
};

nlohmann::json states_json(const StatesAnswer& a);
std::string states_text(const StatesAnswer& a);

// states remove: the state, whether it was (or would be) removed, and what held it
// (`removable`: nothing in use, or --force).
nlohmann::json state_removal_json(const StateRow& row, bool applied, bool removable, bool removed);
std::string state_removal_text(const StateRow& row, bool applied, bool removable, bool removed);

}  // namespace shmipam::tools
