// The store went back in time (docs/cluster.md, "The store went back in time"): etcd rebuilt
// from nothing with the same flags answers with the same cluster id, an empty store and a
// revision back near 1. Simulated nodes exec the real plugin, helper and shmipamctl
// against a real 3-member etcd, which the test rebuilds: the nodes refuse it (code 7) instead of
// claiming from it again, and `shmipamctl cluster recover` on each node puts back what it holds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/block_cache.h"
#include "cluster/fixed_claims.h"
#include "cluster/revision_floor.h"
#include "tests/cluster/simulated_nodes.h"

namespace shmipam::testing {
namespace {

// More ADDs than a /28 block holds: the node's next ADD after them needs a block, so the store.
constexpr int kAddsToNeedTheStore = 40;
// With two ADDs made already, enough more that a node needs a second /28 block.
constexpr int kPodsForTwoBlocks = 20;

class StoreRebuild : public SimulatedNodes {
  protected:
    void SetUp() override {
        SimulatedNodes::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        write_file(dir.sub("pools") + "/sts.yaml",
                   "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                   "metadata: {name: sts}\nspec: {subnet: 10.78.0.0/28, ips: "
                   "[\"10.78.0.2-10.78.0.6\"], gateway: 10.78.0.1}\n");
    }
    json cfg(int n) const {
        json c = config(n);
        c["ipam"]["claimAheadPercent"] = 0;
        c["ipam"]["fixedAddressPools"] = json::array({"sts"});
        return c;
    }
    std::string conf_file(int n) const {
        const std::string file = dir.sub("rebuild-" + std::to_string(n) + ".conf");
        write_file(file, cfg(n).dump());
        return file;
    }
    ProcessResult add(int n, const std::string& cid) const {
        return run_plugin(cni_env("ADD", cid), cfg(n).dump());
    }
    // A StatefulSet pod shop/<pod>: its address is a fixed claim in the store (pool "sts").
    ProcessResult add_sts(int n, const std::string& cid, const std::string& pod) const {
        json c = cfg(n);
        c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
            {"ipam.spidernet.io/ippool", "{\"ipv4\": [\"sts\"]}"},
            {"ipam.shmipam.io/static-ip", "true"}};
        c["args"]["cni"]["labels"] =
            json::array({{{"key", "statefulset.kubernetes.io/pod-name"}, {"value", pod}}});
        return run_plugin(cni_env("ADD", cid, "eth0",
                                  "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=" + pod +
                                      ";K8S_POD_UID=uid-" + cid),
                          c.dump());
    }
    static std::string address(const ProcessResult& r) {
        return r.exit_code == 0 ? r.json()["ips"][0]["address"].get<std::string>() : "";
    }
    ProcessResult recover(int n, bool apply) const {
        std::vector<std::string> args{"cluster", "recover", "--config", conf_file(n)};
        if (apply) args.push_back("--apply");
        return run_ctl(args);
    }
    // ADDs on node n until one fails (the one that needed the store), at most
    // kAddsToNeedTheStore: the failure, or nullopt when every one succeeded.
    std::optional<ProcessResult> add_until_refused(int n, const std::string& tag,
                                                   std::vector<std::string>* served = nullptr) {
        for (int i = 0; i < kAddsToNeedTheStore; ++i) {
            auto r = add(n, tag + std::to_string(i));
            if (r.exit_code != 0) return r;
            if (served != nullptr) served->push_back(address(r));
        }
        return std::nullopt;
    }
    std::vector<cluster::FixedClaim> fixed_claims() const {
        cluster::EtcdClient client(client_config());
        auto c = cluster::FixedClaims(client, "/shmipam").all("sts");
        EXPECT_TRUE(c) << c.error().msg;
        return c ? *c : std::vector<cluster::FixedClaim>{};
    }
    std::string state_dir(int n) const {
        return dir.sub("node-" + std::to_string(n) + "/data") + "/_cluster";
    }
    static bool says_went_back(const ProcessResult& r) {
        return r.json().is_object() && r.json()["code"] == 7 &&
               r.json()["msg"].get<std::string>().find("went back in time") != std::string::npos &&
               r.json()["msg"].get<std::string>().find("cluster recover") != std::string::npos;
    }
};

TEST_F(StoreRebuild, AnEtcdRebuiltFromNothingIsRefusedNotClaimedFromAgain) {
    for (int n : {0, 1}) {
        for (int p = 0; p < 2; ++p) {
            auto r = add(n, "n" + std::to_string(n) + "-p" + std::to_string(p));
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        }
    }
    ASSERT_EQ(store_blocks().size(), 2u);
    ASSERT_TRUE(etcd->rebuild_from_nothing());
    ASSERT_TRUE(store_blocks().empty()) << "the rebuilt store is empty";
    // The node serves from its blocks without the store; the ADD that needs a block is refused.
    auto refused = add_until_refused(0, "after");
    ASSERT_TRUE(refused) << "every ADD succeeded: the rebuilt store was claimed from";
    EXPECT_TRUE(says_went_back(*refused)) << refused->out << refused->err;
    EXPECT_TRUE(store_blocks().empty()) << "nothing was claimed in the rebuilt store";
    // The operator's verbs that read the store refuse it too (exit 2, the same reason).
    for (const std::vector<std::string>& verb :
         {std::vector<std::string>{"cluster", "ls", "--config", conf_file(0)},
          std::vector<std::string>{"cluster", "pass", "--config", conf_file(0)}}) {
        auto r = run_ctl(verb);
        EXPECT_EQ(r.exit_code, 2) << verb[1] << ": " << r.out << r.err;
        EXPECT_NE(r.err.find("went back in time"), std::string::npos) << verb[1] << ": " << r.err;
    }
    EXPECT_TRUE(store_blocks().empty()) << "the pass dropped or claimed nothing";
    EXPECT_EQ(cached_blocks(cluster::block_cache_path(state_dir(0), "shared")), 1u)
        << "the node's cache still holds its block";
}

TEST_F(StoreRebuild, RecoverOnEveryNodePutsTheirBlocksAndClaimsBackAndNothingIsGivenTwice) {
    std::vector<std::string> served;
    for (int n : {0, 1}) {
        for (int p = 0; p < 3; ++p) {
            auto r = add(n, "n" + std::to_string(n) + "-p" + std::to_string(p));
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
            served.push_back(address(r));
        }
    }
    auto sts = add_sts(0, "s0", "db-0");
    ASSERT_EQ(sts.exit_code, 0) << sts.out << sts.err;
    const std::string fixed = address(sts);
    ASSERT_TRUE(etcd->rebuild_from_nothing());

    // The dry run says what it would re-create, exits 1, and changes nothing.
    const std::string floor_before = read_file(cluster::revision_floor_path(state_dir(0)));
    auto dry = recover(0, false);
    EXPECT_EQ(dry.exit_code, 1) << dry.out << dry.err;
    EXPECT_NE(dry.out.find("would re-create shared block"), std::string::npos) << dry.out;
    EXPECT_NE(dry.out.find("would re-create sts claim sts:shop/db-0/eth0"), std::string::npos)
        << dry.out;
    EXPECT_TRUE(store_blocks().empty());
    EXPECT_TRUE(fixed_claims().empty());
    EXPECT_EQ(read_file(cluster::revision_floor_path(state_dir(0))), floor_before);
    auto still = add_until_refused(0, "dry");
    ASSERT_TRUE(still);
    EXPECT_TRUE(says_went_back(*still)) << still->out;

    for (int n : {0, 1}) {
        auto r = recover(n, true);
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_NE(r.out.find("accepted the store"), std::string::npos) << r.out;
    }
    const auto blocks = store_blocks();
    EXPECT_EQ(blocks_of(blocks, "node-0"), 1u);
    EXPECT_EQ(blocks_of(blocks, "node-1"), 1u);
    const auto claims = fixed_claims();
    ASSERT_EQ(claims.size(), 1u);
    EXPECT_EQ(claims[0].node, "node-0");
    EXPECT_EQ(claims[0].address.to_string() + "/28", fixed);
    // A second run finds everything present: nothing to do.
    auto again = recover(0, false);
    EXPECT_EQ(again.exit_code, 0) << again.out << again.err;

    // ADDs work again on both nodes and on a node that joins now; no address is given twice.
    for (int n : {0, 1, 2}) {
        for (int p = 0; p < 20; ++p) {
            auto r = add(n, "m" + std::to_string(n) + "-" + std::to_string(p));
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
            served.push_back(address(r));
        }
    }
    auto other_sts = add_sts(1, "s1", "db-1");
    ASSERT_EQ(other_sts.exit_code, 0) << other_sts.out << other_sts.err;
    EXPECT_NE(address(other_sts), fixed);
    std::set<std::string> distinct(served.begin(), served.end());
    EXPECT_EQ(distinct.size(), served.size()) << "an address was given twice";
    for (int n : {0, 1, 2}) {
        auto ls = run_ctl({"cluster", "ls", "--config", conf_file(n)});
        EXPECT_EQ(ls.exit_code, 0) << ls.out << ls.err;
        auto v = run_ctl(
            {"--run-dir", dir.sub("node-" + std::to_string(n) + "/run"), "verify", "pool/shared"});
        EXPECT_EQ(v.exit_code, 0) << v.out;
    }
}

TEST_F(StoreRebuild, RecoverRefusesABlockAnotherNodeClaimedInTheNewStoreAndNamesIt) {
    for (int p = 0; p < 2; ++p) ASSERT_EQ(add(0, "p" + std::to_string(p)).exit_code, 0);
    const auto before = store_blocks();
    ASSERT_EQ(before.size(), 1u);
    const engine::Cidr block = before[0].cidr;
    ASSERT_TRUE(etcd->rebuild_from_nothing());
    // Another node (its floor knows nothing of the old store) claimed node 0's block meanwhile.
    {
        cluster::EtcdClient client(client_config());
        auto got = cluster::BlockStore(client, "/shmipam")
                       .claim_holding("shared", block, block.prefix, block.network(), "node-9");
        ASSERT_TRUE(got) << got.error().msg;
    }
    auto r = recover(0, true);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("conflict shared block " + block.to_string()), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("node-9"), std::string::npos) << r.out;
    const auto after = store_blocks();
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].node, "node-9") << "the other node's block is left alone";
    // Not accepted: node 0's helpers stay refused until the conflict is resolved.
    auto refused = add_until_refused(0, "after");
    ASSERT_TRUE(refused);
    EXPECT_TRUE(says_went_back(*refused)) << refused->out;
}

// A restore loses what was claimed after the snapshot, with the same cluster id: the nodes that
// claimed since refuse the store, and their recovery puts those blocks back.
TEST_F(StoreRebuild, AStoreRestoredFromASnapshotIsRefusedAndRecoverPutsBackWhatCameAfter) {
    std::vector<std::string> served;
    for (int p = 0; p < 2; ++p) {
        auto r = add(0, "early" + std::to_string(p));
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        served.push_back(address(r));
    }
    ASSERT_EQ(store_blocks().size(), 1u);
    ASSERT_TRUE(etcd->save_snapshot(dir.sub("snap.db")));
    // After the snapshot: node 0 needs a second block, node 1 claims its first.
    for (int p = 0; p < kPodsForTwoBlocks; ++p) {
        auto r = add(0, "late" + std::to_string(p));
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        served.push_back(address(r));
    }
    for (int p = 0; p < 2; ++p) {
        auto r = add(1, "one" + std::to_string(p));
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        served.push_back(address(r));
    }
    ASSERT_EQ(blocks_of(store_blocks(), "node-0"), 2u);
    ASSERT_TRUE(etcd->restore_snapshot(dir.sub("snap.db")));
    ASSERT_EQ(store_blocks().size(), 1u) << "the store as at the snapshot";
    for (int n : {0, 1}) {
        std::vector<std::string> more;
        auto refused = add_until_refused(n, "restored", &more);
        ASSERT_TRUE(refused) << "node " << n << " claimed from the restored store";
        EXPECT_TRUE(says_went_back(*refused)) << refused->out << refused->err;
        served.insert(served.end(), more.begin(), more.end());
    }
    EXPECT_EQ(store_blocks().size(), 1u) << "nothing was claimed in the restored store";
    for (int n : {0, 1}) {
        auto r = recover(n, true);
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_NE(r.out.find("re-created shared block"), std::string::npos) << r.out;
    }
    const auto blocks = store_blocks();
    EXPECT_EQ(blocks_of(blocks, "node-0"), 2u);
    EXPECT_EQ(blocks_of(blocks, "node-1"), 1u);
    for (int n : {0, 1, 2}) {
        for (int p = 0; p < 20; ++p) {
            auto r = add(n, "after" + std::to_string(n) + "-" + std::to_string(p));
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
            served.push_back(address(r));
        }
    }
    std::set<std::string> distinct(served.begin(), served.end());
    EXPECT_EQ(distinct.size(), served.size()) << "an address was given twice";
    for (int n : {0, 1, 2}) {
        auto ls = run_ctl({"cluster", "ls", "--config", conf_file(n)});
        EXPECT_EQ(ls.exit_code, 0) << ls.out << ls.err;
        auto v = run_ctl(
            {"--run-dir", dir.sub("node-" + std::to_string(n) + "/run"), "verify", "pool/shared"});
        EXPECT_EQ(v.exit_code, 0) << v.out;
    }
}

TEST_F(StoreRebuild, RecoverExitsTwoOnBadInputBeforeAnyChange) {
    ASSERT_EQ(add(0, "p0").exit_code, 0);
    ASSERT_TRUE(etcd->rebuild_from_nothing());
    auto missing = run_ctl({"cluster", "recover", "--config", dir.sub("none.conf"), "--apply"});
    EXPECT_EQ(missing.exit_code, 2) << missing.out << missing.err;
    write_file(dir.sub("bad.conf"), "{not json");
    auto bad = run_ctl({"cluster", "recover", "--config", dir.sub("bad.conf"), "--apply"});
    EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
    auto node = run_ctl(
        {"cluster", "recover", "--config", conf_file(0), "--node", "Not_A_Node", "--apply"});
    EXPECT_EQ(node.exit_code, 2) << node.out << node.err;
    EXPECT_TRUE(store_blocks().empty());
}

// The floor file alone (no etcd): it never goes down, also with concurrent writers (helpers of
// different pools share no pool lock), and a damaged one is refused by name.
TEST(RevisionFloor, NeverGoesDownUnderConcurrentRaisesAndADamagedFileIsRefusedByName) {
    TempDir d;
    const std::string dir = d.sub("_cluster");
    EXPECT_TRUE(cluster::check_revision_floor(dir, 5)) << "no file yet: the first run accepts";
    constexpr int kWriters = 8, kRaisesEach = 50;
    std::vector<pid_t> kids;
    for (int w = 0; w < kWriters; ++w) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            bool ok = true;
            for (int i = 0; i < kRaisesEach; ++i) {
                ok = ok && bool(cluster::raise_revision_floor(dir, 1 + i * kWriters + w));
            }
            ::_exit(ok ? 0 : 1);
        }
        kids.push_back(pid);
    }
    for (pid_t k : kids) {
        int status = 0;
        ::waitpid(k, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    auto floor = cluster::remembered_revision(dir);
    ASSERT_TRUE(floor);
    EXPECT_EQ(*floor, int64_t(kWriters * kRaisesEach)) << "the highest value written";
    EXPECT_TRUE(cluster::raise_revision_floor(dir, 3));
    EXPECT_EQ(*cluster::remembered_revision(dir), int64_t(kWriters * kRaisesEach));
    auto back = cluster::check_revision_floor(dir, 3);
    ASSERT_FALSE(back);
    EXPECT_EQ(back.error().code, Code::kInvalidConfig);
    EXPECT_NE(back.error().msg.find("went back in time"), std::string::npos);
    EXPECT_TRUE(cluster::check_revision_floor(dir, kWriters * kRaisesEach));
    write_file(cluster::revision_floor_path(dir), "12ab\n");
    auto damaged = cluster::check_revision_floor(dir, 1000);
    ASSERT_FALSE(damaged);
    EXPECT_EQ(damaged.error().code, Code::kInvalidConfig);
    EXPECT_NE(damaged.error().msg.find(cluster::revision_floor_path(dir)), std::string::npos);
}

}  // namespace
}  // namespace shmipam::testing
