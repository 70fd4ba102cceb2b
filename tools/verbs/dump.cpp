// shmipamctl dump: every address that is not free and to whom, narrowed by the filters.
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/text.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_dump(const Options& o) {
    auto store = open_network(o, shm::Access::kReadOnly);
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
    std::cout << (o.json ? json_text(dump_to_json(*d)) : dump_to_table(*d));
    return kExitClean;
}

}  // namespace shmipam::tools
