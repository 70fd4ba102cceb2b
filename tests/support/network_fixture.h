// An engine-level network in a temporary directory, for in-process tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/inspect/inspect.h"
#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "engine/state/network_store.h"
#include "shm/process_identity.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {

inline engine::RangeSet range_set(std::vector<engine::RangeSpec> specs) {
    auto s = engine::make_range_set(specs);
    EXPECT_TRUE(s) << (s ? "" : s.error().msg);
    return s ? *s : engine::RangeSet{};
}

inline engine::NetworkConfig network_config(const TempDir& dir, std::vector<engine::RangeSet> sets,
                                            uint64_t reuse_delay_ms = 0) {
    engine::NetworkConfig cfg;
    cfg.name = "unit";
    cfg.run_dir = dir.sub("run");
    cfg.data_dir = dir.sub("data");
    cfg.range_sets = std::move(sets);
    cfg.reuse_delay_ms = reuse_delay_ms;
    return cfg;
}

inline std::unique_ptr<engine::NetworkStore> open_store(const engine::NetworkConfig& cfg) {
    auto s = engine::open_network(cfg, shm::current_process());
    EXPECT_TRUE(s) << (s ? "" : s.error().msg);
    return s ? std::move(*s) : nullptr;
}

inline engine::AddRequest add_request(const std::string& cid, const std::string& ifname = "eth0",
                                      std::vector<std::string> requested = {}) {
    engine::AddRequest r;
    r.key = {cid, ifname};
    for (const auto& a : requested) r.requested.push_back(*engine::IpAddress::parse(a));
    return r;
}

inline std::string first_address(const Expected<engine::AddOutcome>& out) {
    EXPECT_TRUE(out) << (out ? "" : out.error().msg);
    return out && !out->addresses.empty() ? out->addresses[0].address.to_string() : "";
}

inline void expect_verify_clean(engine::NetworkStore& store) {
    auto rep = engine::verify(store);
    ASSERT_TRUE(rep) << rep.error().msg;
    for (const auto& v : rep->violations) ADD_FAILURE() << v.kind << ": " << v.detail;
}

}  // namespace shmipam::testing
