// Cluster mode's address source (ipam/cluster_source.h) in process: the agent it would exec
// served over the in-memory store instead (its runner injected), so that what an ADD asks of
// the cluster and what it does with the answers is tested without etcd or a helper program:
// the node's first ADD of a pool reconciles once, a block claimed is where the ADD looks next,
// a full pool or a node at its cap says why, an unreachable store is code 50 and later ADDs use
// the cache without asking again, and a fixed address follows its pod to another node.
// tests/cluster runs the real helper against a real etcd.
#include "ipam/cluster_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/helper_envelope.h"
#include "cluster/agent.h"
#include "cluster/fixed_claims.h"
#include "cluster/helper_protocol.h"
#include "tests/support/block_views.h"
#include "tests/support/memory_kv.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace protocol = cluster::protocol;

constexpr const char* kPrefix = "/shmipam";  // etcd's prefix when ipam.etcd names none
constexpr uint64_t kBudgetMs = 1000;

// The agent served in process over `etcd`, as the helper serves it: the request decoded, the
// answer or the error encoded. A lock handed over is the agent's own copy of the descriptor,
// as the helper's fd 3 is.
class InProcessAgent final : public ipam::AgentRunner {
  public:
    explicit InProcessAgent(MemoryEtcd& etcd) : etcd_(etcd) {}
    InProcessAgent(const InProcessAgent&) = delete;
    InProcessAgent& operator=(const InProcessAgent&) = delete;
    // Detached agents never served let their locks go with the test.
    ~InProcessAgent() {
        for (const auto& d : detached) {
            if (d.second >= 0) ::close(d.second);
        }
    }

    Expected<std::string> run(const std::string& request, int lock_fd) override {
        ++runs;
        return serve(request, lock_fd >= 0 ? ::dup(lock_fd) : -1);
    }
    // Recorded, holding its lock, and never served: no decision tested here starts one.
    void start_detached(const std::string& request, int lock_fd) override {
        detached.push_back({request, lock_fd >= 0 ? ::dup(lock_fd) : -1});
    }

    int runs = 0;
    std::vector<std::pair<std::string, int>> detached;

  private:
    std::string serve(const std::string& text, int handed_fd) {
        auto request = protocol::decode(text);
        if (!request) {
            if (handed_fd >= 0) ::close(handed_fd);  // the agent would have adopted it
            return base::envelope::error_json(request.error()).dump();
        }
        MemoryKv kv(etcd_);
        auto answer = cluster::agent::serve(*request, kv, {handed_fd, 8 * kBudgetMs});
        if (!answer) return base::envelope::error_json(answer.error()).dump();
        return cluster::agent::answer_json(*answer).dump();
    }

    MemoryEtcd& etcd_;
};

// One node of the cluster: its request (what its plugin read from the config) and its dirs.
struct Node {
    Node(const TempDir& dir, const std::string& name, uint64_t max_blocks = 32) {
        r.network.name = "pods";
        r.network.data_dir = dir.sub(name + "/data");
        r.network.run_dir = dir.sub(name + "/run");
        r.network.block_prefix_v4 = 26;
        ipam::PoolMode pm;
        pm.pools_dir = dir.sub("pools");
        pm.node_name = name;
        pm.node_name_from_config = true;
        ipam::ClusterMode cm;
        cm.etcd = json::object();
        cm.budget_ms = kBudgetMs;
        cm.max_blocks = max_blocks;
        cm.fixed_pools = {"sts"};
        pm.cluster = cm;
        r.pools = pm;
        r.key = {"sandbox-on-" + name, "eth0"};
    }
    ipam::Request r;
};

class ClusterSourceDecisions : public ::testing::Test {
  protected:
    std::vector<std::string> places_of(ipam::ClusterSource& source, const ipam::PoolTarget& t) {
        auto places = source.places(t, /*fixed=*/false);
        EXPECT_TRUE(places) << places.error().msg;
        std::vector<std::string> out;
        for (const auto& p : places ? *places : std::vector<pools::IpSet>{}) {
            if (!p.empty()) out.push_back(p.to_string());
        }
        return out;
    }

    TempDir dir;
    MemoryEtcd etcd;
    InProcessAgent agent{etcd};
    const std::string pool = "default";
    const engine::Cidr cidr = *engine::Cidr::parse("10.80.0.0/24");
    pools::IpSet usable = [] {
        pools::IpSet s(engine::Family::kV4);
        EXPECT_TRUE(s.add_text("10.80.0.1-10.80.0.254"));
        return s;
    }();
    const ipam::PoolTarget target{pool, cidr, usable};
};

TEST_F(ClusterSourceDecisions, TheFirstAddReconcilesOnceAndABlockClaimedIsWhereTheNextLooks) {
    Node a(dir, "node-a");
    ipam::ClusterSource first(a.r, agent);
    first.prepare(target);
    EXPECT_EQ(agent.runs, 1) << "the node's first ADD of the pool since boot reconciles";
    EXPECT_TRUE(places_of(first, target).empty()) << "no block yet";
    std::string why;
    auto room = first.make_room(target, std::nullopt, &why);
    ASSERT_TRUE(room) << room.error().msg;
    EXPECT_TRUE(*room) << why;
    const auto places = places_of(first, target);
    ASSERT_EQ(places.size(), 1u);
    const auto owners = block_owners(etcd, kPrefix, pool);
    ASSERT_EQ(owners.size(), 1u);
    EXPECT_EQ(owners.begin()->second, "node-a");
    const engine::Cidr block = *engine::Cidr::parse(owners.begin()->first);
    EXPECT_TRUE(usable.intersect(block).to_string() == places[0]) << places[0];

    ipam::ClusterSource second(a.r, agent);
    second.prepare(target);
    EXPECT_EQ(agent.runs, 2) << "the next ADD finds the pool reconciled and asks nothing";
    EXPECT_EQ(places_of(second, target), places);
    EXPECT_TRUE(second.still_serves(pool, {{block.network(), 0}}));
}

TEST_F(ClusterSourceDecisions, AFullPoolOrANodeAtItsCapSaysWhyNoRoomIsLeft) {
    const std::string tiny_pool = "tiny";
    const engine::Cidr one_block = *engine::Cidr::parse("10.81.0.0/26");
    pools::IpSet all(engine::Family::kV4);
    ASSERT_TRUE(all.add_text("10.81.0.1-10.81.0.62"));
    const ipam::PoolTarget tiny{tiny_pool, one_block, all};
    Node b(dir, "node-b", /*max_blocks=*/1);
    ipam::ClusterSource on_b(b.r, agent);
    std::string why;
    ASSERT_TRUE(*on_b.make_room(tiny, std::nullopt, &why)) << why;

    Node a(dir, "node-a");
    ipam::ClusterSource on_a(a.r, agent);
    auto none = on_a.make_room(tiny, std::nullopt, &why);
    ASSERT_TRUE(none) << none.error().msg;
    EXPECT_FALSE(*none);
    EXPECT_NE(why.find("every block holds pods (node-b"), std::string::npos) << why;

    ASSERT_TRUE(*on_b.make_room(target, std::nullopt, &why)) << why;
    auto capped = on_b.make_room(target, std::nullopt, &why);
    ASSERT_TRUE(capped) << capped.error().msg;
    EXPECT_FALSE(*capped);
    EXPECT_NE(why.find("node node-b holds its maximum of 1 blocks"), std::string::npos) << why;
    EXPECT_EQ(block_owners(etcd, kPrefix, pool).size(), 1u) << "no block past the cap";
}

TEST_F(ClusterSourceDecisions, AnUnreachableStoreIsCodeFiftyAndLaterAddsUseTheCacheWithoutAsking) {
    Node a(dir, "node-a");
    ipam::ClusterSource claimed(a.r, agent);
    claimed.prepare(target);
    std::string why;
    ASSERT_TRUE(*claimed.make_room(target, std::nullopt, &why)) << why;
    const auto cached = places_of(claimed, target);
    ASSERT_EQ(cached.size(), 1u);

    etcd.fail_calls(1000);
    ipam::ClusterSource add(a.r, agent);
    auto room = add.make_room(target, *engine::IpAddress::parse("10.80.0.200"), &why);
    ASSERT_FALSE(room);
    EXPECT_EQ(room.error().code, Code::kUnavailable) << room.error().msg;
    // A reboot: the reconciled marker (on tmpfs) is gone, so the next ADD would reconcile.
    ASSERT_EQ(::unlink(ipam::node_files(a.r).reconciled(pool).c_str()), 0);
    const int runs = agent.runs;
    ipam::ClusterSource after_reboot(a.r, agent);
    after_reboot.prepare(target);
    EXPECT_EQ(agent.runs, runs) << "etcd just found unreachable: not asked again by every ADD";
    EXPECT_EQ(places_of(after_reboot, target), cached) << "the cache serves meanwhile";
}

TEST_F(ClusterSourceDecisions, AFixedAddressFollowsItsPodToAnotherNode) {
    pools::IpSet sts(engine::Family::kV4);
    ASSERT_TRUE(sts.add_text("10.78.0.1-10.78.0.14"));
    const engine::Cidr sts_cidr = *engine::Cidr::parse("10.78.0.0/28");
    const std::string sts_pool = "sts";
    const ipam::PoolTarget t{sts_pool, sts_cidr, sts};
    engine::ClaimSpec claim;
    claim.key = "sts:shop/db-0/eth0";
    Node a(dir, "node-a"), b(dir, "node-b");
    ipam::ClusterSource on_a(a.r, agent);
    ASSERT_TRUE(on_a.fixed_across_nodes(sts_pool));
    auto first = on_a.take_fixed(t, claim, std::nullopt);
    ASSERT_TRUE(first) << first.error().msg;
    first->hold.reset();  // the local claim made: the pool lock goes
    ipam::ClusterSource on_b(b.r, agent);
    auto moved = on_b.take_fixed(t, claim, std::nullopt);
    ASSERT_TRUE(moved) << moved.error().msg;
    EXPECT_EQ(moved->address.to_string(), first->address.to_string())
        << "the pod keeps its address on the node it moved to";
    MemoryKv kv(etcd);
    auto held = cluster::FixedClaims(kv, kPrefix).all(sts_pool);
    ASSERT_TRUE(held && held->size() == 1);
    EXPECT_EQ(held->front().node, "node-b");
}

}  // namespace
}  // namespace shmipam::testing
