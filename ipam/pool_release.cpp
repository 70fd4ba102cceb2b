// Pool mode's DEL and GC: every pool state of the node, whatever the pools directory says now
// (a pool edited out of the rules still lets its addresses go). Each state is tried; the first
// error is answered, and the runtime's retry finishes what failed.
#include "engine/ops/allocator.h"
#include "ipam/open_states.h"
#include "ipam/owner_claims.h"
#include "ipam/pool_mode.h"
#include "ipam/pool_state.h"

namespace shmipam::ipam {

Status pool_del(const Request& r, const pools::Catalog& catalog, AddressSource& source,
                Upkeep& upkeep) {
    std::vector<OpenState> opened;
    std::optional<Error> first_error = open_every_state(r, catalog, opened);
    for (OpenState& s : opened) {
        engine::Allocator alloc = s.allocator();
        std::vector<engine::IpAddress> released;
        if (source.tracks_releases()) {
            auto held = alloc.addresses_of(r.key);
            for (const auto& a : held ? *held : std::vector<engine::AllocatedAddress>{}) {
                released.push_back(a.address);
            }
        }
        Status done = alloc.del(r.key);
        if (done) {
            done = source.after_release(r, object_name_of_state(s.name), released, alloc, *s.store);
        }
        if (!done && !first_error) first_error = done.error();
    }
    release_unwanted_after_del(r, opened, source);
    if (first_error) return *first_error;
    keep_states(upkeep, opened);
    return Ok{};
}

Status pool_gc(const Request& r, const pools::Catalog& catalog, AddressSource& source,
               Upkeep& upkeep) {
    if (!r.valid_attachments) {
        return make_error(Code::kInvalidConfig,
                          "GC needs \"cni.dev/valid-attachments\" in the config");
    }
    std::vector<OpenState> opened;
    std::optional<Error> first_error = open_every_state(r, catalog, opened);
    for (OpenState& s : opened) {
        auto gc = s.allocator().gc(*r.valid_attachments, network_tag(r.network.name));
        Status done = gc ? source.after_gc(object_name_of_state(s.name),
                                           gc->released + gc->claims_expired, *s.store)
                         : Status(gc.error());
        if (!done && !first_error) first_error = done.error();
    }
    if (first_error) return *first_error;
    keep_states(upkeep, opened);
    return Ok{};
}

}  // namespace shmipam::ipam
