// What a node reads of the store cannot hurt it (docs/cluster.md, "Values that are not what
// their key says"): the real plugin and helper on simulated nodes against the real etcd, with
// values written by hand under the prefix.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/block_cache.h"
#include "cluster/key_schema.h"
#include "tests/cluster/simulated_nodes.h"

namespace shmipam::testing {
namespace {

class StoreValues : public SimulatedNodes {};

engine::Cidr cidr(const char* text) {
    return *engine::Cidr::parse(text);
}

// The failures guarded: one wrong-typed field under the prefix (`{"node": 7}` in a block, a
// claim's node a list) aborting the helper on every node, and a hand-written block key of
// another size naming a node letting that node allocate across the whole pool. Each such value
// is skipped, never read as a block or claim, and named by `cluster ls`.
TEST_F(StoreValues, AValueThatIsNotWhatItsKeySaysIsSkippedAndNamedAndNoNodeStops) {
    add_pods(0, 1);  // the pool registered, node-0's first block
    cluster::EtcdClient client(client_config());
    const std::vector<std::pair<std::string, std::string>> bad = {
        {cluster::keys::block("/shmipam", "shared", cidr("10.77.0.240/28")), R"({"node": 7})"},
        {cluster::keys::block("/shmipam", "shared", cidr("10.77.0.224/28")),
         R"({"node": "node-1", "nonce": "x", "claimedUnixS": "yesterday"})"},
        {cluster::keys::block("/shmipam", "shared", cidr("10.77.0.0/16")),
         R"({"node": "node-0", "nonce": "x", "claimedUnixS": 1})"},
        {cluster::keys::claim("/shmipam", "shared", "sts:shop/db-0/eth0"),
         R"({"address": "10.77.0.9", "node": ["node-1"], "nonce": "x", "keepIdle": 0})"},
        {cluster::keys::address("/shmipam", "shared", *engine::IpAddress::parse("10.77.0.9")),
         R"({"claim": 5})"},
        {cluster::keys::meta("/shmipam", "other"), R"({"cidr": 10, "blockPrefix": "26"})"},
        {cluster::keys::waiter("/shmipam", "shared", "node-9"), R"({"lastUnixS": "x"})"},
        {cluster::keys::idle_block("/shmipam", "shared", cidr("10.77.0.208/28")), R"({"node": 1})"},
        {cluster::keys::cidrs("/shmipam") + "10.99.0.0-16", R"(["not", "a", "record"])"},
    };
    for (const auto& [key, value] : bad) ASSERT_TRUE(client.put(key, value)) << key;

    // Three nodes keep claiming blocks: every ADD succeeds and no address is given twice.
    std::set<std::string> given;
    for (int node = 0; node < 3; ++node) {
        json c = config(node);
        c["ipam"]["claimAheadPercent"] = 0;
        for (int p = 0; p < 20; ++p) {
            auto r = run_plugin(
                cni_env("ADD", "v" + std::to_string(node) + "-" + std::to_string(p)), c.dump());
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
            const std::string a = r.json()["ips"][0]["address"];
            EXPECT_TRUE(given.insert(a).second) << a << " given twice";
            EXPECT_NE(block_of(a), "10.77.0.240/28") << "a block whose value is not one";
            EXPECT_NE(block_of(a), "10.77.0.224/28") << "a block whose value is not one";
        }
    }
    // The hand-written /16 naming node-0 never reached its cache.
    auto cached = cluster::read_block_cache(
        cluster::block_cache_path(dir.sub("node-0/data/_cluster"), "shared"));
    ASSERT_TRUE(cached);
    for (const auto& b : *cached) EXPECT_EQ(b.cidr.prefix, 28) << b.cidr.to_string();

    auto ls = run_ctl({"cluster", "ls", "--config", config_file(0)});
    EXPECT_EQ(ls.exit_code, 1) << ls.out << ls.err;
    for (const auto& [key, value] : bad) {
        EXPECT_NE(ls.out.find("unreadable store value: " + key), std::string::npos) << key << "\n"
                                                                                    << ls.out;
    }
    // The operator's other verbs read past them too.
    const std::string live = dir.sub("live");
    write_file(live, "node-0\nnode-1\nnode-2\n");
    auto gc = run_ctl({"cluster", "gc", "--config", config_file(0), "--live-nodes", live});
    EXPECT_EQ(gc.exit_code, 0) << gc.out << gc.err;
    auto pass = run_ctl({"cluster", "pass", "--config", config_file(0)});
    EXPECT_NE(pass.exit_code, 2) << pass.out << pass.err;
    EXPECT_EQ(pass.err.find("terminate"), std::string::npos) << pass.err;
}

}  // namespace
}  // namespace shmipam::testing
