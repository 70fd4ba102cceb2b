// shmipamctl release: releases attachments by address, container or pod, through the same CAS
// protocol as the plugin's DEL (a dry run unless --apply).
#include <cstring>
#include <iostream>

#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_release(const Options& o) {
    if (!o.claim.empty()) return release_claim(o);
    if (o.network.empty()) return cannot_read("release needs the network (or --claim)");
    auto store = open_network(o, shm::Access::kReadWrite);
    if (!store) return cannot_read(store.error());
    (*store)->act_as_invocation();
    engine::NetworkConfig none;
    engine::Allocator alloc(**store, none);
    if (!o.address.empty()) {
        auto a = engine::IpAddress::parse(o.address);
        if (!a) return cannot_read("not an address: " + o.address);
        return report_released(o, alloc.release_address(*a, !o.apply));
    }
    if (!o.container.empty()) {
        return report_released(
            o, alloc.release_where(
                   [&](const format::Entry& e, const engine::Fingerprint&) {
                       const std::string cid(e.container_id,
                                             strnlen(e.container_id, sizeof e.container_id));
                       const std::string ifn(e.ifname, strnlen(e.ifname, sizeof e.ifname));
                       return cid == o.container && (o.ifname.empty() || ifn == o.ifname);
                   },
                   !o.apply));
    }
    if (!o.pod.empty()) {
        return report_released(o, alloc.release_where(
                                      [&](const format::Entry& e, const engine::Fingerprint&) {
                                          return engine::pod_of(e) == o.pod;
                                      },
                                      !o.apply));
    }
    return cannot_read("release needs --address, --container, --pod or --claim");
}

}  // namespace shmipam::tools
