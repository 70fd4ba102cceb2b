// shmipamctl verify: checks every invariant of a network's state without changing it.
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/text.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_verify(const Options& o) {
    auto store = open_network(o, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto rep = engine::verify(**store);
    if (!rep) return cannot_read(rep.error());
    std::cout << (o.json ? json_text(verify_to_json(*rep)) : verify_to_text(*rep));
    return rep->violations.empty() ? kExitClean : kExitViolations;
}

}  // namespace shmipam::tools
