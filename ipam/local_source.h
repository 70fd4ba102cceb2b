// One node's pools (pool mode without ipam.etcd): a pool's whole allocatable set is the node's.
#pragma once

#include "ipam/address_source.h"

namespace shmipam::ipam {

class LocalSource final : public AddressSource {
  public:
    bool fixed_across_nodes(const std::string&) const override { return false; }
    bool keeps_default_claims(const std::string&) const override { return true; }
    void prepare(const PoolTarget&) override {}
    Expected<std::vector<pools::IpSet>> places(const PoolTarget& t, bool) override {
        return std::vector<pools::IpSet>{t.usable};
    }
    bool still_serves(const std::string&, const std::vector<engine::AllocatedAddress>&) override {
        return true;
    }
    void after_allocation(const PoolTarget&, const std::vector<pools::IpSet>&,
                          engine::NetworkStore&) override {}
    // A full pool stays full: no other node's addresses to make room with.
    Expected<bool> make_room(const PoolTarget&, const std::optional<engine::IpAddress>&,
                             std::string*) override {
        return false;
    }
    int fill_rounds() const override { return 1; }
    std::string where() const override { return ""; }
    Expected<FixedTake> take_fixed(const PoolTarget& t, const engine::ClaimSpec&,
                                   const std::optional<engine::IpAddress>&) override {
        return make_error(Code::kInternal, "pool " + t.pool + " is not a fixed-address pool");
    }
    Status after_gc(const std::string&, size_t, engine::NetworkStore&) override { return Ok{}; }
    // On one node a newer sandbox's claim is the engine's concern (its own 123).
    Status still_held(const Request&, const std::string&,
                      const std::vector<engine::AllocatedAddress>&) override {
        return Ok{};
    }
    bool tracks_releases() const override { return false; }
    Status after_release(const Request&, const std::string&, const std::vector<engine::IpAddress>&,
                         engine::Allocator&, engine::NetworkStore&) override {
        return Ok{};
    }
};

}  // namespace shmipam::ipam
