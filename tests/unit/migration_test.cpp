#include "engine/recovery/migration.h"

#include <gtest/gtest.h>

#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

TEST(Migration, HostLocalFilesBecomeAllocationsUntilDeleted) {
    testing::TempDir dir;
    auto cfg = testing::network_config(dir, {testing::range_set({{"10.6.0.0/24", "", "", ""}}),
                                             testing::range_set({{"fd06::/120", "", "", ""}})});
    const std::string hl = cfg.host_local_dir();
    testing::write_file(hl + "/10.6.0.2", "ctr-a\r\neth0");
    testing::write_file(hl + "/fd06::2", "ctr-a\r\neth0");
    testing::write_file(hl + "/10.6.0.3", "ctr-old");                // pre-ifname format
    testing::write_file(hl + "/10.9.9.9", "ctr-elsewhere\r\neth0");  // outside every range
    testing::write_file(hl + "/last_reserved_ip.0", "10.6.0.3");
    testing::write_file(hl + "/lock", "");

    auto store = testing::open_store(cfg);
    Allocator alloc(*store, cfg);
    testing::expect_verify_clean(*store);
    auto a = alloc.addresses_of({"ctr-a", "eth0"});
    ASSERT_TRUE(a);
    ASSERT_EQ(a->size(), 2u);
    EXPECT_EQ((*a)[0].address.to_string(), "10.6.0.2");
    EXPECT_EQ((*a)[1].address.to_string(), "fd06::2");
    EXPECT_TRUE(alloc.addresses_of({"ctr-old", "eth0"}));
    // Allocation carries on after host-local's last reserved address, skipping imported ones.
    auto fresh = alloc.add(testing::add_request("new"));
    ASSERT_TRUE(fresh);
    EXPECT_EQ(fresh->addresses[0].address.to_string(), "10.6.0.4");
    EXPECT_EQ(fresh->addresses[1].address.to_string(), "fd06::3");
    // A repeated ADD of an imported attachment returns its addresses.
    EXPECT_EQ(testing::first_address(alloc.add(testing::add_request("ctr-a"))), "10.6.0.2");
    // DEL of the imported attachment frees them.
    ASSERT_TRUE(alloc.del({"ctr-a", "eth0"}));
    EXPECT_FALSE(alloc.addresses_of({"ctr-a", "eth0"}));
    testing::expect_verify_clean(*store);
}

TEST(Migration, ImportHappensOnlyWhenTheIndexIsCreated) {
    testing::TempDir dir;
    auto cfg = testing::network_config(dir, {testing::range_set({{"10.6.0.0/24", "", "", ""}})});
    { auto first = testing::open_store(cfg); }
    testing::write_file(cfg.host_local_dir() + "/10.6.0.2", "late\r\neth0");
    auto store = testing::open_store(cfg);
    Allocator alloc(*store, cfg);
    EXPECT_FALSE(alloc.addresses_of({"late", "eth0"}));
}

}  // namespace
}  // namespace shmipam::engine
