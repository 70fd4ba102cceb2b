// shmipamctl dump: every address that is not free and to whom, narrowed by the filters.
#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/text.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// The filters: a slot is printed when it matches every one given.
struct DumpOptions {
    std::string state, container, pod, address;
};

int cmd_dump(const CommonOptions& common, const DumpOptions& o) {
    auto store = open_network(common.run_dir, common.network, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto d = engine::dump(**store);
    if (!d) return cannot_read(d.error());
    std::vector<engine::SlotView> kept;
    for (const auto& s : d->slots) {
        if (!o.state.empty() && s.state != o.state) continue;
        // A sandbox using a fixed address finds it through the claim it uses.
        if (!o.container.empty() && s.container_id.rfind(o.container, 0) != 0 &&
            s.used_by.rfind(o.container, 0) != 0) {
            continue;
        }
        if (!o.pod.empty() && s.pod != o.pod) continue;
        if (!o.address.empty() && s.address.to_string() != o.address) continue;
        kept.push_back(s);
    }
    d->slots = std::move(kept);
    std::cout << (common.json ? json_text(dump_to_json(*d)) : dump_to_table(*d));
    return kExitClean;
}

}  // namespace

void register_dump(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand("dump", "every address that is not free, and to whom");
    add_network_argument(*verb, common);
    add_json_flag(*verb, common);
    auto o = std::make_shared<DumpOptions>();
    verb->add_option("--state", o->state, "only this state (allocated, cooling, claiming, ...)");
    verb->add_option("--container", o->container, "only containers whose id starts so");
    verb->add_option("--pod", o->pod, "only this pod (namespace/name)");
    verb->add_option("--address", o->address, "only this address");
    verb->callback([&common, o, &exit_code] { exit_code = cmd_dump(common, *o); });
}

}  // namespace shmipam::tools
