// The node pass (`shmipamctl cluster pass`, docs/cluster.md "The node pass" and "No node shut
// out") against a real 3-member etcd, with simulated nodes exec'ing the real plugin, helper and
// shmipamctl: how many blocks idle nodes give back for the nodes that wait, which blocks count as
// idle, what one pool's failure leaves of the pass, and what the pass refuses to act on.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/waiting.h"
#include "tests/cluster/simulated_nodes.h"

namespace shmipam::testing {
namespace {

class NodePass : public SimulatedNodes {
  protected:
    // The pool "shared" as `cidr`, of /28 blocks (the fixture's default pool otherwise).
    void shared_pool_is(const std::string& cidr, const std::string& first,
                        const std::string& last) {
        write_file(dir.sub("pools") + "/pool.yaml",
                   "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                   "metadata: {name: shared}\nspec: {subnet: " +
                       cidr + ", ips: [\"" + first + "-" + last + "\"], default: true}\n");
    }
    // Node `n`'s config: no claim ahead, blocks given back as soon as they are idle.
    json cfg(int n, uint64_t min_age_s = 0) const {
        json c = config(n);
        c["ipam"]["claimAheadPercent"] = 0;
        c["ipam"]["blockMinAgeS"] = min_age_s;
        return c;
    }
    std::string conf_file(int n, uint64_t min_age_s = 0) const {
        const std::string file = dir.sub("pass-" + std::to_string(n) + ".conf");
        write_file(file, cfg(n, min_age_s).dump());
        return file;
    }
    ProcessResult pass(int n, uint64_t min_age_s = 0) const {
        return run_ctl({"cluster", "pass", "--config", conf_file(n, min_age_s)});
    }
    ProcessResult add(int n, const std::string& pod, uint64_t min_age_s = 0) const {
        return run_plugin(cni_env("ADD", pod), cfg(n, min_age_s).dump());
    }
    ProcessResult del(int n, const std::string& pod, uint64_t min_age_s = 0) const {
        return run_plugin(cni_env("DEL", pod), cfg(n, min_age_s).dump());
    }
    std::vector<cluster::IdleBlock> idle_records(const std::string& pool) const {
        cluster::EtcdClient client(client_config());
        auto idle = cluster::Waiting(client, "/shmipam").idle(pool);
        EXPECT_TRUE(idle) << idle.error().msg;
        return idle ? *idle : std::vector<cluster::IdleBlock>{};
    }
    // The passes of `nodes`, all at once.
    std::vector<ProcessResult> passes_at_once(const std::vector<int>& nodes) const {
        std::vector<std::unique_ptr<Child>> children;
        for (int n : nodes) {
            children.push_back(
                std::make_unique<Child>(std::vector<std::string>{SHMIPAMCTL_PATH, "cluster", "pass",
                                                                 "--config", conf_file(n)},
                                        std::map<std::string, std::string>{}, ""));
        }
        std::vector<ProcessResult> out;
        for (auto& c : children) out.push_back(c->wait());
        return out;
    }
};

// Guards against: one waiting node made every idle node give a block back in the same round
// (each pass gave one back whenever some node waited). A pass now gives back only when the pool
// has no unclaimed block the waiters could take, and only the first idle holders by name, as
// many as the waiters still unserved: N waiting nodes cause at most N give-backs.
TEST_F(NodePass, OneWaitingNodeMakesOneIdleNodeGiveABlockBackNotEveryIdleNode) {
    shared_pool_is("10.77.0.0/26", "10.77.0.0", "10.77.0.63");  // four /28 blocks
    for (int n = 0; n < 4; ++n) {
        const std::string pod = "p" + std::to_string(n);
        ASSERT_EQ(add(n, pod).exit_code, 0);
        ASSERT_EQ(del(n, pod).exit_code, 0);
        ASSERT_EQ(pass(n).exit_code, 0);  // records its block idle
    }
    ASSERT_EQ(store_blocks().size(), 4u);
    auto waits = add(4, "w1");
    ASSERT_EQ(waits.json()["code"], 11) << waits.out;
    // Every holder's pass at once, the waiter not yet back: one block given back.
    for (const auto& r : passes_at_once({0, 1, 2, 3})) EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(store_blocks().size(), 3u) << "one waiter, one give-back";
    // The passes again, before the waiter's retry: the unclaimed block serves it; none gives.
    for (int n = 0; n < 4; ++n) {
        auto r = pass(n);
        EXPECT_EQ(r.out.find("gave back"), std::string::npos) << r.out;
    }
    EXPECT_EQ(store_blocks().size(), 3u) << "a free block was left for the waiter";
    ASSERT_EQ(add(4, "w1").exit_code, 0);
    // Two nodes wait: two of the three idle holders give back, at once.
    EXPECT_EQ(add(5, "w2").json()["code"], 11);
    EXPECT_EQ(add(6, "w3").json()["code"], 11);
    size_t given = 0;
    for (const auto& r : passes_at_once({0, 1, 2, 3})) {
        given += r.out.find("gave back") != std::string::npos;
    }
    EXPECT_EQ(given, 2u);
    EXPECT_EQ(store_blocks().size(), 2u);
    EXPECT_EQ(add(5, "w2").exit_code, 0);
    EXPECT_EQ(add(6, "w3").exit_code, 0);
}

// Guards against: an error in one pool (here a cache file that cannot be read) ended the whole
// pass, so the node's other pools were never brought in line with the store. Each pool's error
// is now reported, the other pools are passed, and the pass exits non-zero at the end.
TEST_F(NodePass, OnePoolsErrorDoesNotStopThePassOverTheNodesOtherPools) {
    add_pods(0, 1);
    auto before = store_blocks();
    ASSERT_EQ(before.size(), 1u);
    cluster::EtcdClient client(client_config());
    ASSERT_TRUE(client.put(cluster::keys::block("/shmipam", "shared", before[0].cidr),
                           json{{"node", "node-1"}, {"nonce", "n"}, {"claimedUnixS", 1}}.dump()));
    // "aaa" sorts before "shared": its error came first and ended the pass.
    write_file(dir.sub("node-0/data/_cluster/aaa.blocks"), "not a block\n");
    auto r = run_ctl({"cluster", "pass", "--config", config_file(0), "--json"});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find("aaa"), std::string::npos) << r.out << r.err;
    EXPECT_EQ(cached_blocks(dir.sub("node-0/data/_cluster/shared.blocks")), 0u)
        << "the block taken from the node stayed in its cache: " << r.out << r.err;
}

// Guards against: the pass trusted the conflist's dataDir as mounted in its container. With
// the mount missing (an empty directory there) it wrote a new cluster-id and adopted the node's
// blocks into that directory. A dataDir without the node's cluster-id, or with another one, is
// now refused for the network while the store gives the node anything; a node that has claimed
// nothing yet has nothing to do.
TEST_F(NodePass, APassWhoseDataDirLacksTheNodesClusterIdRefusesInsteadOfAdoptingIntoIt) {
    add_pods(0, 1);
    const std::string empty = dir.sub("not-mounted");
    ::mkdir(empty.c_str(), 0755);
    json c = cfg(0);
    c["ipam"]["dataDir"] = empty;
    const std::string file = dir.sub("unmounted.conf");
    write_file(file, c.dump());
    auto r = run_ctl({"cluster", "pass", "--config", file});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("cluster-id"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("mounted"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(empty + "/_cluster/shared.blocks")) << r.out;
    EXPECT_FALSE(std::filesystem::exists(empty + "/_cluster/cluster-id")) << r.out;
    // Another cluster's id there: refused too.
    ::mkdir((empty + "/_cluster").c_str(), 0755);
    write_file(empty + "/_cluster/cluster-id", "0000000000000001\n");
    auto other = run_ctl({"cluster", "pass", "--config", file});
    EXPECT_EQ(other.exit_code, 2) << other.out << other.err;
    EXPECT_FALSE(std::filesystem::exists(empty + "/_cluster/shared.blocks")) << other.out;
    // A node with nothing in the store and no cluster-id yet: nothing to do.
    auto fresh = pass(7);
    EXPECT_EQ(fresh.exit_code, 0) << fresh.out << fresh.err;
}

// Guards against: a block the store gives a node that has no state of its pool at all (no
// arena, no journal: never used on the node) was recorded idle but never given back (the
// release wanted an arena to hold), so a waiting node waited for it forever. With no state on
// the node nothing there can use it: it is given back like any idle block.
TEST_F(NodePass, ABlockWithNoStateOnItsNodeIsGivenBackToAWaitingNode) {
    shared_pool_is("10.77.0.0/28", "10.77.0.0", "10.77.0.15");  // one block
    // node-0 is a node of the cluster (its dataDir knows the cluster) ...
    write_file(dir.sub("pools") + "/other.yaml",
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: other}\nspec: {subnet: 10.79.0.0/24, ips: "
               "[\"10.79.0.1-10.79.0.200\"]}\n");
    json c = cfg(0);
    c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
        {"ipam.spidernet.io/ippool", R"({"ipv4": ["other"]})"}};
    ASSERT_EQ(run_plugin(cni_env("ADD", "o1"), c.dump()).exit_code, 0);
    // ... and the store gives it the pool's one block, which it never allocated from.
    cluster::EtcdClient client(client_config());
    auto b = cluster::BlockStore(client, "/shmipam")
                 .claim_holding("shared", *engine::Cidr::parse("10.77.0.0/28"), 28,
                                *engine::IpAddress::parse("10.77.0.1"), "node-0");
    ASSERT_TRUE(b) << b.error().msg;
    age_blocks(3600);
    ASSERT_EQ(pass(0).exit_code, 0);  // adopts it and records it idle
    ASSERT_FALSE(std::filesystem::exists(dir.sub("node-0/run/_pools/ippool_shared")));
    EXPECT_EQ(add(1, "w1").json()["code"], 11);
    auto given = pass(0);
    EXPECT_EQ(given.exit_code, 0) << given.out << given.err;
    EXPECT_NE(given.out.find("gave back shared 10.77.0.0/28"), std::string::npos) << given.out;
    EXPECT_EQ(add(1, "w1").exit_code, 0);
}

// Guards against: the pass judged a block idle from its first idle record alone, so a block
// that served a pod between two passes (an ADD and its DEL) was given back as if idle all along.
// The block's last release in the arena now restarts its idle time.
TEST_F(NodePass, ABlockUsedBetweenTwoPassesIsNotJudgedIdleSinceTheFirst) {
    shared_pool_is("10.77.0.0/28", "10.77.0.0", "10.77.0.15");  // one block
    // Seconds. With whole-second stamps a block counts as idle long enough from a second less
    // than this after its release: the early pass below comes well before that (an ADD and a
    // pass), also on a machine five times slower at exec with CPU hogs beside it.
    constexpr uint64_t kMinAge = 4;
    // Past the minimum age from the step before (whole-second stamps round off less than this).
    constexpr auto kPastTheMinAge = std::chrono::milliseconds(kMinAge * 1000 + 200);
    ASSERT_EQ(add(0, "p1", kMinAge).exit_code, 0);
    ASSERT_EQ(del(0, "p1", kMinAge).exit_code, 0);
    ASSERT_EQ(pass(0, kMinAge).exit_code, 0);  // recorded idle
    std::this_thread::sleep_for(kPastTheMinAge);
    // A pod comes and goes between the passes.
    ASSERT_EQ(add(0, "p2", kMinAge).exit_code, 0);
    ASSERT_EQ(del(0, "p2", kMinAge).exit_code, 0);
    EXPECT_EQ(add(1, "w1", kMinAge).json()["code"], 11);
    auto early = pass(0, kMinAge);
    EXPECT_EQ(early.out.find("gave back"), std::string::npos)
        << "idle for 0 s, given back as if for " << kMinAge << ": " << early.out;
    EXPECT_EQ(blocks_of(store_blocks(), "node-0"), 1u);
    std::this_thread::sleep_for(kPastTheMinAge);
    EXPECT_EQ(add(1, "w1", kMinAge).json()["code"], 11);  // still waiting (kept fresh)
    auto later = pass(0, kMinAge);
    EXPECT_NE(later.out.find("gave back"), std::string::npos) << later.out;
    EXPECT_EQ(add(1, "w1", kMinAge).exit_code, 0);
}

// Guards against: the pass looked for a pool's arena only as a SpiderIPPool's state, so the
// blocks of a subnet annotation's state (subnet_<name>) looked unused: recorded idle while they
// held pods (a waiting node was told to wait for them). The pass now reads either state.
TEST_F(NodePass, ASubnetsBlockHoldingPodsIsNeverRecordedIdleAndIsGivenBackOnceEmpty) {
    write_file(dir.sub("pools") + "/sub.yaml",
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderSubnet\n"
               "metadata: {name: sub}\nspec: {subnet: 10.80.0.0/28, ips: "
               "[\"10.80.0.0-10.80.0.15\"]}\n");
    const auto in_subnet = [&](int n) {
        json c = cfg(n);
        c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
            {"ipam.spidernet.io/subnet", R"({"ipv4": ["sub"]})"}};
        return c.dump();
    };
    auto held = run_plugin(cni_env("ADD", "s1"), in_subnet(0));
    ASSERT_EQ(held.exit_code, 0) << held.out << held.err;
    ASSERT_NE(held.out.find("10.80.0."), std::string::npos) << held.out;
    ASSERT_TRUE(std::filesystem::exists(dir.sub("node-0/run/_pools/subnet_sub")));
    auto waits = run_plugin(cni_env("ADD", "w1"), in_subnet(1));
    EXPECT_NE(waits.exit_code, 0) << waits.out;
    auto p = pass(0);
    EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
    EXPECT_TRUE(idle_records("sub").empty()) << "a block holding a pod recorded idle";
    EXPECT_EQ(blocks_of(
                  [&] {
                      cluster::EtcdClient client(client_config());
                      auto b = cluster::BlockStore(client, "/shmipam").blocks("sub");
                      return b ? *b : std::vector<cluster::Block>{};
                  }(),
                  "node-0"),
              1u);
    // Emptied, it is recorded idle and given back to the waiting node.
    ASSERT_EQ(run_plugin(cni_env("DEL", "s1"), in_subnet(0)).exit_code, 0);
    ASSERT_EQ(pass(0).exit_code, 0);
    EXPECT_EQ(idle_records("sub").size(), 1u);
    auto waits_again = run_plugin(cni_env("ADD", "w1"), in_subnet(1));
    EXPECT_EQ(waits_again.json()["code"], 11) << waits_again.out;
    auto given = pass(0);
    EXPECT_NE(given.out.find("gave back sub"), std::string::npos) << given.out << given.err;
    auto served = run_plugin(cni_env("ADD", "w1"), in_subnet(1));
    EXPECT_EQ(served.exit_code, 0) << served.out << served.err;
}

}  // namespace
}  // namespace shmipam::testing
