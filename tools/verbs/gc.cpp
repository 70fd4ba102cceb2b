// shmipamctl gc: releases every attachment not in a list of live ones (the CNI GC shape), a dry
// run unless --apply; --older-than spares attachments younger than a runtime's startup race.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/clock.h"
#include "engine/slots/entry_fields.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

int cmd_gc(const Options& o) {
    auto text = read_input(o.valid_file);
    if (!text) return cannot_read(text.error());
    // The CNI GC shape: a list of {"containerID", "ifname"}, or a config holding
    // "cni.dev/valid-attachments".
    json doc = json::parse(*text, nullptr, false);
    if (doc.is_object() && doc.contains("cni.dev/valid-attachments"))
        doc = doc["cni.dev/valid-attachments"];
    if (!doc.is_array()) {
        return cannot_read("--valid wants a JSON list of {\"containerID\",\"ifname\"}");
    }
    std::set<std::pair<uint64_t, uint64_t>> keep;
    for (const auto& a : doc) {
        if (!a.is_object() || !a.contains("containerID") || !a["containerID"].is_string() ||
            !a.contains("ifname") || !a["ifname"].is_string()) {
            return cannot_read("every valid attachment needs string containerID and ifname");
        }
        const auto f = engine::fingerprint(a["containerID"].get<std::string>(),
                                           a["ifname"].get<std::string>());
        keep.insert({f.fp1, f.fp2});
    }
    auto store = open_network(o, shm::Access::kReadWrite);
    if (!store) return cannot_read(store.error());
    (*store)->act_as_invocation();
    engine::NetworkConfig none;
    engine::Allocator alloc(**store, none);
    const uint64_t now = base::unix_ns();
    const uint64_t grace = uint64_t(o.older_than_s * 1e9);
    return report_released(o, alloc.release_where(
                                  [&](const format::Entry& e, const engine::Fingerprint& f) {
                                      if (keep.count({f.fp1, f.fp2})) return false;
                                      // A claim is held for a name, not for a sandbox.
                                      if (engine::held_for_a_name(e.flags)) return false;
                                      return grace == 0 || (now > e.created_unix_ns &&
                                                            now - e.created_unix_ns >= grace);
                                  },
                                  !o.apply));
}

}  // namespace shmipam::tools
