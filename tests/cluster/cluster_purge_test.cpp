// shmipamctl cluster purge (docs/operations.md, "Removing shmipam from a cluster"): simulated
// nodes against the real etcd.
#include <gtest/gtest.h>

#include <string>

#include "tests/cluster/simulated_nodes.h"

namespace shmipam::testing {
namespace {

class ClusterPurge : public SimulatedNodes {
  protected:
    bool any_under(const std::string& prefix) const {
        cluster::EtcdClient client(client_config());
        auto any = client.any_under(prefix);
        EXPECT_TRUE(any);
        return any && *any;
    }
};

// Removing shmipam from a cluster: the store's keys go only once no node in the list holds a
// block or claim (or with --force), and only behind --confirm repeating the prefix; keys outside
// the prefix are never touched.
TEST_F(ClusterPurge, RemovesEveryKeyUnderThePrefixOnlyOnceNoLiveNodeHoldsAndOnlyWhenConfirmed) {
    add_pods(0, 2);
    add_pods(1, 2);
    cluster::EtcdClient client(client_config());
    ASSERT_TRUE(client.put("/shmipam-other/keep", "another tool's"));
    const std::string live = dir.sub("live");
    write_file(live, "node-0\nnode-1\nnode-7\n");
    auto held = run_ctl({"cluster", "purge", "--config", config_file(0), "--live-nodes", live,
                         "--confirm", "/shmipam"});
    EXPECT_EQ(held.exit_code, 1) << held.out << held.err;
    EXPECT_NE(held.out.find("node-0: 1"), std::string::npos) << held.out;
    EXPECT_TRUE(any_under("/shmipam/")) << "refused: nothing removed";

    write_file(live, "node-7\n");  // the nodes uninstalled and deleted
    auto dry = run_ctl({"cluster", "purge", "--config", config_file(0), "--live-nodes", live});
    EXPECT_EQ(dry.exit_code, 1) << dry.out << dry.err;
    EXPECT_NE(dry.out.find("would remove"), std::string::npos) << dry.out;
    EXPECT_TRUE(any_under("/shmipam/")) << "a dry run removes nothing";
    auto wrong = run_ctl({"cluster", "purge", "--config", config_file(0), "--live-nodes", live,
                          "--confirm", "/shmipam-other"});
    EXPECT_EQ(wrong.exit_code, 2) << wrong.out << wrong.err;
    EXPECT_TRUE(any_under("/shmipam/"));

    auto done = run_ctl({"cluster", "purge", "--config", config_file(0), "--live-nodes", live,
                         "--confirm", "/shmipam"});
    ASSERT_EQ(done.exit_code, 0) << done.out << done.err;
    EXPECT_FALSE(any_under("/shmipam/"));
    EXPECT_TRUE(any_under("/shmipam-other/")) << "a key outside the prefix is kept";
    auto again = run_ctl({"cluster", "purge", "--config", config_file(0), "--live-nodes", live});
    EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
}

TEST_F(ClusterPurge, ForceRemovesWhatLiveNodesHoldAndBadInputChangesNothing) {
    add_pods(0, 1);
    const std::string live = dir.sub("live");
    write_file(live, "node-0\n");
    write_file(dir.sub("bad-list"), "{\"not\": \"nodes\"}");
    auto bad = run_ctl({"cluster", "purge", "--config", config_file(0), "--live-nodes",
                        dir.sub("bad-list"), "--confirm", "/shmipam"});
    EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
    EXPECT_TRUE(any_under("/shmipam/"));
    json root = config(0);
    root["ipam"]["etcd"]["prefix"] = "/";
    write_file(dir.sub("root.conf"), root.dump());
    auto at_root = run_ctl({"cluster", "purge", "--config", dir.sub("root.conf"), "--live-nodes",
                            live, "--confirm", "/"});
    EXPECT_EQ(at_root.exit_code, 2) << at_root.out << at_root.err;
    EXPECT_TRUE(any_under("/shmipam/"));
    auto forced = run_ctl({"cluster", "purge", "--config", config_file(0), "--live-nodes", live,
                           "--confirm", "/shmipam", "--force"});
    ASSERT_EQ(forced.exit_code, 0) << forced.out << forced.err;
    EXPECT_FALSE(any_under("/shmipam/"));
}

}  // namespace
}  // namespace shmipam::testing
