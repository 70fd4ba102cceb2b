// shmipamctl states: pool mode's states whose pool (or subnet) is gone from the pools directory
// (shmipamctl ls marks them "withdrawn"), what each still holds; and states remove, which
// deletes one that holds nothing (anything held is named; --force removes it anyway), crash-safe
// (tools/state_removal.h). Every run first finishes the removals a killed run left.
#include "tools/render/states.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/inspect/inspect.h"
#include "engine/ops/open_network.h"
#include "ipam/pool_state.h"
#include "shm/index_file.h"
#include "tools/claim_target.h"
#include "tools/render/json.h"
#include "tools/state_removal.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

constexpr const char* kPoolsSubdir = "/_pools";

struct StatesOptions {
    std::string config;
};

struct RemoveOptions {
    std::string state;  // pool/<name> or subnet/<name>
    bool force = false;
    bool apply = false;
};

PoolStateDirs dirs_of(const ClaimNetwork& net) {
    return {net.network.run_dir + kPoolsSubdir, net.network.data_dir + kPoolsSubdir};
}

// "ippool_x" as shmipamctl names it ("pool/x"), and back.
std::string display_of(const std::string& state) {
    const std::string object = ipam::object_name_of_state(state);
    return (state.starts_with("ippool_") ? "pool/" : "subnet/") + object;
}

bool configured(const ClaimNetwork& net, const std::string& state) {
    return ipam::object_of(state, *net.catalog) != nullptr;
}

// What one slot holds, as an operator reads it.
std::string holding(const engine::SlotView& s) {
    if (s.claim) {
        return s.address.to_string() + " fixed claim " + s.container_id +
               (s.used_by.empty() ? " (idle)" : " (used by container " + s.used_by + ")");
    }
    return s.address.to_string() + " " + s.state + " by container " + s.container_id + " " +
           s.ifname + (s.pod.empty() ? "" : " (pod " + s.pod + ")");
}

// The state as it is: where its files are and what it holds. An arena lost (a reboot) is
// rebuilt from the journal first, as any invocation that opens it would.
StateRow row_of(const ClaimNetwork& net, const std::string& state) {
    const PoolStateDirs dirs = dirs_of(net);
    StateRow row{display_of(state)};
    row.arena =
        ::access((dirs.arenas + "/" + state + "/" + shm::IndexFile::kFileName).c_str(), F_OK) == 0;
    row.journal = ::access((dirs.journals + "/" + state).c_str(), F_OK) == 0;
    ipam::Request r;
    r.network = net.network;
    auto cfg = ipam::reading_config(r, state, *net.catalog);
    auto store = row.arena
                     ? engine::NetworkStore::open_existing(cfg->state_dir(), shm::Access::kReadOnly)
                     : engine::open_network(*cfg);
    if (!store) {
        row.error = store.error().msg;
        return row;
    }
    auto d = engine::dump(**store);
    if (!d) {
        row.error = d.error().msg;
        return row;
    }
    for (const engine::SlotView& s : d->slots) {
        if (s.state == "free" || s.state == "cooling" || s.state == "reserved") continue;
        row.in_use.push_back(holding(s));
    }
    return row;
}

Expected<ClaimNetwork> pool_network(const CommonOptions& common, const std::string& config) {
    auto net = read_claim_network(config, common.run_dir);
    if (!net) return net.error();
    if (!net->catalog) {
        return make_error(Code::kInvalidConfig,
                          config + " is not a pool mode network (no ipam.poolsDir)");
    }
    return net;
}

int cmd_states(const CommonOptions& common, const StatesOptions& o) {
    auto net = pool_network(common, o.config);
    if (!net) return cannot_read(net.error());
    StatesAnswer answer;
    auto finished = finish_removals(dirs_of(*net));
    if (!finished) return cannot_read(finished.error());
    for (const std::string& f : *finished) answer.finished.push_back(display_of(f));
    for (const std::string& state : pool_state_names(dirs_of(*net))) {
        if (!configured(*net, state)) answer.withdrawn.push_back(row_of(*net, state));
    }
    std::cout << (common.json ? json_text(states_json(answer)) : states_text(answer));
    return kExitClean;
}

int cmd_states_remove(const CommonOptions& common, const StatesOptions& so,
                      const RemoveOptions& o) {
    // Every check before anything changes.
    std::string state;
    if (o.state.starts_with("pool/")) state = ipam::pool_state_name(o.state.substr(5));
    if (o.state.starts_with("subnet/")) state = "subnet_" + o.state.substr(7);
    if (state.empty() || !valid_network_name(o.state)) {
        return cannot_read("\"" + o.state + "\" is not pool/<name> or subnet/<name>");
    }
    auto net = pool_network(common, so.config);
    if (!net) return cannot_read(net.error());
    if (configured(*net, state)) {
        return cannot_read(o.state + " is configured in " + net->pools_dir +
                           ": remove its pool first (its state is kept while it exists)");
    }
    const PoolStateDirs dirs = dirs_of(*net);
    if (auto finished = finish_removals(dirs); !finished) return cannot_read(finished.error());
    const auto names = pool_state_names(dirs);
    if (std::find(names.begin(), names.end(), state) == names.end()) {
        return cannot_read("no state " + o.state + " under " + dirs.arenas + " or " +
                           dirs.journals);
    }
    const StateRow row = row_of(*net, state);
    if (!row.error.empty() && !o.force) {
        return cannot_read(o.state + " cannot be read (" + row.error +
                           "): --force removes it unread");
    }
    const bool removable = row.in_use.empty() || o.force;
    bool removed = false;
    if (o.apply && removable) {
        if (auto st = remove_pool_state(dirs, state); !st) return cannot_read(st.error());
        removed = true;
    }
    std::cout << (common.json ? json_text(state_removal_json(row, o.apply, removable, removed))
                              : state_removal_text(row, o.apply, removable, removed));
    if (!removable) {
        std::cerr << "shmipamctl: " << o.state << " holds " << row.in_use.size()
                  << " address(es) in use: not removed (--force removes it anyway)\n";
        return kExitCannotRead;
    }
    return removed ? kExitClean : kExitViolations;
}

}  // namespace

void register_states(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand(
        "states",
        "pool mode: the states whose pool is gone from the pools directory, and what they hold; "
        "states remove deletes one");
    auto so = std::make_shared<StatesOptions>();
    verb->add_option("--config", so->config,
                     "the pool mode network config file (its poolsDir, runDir, dataDir)")
        ->required();
    add_json_flag(*verb, common);
    auto* remove = verb->add_subcommand(
        "remove",
        "delete a state whose pool is gone, when nothing in it is in use (dry run unless "
        "--apply)");
    auto o = std::make_shared<RemoveOptions>();
    remove->add_option("state", o->state, "pool/<name> or subnet/<name>")->required();
    remove->add_flag("--force", o->force, "also when addresses or claims in it are in use");
    remove->add_flag("--apply", o->apply, "remove it");
    add_json_flag(*remove, common);
    remove->callback(
        [&common, so, o, &exit_code] { exit_code = cmd_states_remove(common, *so, *o); });
    verb->callback([verb, &common, so, &exit_code] {
        if (verb->get_subcommands().empty()) exit_code = cmd_states(common, *so);
    });
}

}  // namespace shmipam::tools
