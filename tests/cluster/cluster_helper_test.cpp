// The cluster helper as the plugin execs it (tools/cluster_helper.cpp): a fresh process, the
// typed request of cluster/helper_protocol.h on stdin, against a real 3-member etcd; the node's
// block cache it writes.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/helper_protocol.h"
#include "cluster/node_files.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"
#include "tests/support/three_etcd_members.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace protocol = cluster::protocol;

class ClusterHelper : public testing::ThreeEtcdMembers {
  protected:
    protocol::ClaimBlock request(const std::string& node, size_t max_blocks = 32) const {
        protocol::ClaimBlock r;
        r.scope = {json{{"endpoints", etcd->client_urls()}, {"budgetMs", 3000}}, "default", node,
                   dir.sub(node)};
        r.geometry.pool_cidr = *engine::Cidr::parse("10.80.0.0/24");
        r.geometry.block_prefix = 26;
        r.max_blocks = max_blocks;
        return r;
    }
    // As the plugin calls it: with the node's blocks it knows of (its cache).
    ProcessResult helper(protocol::ClaimBlock in, bool seen_from_cache = true) {
        if (seen_from_cache) in.geometry.seen = cached_cidrs(in.scope.node);
        return helper_raw(protocol::encode(in));
    }
    ProcessResult helper(const protocol::Request& in) { return helper_raw(protocol::encode(in)); }
    ProcessResult helper_raw(const std::string& text) {
        return run_process({SHMIPAM_CLUSTER_HELPER_PATH}, {}, text);
    }
    std::vector<engine::Cidr> cached_cidrs(const std::string& node) {
        std::vector<engine::Cidr> out;
        for (const auto& c : cached(node)) out.push_back(*engine::Cidr::parse(c));
        return out;
    }
    std::vector<std::string> cached(const std::string& node) {
        auto blocks =
            cluster::read_block_cache(cluster::block_cache_path(dir.sub(node), "default"));
        EXPECT_TRUE(blocks);
        std::vector<std::string> out;
        for (const auto& b : *blocks) out.push_back(b.cidr.to_string());
        return out;
    }

    TempDir dir;
};

// Helpers SIGKILLed at random points of their claims (before their etcd transaction, between it
// and the cache's write, during the write): the cache is never torn, no lock stays held, and the
// next helper run brings the cache to exactly the blocks the store gives the node (adopting
// those whose claimer died after its commit).
TEST_F(ClusterHelper, HelpersKilledMidClaimLeaveACacheTheNextRunMakesWhole) {
    protocol::ClaimBlock in = request("node-a", 100);
    in.geometry.block_prefix = 28;
    // What a whole claim takes, from spawn to exit, on this machine now (the median of a few,
    // by another node in a pool of its own): the kill times are fractions of it, never fixed
    // milliseconds, which on a slower machine would all land while the helper still starts.
    constexpr int kTimingRuns = 5;  // odd: the median is one of them
    protocol::ClaimBlock probe = request("node-timing", 100);
    probe.scope.pool = "timing";
    probe.geometry.pool_cidr = *engine::Cidr::parse("10.81.0.0/24");  // pools never overlap
    probe.geometry.block_prefix = 28;
    std::vector<std::chrono::microseconds> took;
    for (int i = 0; i < kTimingRuns; ++i) {
        probe.geometry.seen.clear();  // as the plugin calls it: with the blocks of its cache
        auto cached_blocks = cluster::read_block_cache(
            cluster::block_cache_path(dir.sub("node-timing"), probe.scope.pool));
        ASSERT_TRUE(cached_blocks);
        for (const auto& b : *cached_blocks) probe.geometry.seen.push_back(b.cidr);
        const auto start = std::chrono::steady_clock::now();
        const ProcessResult r = helper_raw(protocol::encode(probe));
        took.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now() - start));
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    std::nth_element(took.begin(), took.begin() + kTimingRuns / 2, took.end());
    const uint64_t claim_us = uint64_t(took[kTimingRuns / 2].count());
    // Kills land from a sixth of a claim (past the exec: before the etcd transaction) to past
    // its end (between the transaction and the cache's write, during the write, and after).
    constexpr uint64_t kFirstKillPercent = 16, kLastKillPercent = 150;
    std::mt19937 rng(7);
    size_t killed = 0;
    for (int i = 0; i < 30; ++i) {
        in.geometry.seen = cached_cidrs("node-a");
        Child c({SHMIPAM_CLUSTER_HELPER_PATH}, {}, protocol::encode(in));
        const uint64_t percent = kFirstKillPercent + rng() % (kLastKillPercent - kFirstKillPercent);
        std::this_thread::sleep_for(std::chrono::microseconds(claim_us * percent / 100));
        killed += ::kill(c.pid(), SIGKILL) == 0;
        c.wait();
        auto blocks =
            cluster::read_block_cache(cluster::block_cache_path(dir.sub("node-a"), "default"));
        ASSERT_TRUE(blocks) << "a torn cache after kill " << i;
    }
    const auto before = cached("node-a");
    const protocol::Refresh refresh{in.scope, in.geometry};
    const auto t0 = std::chrono::steady_clock::now();
    auto r = helper(protocol::Request{refresh});
    const auto refresh_took = std::chrono::steady_clock::now() - t0;
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    // A lock left held would make the run wait its whole lock wait (cluster/node_files.h) before
    // it failed; a run that found it free ends within a budget: half the wait tells them apart.
    const uint64_t budget_ms = in.scope.etcd.at("budgetMs").get<uint64_t>();
    const auto lock_wait = std::chrono::milliseconds(cluster::kLockWaitBudgets * budget_ms);
    EXPECT_LT(refresh_took, lock_wait / 2) << "a lock held";
    std::printf("[ helper   ] a claim takes %.2f ms; the refresh after the kills took %.2f ms\n",
                double(claim_us) / 1000,
                std::chrono::duration<double, std::milli>(refresh_took).count());
    cluster::EtcdClient client(client_config());
    auto owned = cluster::BlockStore(client, "/shmipam").blocks("default");
    ASSERT_TRUE(owned) << owned.error().msg;
    std::set<std::string> in_store;
    for (const auto& b : *owned) {
        if (b.node == "node-a") in_store.insert(b.cidr.to_string());
    }
    const auto now = cached("node-a");
    EXPECT_EQ(std::set<std::string>(now.begin(), now.end()), in_store);
    EXPECT_FALSE(in_store.empty()) << "no kill landed after a claim: the test proved nothing";
    std::cout << killed << " helpers killed, " << in_store.size() << " blocks claimed, "
              << in_store.size() - before.size() << " of them adopted by the last run\n";
}

TEST_F(ClusterHelper, NodesClaimDistinctBlocksAndCacheTheirOwn) {
    std::set<std::string> all;
    for (const char* node : {"node-a", "node-b", "node-c"}) {
        auto r = helper(request(node));
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        const std::string claimed = r.json()["claimed"];
        EXPECT_TRUE(all.insert(claimed).second) << claimed << " twice";
        EXPECT_EQ(cached(node), std::vector<std::string>{claimed});
    }
    auto again = helper(request("node-a"));
    ASSERT_EQ(again.exit_code, 0) << again.out;
    EXPECT_EQ(again.json()["blocks"].size(), 2u);
    EXPECT_EQ(cached("node-a").size(), 2u);
    // The pool (four /26 blocks) is exhausted: nothing claimed, the cache unchanged.
    auto none = helper(request("node-b"));
    ASSERT_EQ(none.exit_code, 0) << none.out;
    EXPECT_TRUE(none.json()["claimed"].is_null());
    EXPECT_EQ(cached("node-b").size(), 1u);
}

TEST_F(ClusterHelper, ANodeAtItsCapIsToldSo) {
    ASSERT_EQ(helper(request("node-a", 1)).exit_code, 0);
    auto r = helper(request("node-a", 1));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(r.json()["claimed"].is_null());
    EXPECT_TRUE(r.json()["atCap"].get<bool>());
}

TEST_F(ClusterHelper, ARequestedAddressInAnotherNodesBlockNamesThatNode) {
    protocol::ClaimBlock a = request("node-a");
    a.address = engine::IpAddress::parse("10.80.0.5");
    ASSERT_EQ(helper(a).exit_code, 0);
    protocol::ClaimBlock b = request("node-b");
    b.address = engine::IpAddress::parse("10.80.0.6");
    auto r = helper(b);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.json()["code"], 101) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("node-a"), std::string::npos) << r.out;
}

TEST_F(ClusterHelper, WithoutEtcdItFailsWithinTheBudgetAndLeavesTheCache) {
    ASSERT_EQ(helper(request("node-a")).exit_code, 0);
    for (size_t i = 0; i < etcd->size(); ++i) etcd->kill(i);
    const protocol::ClaimBlock in = request("node-a");
    const auto t0 = std::chrono::steady_clock::now();
    auto r = helper(in);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.json()["code"], 50) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("etcd unavailable"), std::string::npos);
    // The budget, plus the helper's start and exit (a dynamically linked process: tens of
    // milliseconds of CPU on a machine five times slower at exec, more with CPU hogs beside it).
    constexpr int64_t kPastTheBudgetMs = 1500;
    EXPECT_LE(took, in.scope.etcd.at("budgetMs").get<int64_t>() + kPastTheBudgetMs);
    EXPECT_EQ(cached("node-a").size(), 1u) << "what the node owns is still known";
}

TEST_F(ClusterHelper, AnotherClusterIsRefused) {
    ASSERT_EQ(helper(request("node-a")).exit_code, 0);
    EtcdCluster other(1);
    ASSERT_TRUE(other.ready()) << other.why_not_ready();
    protocol::ClaimBlock in = request("node-a");
    in.scope.etcd["endpoints"] = other.client_urls();
    auto r = helper(in);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.json()["code"], 7) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("refusing"), std::string::npos);
    EXPECT_EQ(cached("node-a").size(), 1u);
}

// Concurrent ADDs on a node each exec the helper: they take turns, and one that finds a block
// of the node its caller did not know of answers that block instead of claiming another.
TEST_F(ClusterHelper, AHelperThatFindsABlockItsCallerDidNotKnowAnswersItAndClaimsNothing) {
    const protocol::ClaimBlock first = request("node-a");
    auto a = helper(first, /*seen_from_cache=*/false);
    ASSERT_EQ(a.exit_code, 0) << a.out;
    auto b = helper(first, false);  // the caller read the cache before a's helper wrote it
    ASSERT_EQ(b.exit_code, 0) << b.out;
    EXPECT_EQ(b.json()["claimed"], a.json()["claimed"]);
    EXPECT_EQ(b.json()["blocks"].size(), 1u) << "nothing more claimed";
}

// A plugin of another release (an upgrade that replaced one binary and not the other) sends a
// request of another protocol version or an op this helper does not know: refused with code 1
// naming both versions, before anything is read or claimed.
TEST_F(ClusterHelper, ARequestOfAnotherVersionOrAnUnknownOpIsRefusedAndClaimsNothing) {
    json newer = json::parse(protocol::encode(request("node-a")));
    newer["version"] = protocol::kVersion + 1;
    auto r = helper_raw(newer.dump());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.json()["code"], 1) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("protocol version"), std::string::npos)
        << r.out;
    // A request from before versions: its op guessed from its keys, a release read as a claim.
    json unversioned = json::parse(protocol::encode(request("node-a")));
    unversioned.erase("version");
    unversioned.erase("op");
    unversioned["release"] = "10.80.0.0/26";
    r = helper_raw(unversioned.dump());
    EXPECT_EQ(r.json()["code"], 1) << r.out;
    json unknown = json::parse(protocol::encode(request("node-a")));
    unknown["op"] = "borrow-address";
    r = helper_raw(unknown.dump());
    EXPECT_EQ(r.json()["code"], 1) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("borrow-address"), std::string::npos);
    EXPECT_TRUE(cached("node-a").empty()) << "nothing claimed";
    cluster::EtcdClient client(client_config());
    auto owned = cluster::BlockStore(client, "/shmipam").blocks("default");
    ASSERT_TRUE(owned) << owned.error().msg;
    EXPECT_TRUE(owned->empty());
}

}  // namespace
}  // namespace shmipam::testing
