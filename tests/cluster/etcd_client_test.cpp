// The cluster store's client against a real 3-member etcd (tests/support/etcd_cluster.h):
// one winner per key among concurrent claimers, and what a killed follower, a killed leader and
// a lost quorum do to a call (each measured and printed; docs/cluster.md).
#include "cluster/etcd_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "cluster/cluster_identity.h"
#include "tests/support/kv_contract.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"
#include "tests/support/three_etcd_members.h"

namespace shmipam::cluster {
namespace {

using Clock = std::chrono::steady_clock;
using testing::EtcdCluster;

// The budget of a call the TLS and authentication tests expect an answer to, or a quick
// refusal: a TLS handshake, or etcd's bcrypt check of a password, on a loaded machine must not
// exhaust it. A refusal retried until the budget ran out would take all of it, so "at once"
// is asserted as under half of it.
constexpr uint64_t kAnswerBudgetMs = 10'000;

class Etcd : public testing::ThreeEtcdMembers {
  protected:
    EtcdConfig config() const {
        EtcdConfig c = client_config();
        c.attempt_timeout_ms = 1000;
        c.budget_ms = 5000;
        return c;
    }
    // The member that leads now (as the members say), or size() if none does.
    size_t leader() {
        std::map<uint64_t, size_t> member_of;
        uint64_t leader_id = 0;
        for (size_t i = 0; i < etcd->size(); ++i) {
            if (!etcd->running(i)) continue;
            EtcdConfig c = config();
            c.endpoints = {etcd->client_url(i)};
            EtcdClient one(c);
            auto s = one.status();
            if (!s) continue;
            member_of[s->member_id] = i;
            if (s->leader_id != 0) leader_id = s->leader_id;
        }
        auto it = member_of.find(leader_id);
        return it == member_of.end() ? etcd->size() : it->second;
    }
};

// The in-process tests of cluster logic run over tests/support/memory_kv.h, which answers these
// same assertions (tests/unit/memory_kv_test.cpp): here, that etcd does as they assume.
TEST_F(Etcd, AnswersAsTheInMemoryStoreOfTheUnitTestsDoes) {
    EtcdClient client(config());
    testing::expect_etcd_semantics(client, "/contract/");
}

TEST_F(Etcd, EveryMemberAnswersForOneCluster) {
    uint64_t cluster = 0;
    for (size_t i = 0; i < etcd->size(); ++i) {
        EtcdConfig c = config();
        c.endpoints = {etcd->client_url(i)};
        EtcdClient one(c);
        ASSERT_TRUE(one.put("/shmipam-test/k" + std::to_string(i), "v"));
        ASSERT_NE(one.last_header().cluster_id, 0u);
        if (cluster == 0) cluster = one.last_header().cluster_id;
        EXPECT_EQ(one.last_header().cluster_id, cluster);
    }
    EtcdClient client(config());
    auto all = client.get_prefix("/shmipam-test/");
    ASSERT_TRUE(all) << all.error().msg;
    EXPECT_EQ(all->size(), 3u);
}

TEST_F(Etcd, AnotherClusterIsToldApartByItsId) {
    EtcdCluster other(1);
    ASSERT_TRUE(other.ready()) << other.why_not_ready();
    EtcdClient a(config());
    EtcdConfig oc = config();
    oc.endpoints = other.client_urls();
    EtcdClient b(oc);
    ASSERT_TRUE(a.get("/x"));
    ASSERT_TRUE(b.get("/x"));
    EXPECT_NE(a.last_header().cluster_id, b.last_header().cluster_id);
    // A node that claimed in the first refuses the second, naming both and what to do.
    testing::TempDir node;
    const std::string dir = node.sub("_cluster");
    ASSERT_TRUE(check_cluster_id(dir, a.last_header().cluster_id));
    ASSERT_TRUE(check_cluster_id(dir, a.last_header().cluster_id)) << "the same cluster again";
    auto refused = check_cluster_id(dir, b.last_header().cluster_id);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, Code::kInvalidConfig);
    EXPECT_NE(refused.error().msg.find("refusing"), std::string::npos) << refused.error().msg;
    EXPECT_NE(refused.error().msg.find(dir + "/cluster-id"), std::string::npos);
}

// 8 claimers (one client each, as 8 nodes) race for the same 20 keys: each key is created once,
// and every loser reads the winner's value.
TEST_F(Etcd, CreateIfAbsentHasOneWinnerPerKeyAmongConcurrentClaimers) {
    constexpr int kNodes = 8, kKeys = 20;
    std::vector<std::map<int, CreateResult>> seen(kNodes);
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int n = 0; n < kNodes; ++n) {
        threads.emplace_back([&, n] {
            EtcdClient client(config());
            for (int k = 0; k < kKeys; ++k) {
                const int key = (k + n * 3) % kKeys;  // nodes start at different keys
                auto r = client.create_if_absent("/shmipam-test/blocks/" + std::to_string(key),
                                                 "node-" + std::to_string(n));
                if (!r) {
                    ++errors;
                    continue;
                }
                seen[n][key] = *r;
            }
        });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(errors.load(), 0);
    EtcdClient client(config());
    for (int k = 0; k < kKeys; ++k) {
        auto kv = client.get("/shmipam-test/blocks/" + std::to_string(k));
        ASSERT_TRUE(kv && *kv);
        int winners = 0;
        for (int n = 0; n < kNodes; ++n) {
            const CreateResult& r = seen[n].at(k);
            if (r.created) {
                ++winners;
                EXPECT_EQ((*kv)->value, "node-" + std::to_string(n));
            } else {
                ASSERT_TRUE(r.held);
                EXPECT_EQ(r.held->value, (*kv)->value);
            }
        }
        EXPECT_EQ(winners, 1) << "key " << k;
    }
}

TEST_F(Etcd, DeleteAtARevisionRefusesAKeyThatChangedSince) {
    EtcdClient client(config());
    auto c = client.create_if_absent("/shmipam-test/b", "node-a");
    ASSERT_TRUE(c && c->created);
    auto kv = client.get("/shmipam-test/b");
    ASSERT_TRUE(kv && *kv);
    ASSERT_TRUE(client.put("/shmipam-test/b", "node-b"));
    auto stale = client.delete_at("/shmipam-test/b", (*kv)->mod_revision);
    ASSERT_TRUE(stale);
    EXPECT_FALSE(*stale);
    auto now = client.get("/shmipam-test/b");
    auto fresh = client.delete_at("/shmipam-test/b", (*now)->mod_revision);
    ASSERT_TRUE(fresh);
    EXPECT_TRUE(*fresh);
    EXPECT_FALSE(*client.get("/shmipam-test/b"));
}

// Claims go on while a member is killed, the leader or a follower: every call succeeds within
// the budget, and the longest stall is printed (docs/cluster.md: the per-attempt timeout, not
// the election, sets it).
class EtcdMemberKilled : public Etcd, public ::testing::WithParamInterface<bool> {};

TEST_P(EtcdMemberKilled, EveryCallSucceedsWithinTheBudget) {
    const bool kill_leader = GetParam();
    const size_t lead = leader();
    ASSERT_LT(lead, etcd->size()) << "no leader";
    const size_t victim = kill_leader ? lead : (lead + 1) % etcd->size();
    EtcdClient client(config());
    std::chrono::milliseconds longest{0};
    for (int i = 0; i < 60; ++i) {
        if (i == 10) etcd->kill(victim);
        const auto t0 = Clock::now();
        auto r = client.create_if_absent("/shmipam-test/storm/" + std::to_string(i), "node-a");
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
        ASSERT_TRUE(r) << "call " << i << ": " << r.error().msg << " " << r.error().details;
        EXPECT_TRUE(r->created);
        longest = std::max(longest, took);
        EXPECT_LE(took.count(), int64_t(config().budget_ms)) << "call " << i;
    }
    std::printf("[ etcd     ] %s killed: longest call %lld ms (attempt timeout 1000 ms)\n",
                kill_leader ? "leader" : "follower", static_cast<long long>(longest.count()));
    ASSERT_TRUE(etcd->start(victim));
    auto back = client.get_prefix("/shmipam-test/storm/");
    ASSERT_TRUE(back);
    EXPECT_EQ(back->size(), 60u);
}

INSTANTIATE_TEST_SUITE_P(LeaderOrFollower, EtcdMemberKilled, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Leader" : "Follower"; });

// Two of three members gone: a call fails with "etcd unavailable" within its budget; with one
// back, calls succeed again.
TEST_F(Etcd, WithoutAQuorumACallFailsWithinItsBudgetAndRecovers) {
    EtcdClient client(config());
    ASSERT_TRUE(client.put("/shmipam-test/q", "1"));
    etcd->kill(0);
    etcd->kill(1);
    EtcdConfig c = config();
    c.budget_ms = 3000;
    EtcdClient hurried(c);
    const auto t0 = Clock::now();
    auto r = hurried.create_if_absent("/shmipam-test/q2", "node-a");
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kUnavailable);
    EXPECT_NE(r.error().msg.find("etcd unavailable"), std::string::npos) << r.error().msg;
    EXPECT_LE(took.count(), 3000 + 1000) << "the budget, plus one attempt's slack";
    std::printf("[ etcd     ] no quorum: failed after %lld ms (budget 3000 ms)\n",
                static_cast<long long>(took.count()));
    ASSERT_TRUE(etcd->start(0));
    auto again = client.create_if_absent("/shmipam-test/q2", "node-a");
    ASSERT_TRUE(again) << again.error().msg;
    EXPECT_TRUE(again->created);
}

// etcd with TLS and client-certificate authentication, as a cluster's etcd is run.
class EtcdTls : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ETCD();
        etcd = std::make_unique<EtcdCluster>(1, /*tls=*/true);
        ASSERT_TRUE(etcd->ready()) << etcd->why_not_ready();
    }
    EtcdConfig config() const {
        EtcdConfig c;
        c.endpoints = etcd->client_urls();
        c.ca_file = etcd->ca_file();
        c.cert_file = etcd->client_cert();
        c.key_file = etcd->client_key();
        c.budget_ms = kAnswerBudgetMs;
        return c;
    }
    std::unique_ptr<EtcdCluster> etcd;
};

TEST_F(EtcdTls, AClientWithItsCertificateIsServed) {
    EXPECT_EQ(etcd->client_url(0).rfind("https://", 0), 0u);
    EtcdClient client(config());
    auto r = client.create_if_absent("/shmipam-test/tls", "node-a");
    ASSERT_TRUE(r) << r.error().msg << " " << r.error().details;
    EXPECT_TRUE(r->created);
}

TEST_F(EtcdTls, AWrongCaFailsAtOnceAndSaysTls) {
    EtcdConfig c = config();
    c.ca_file = etcd->other_ca_file();
    EtcdClient client(c);
    const auto t0 = Clock::now();
    auto r = client.get("/shmipam-test/tls");
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kUnavailable);
    EXPECT_NE(r.error().msg.find("TLS"), std::string::npos) << r.error().msg;
    EXPECT_LT(took.count(), int64_t(c.budget_ms / 2)) << "not retried for the whole budget";
}

TEST_F(EtcdTls, AClientWithoutACertificateIsRefused) {
    EtcdConfig c = config();
    c.cert_file.clear();
    c.key_file.clear();
    c.budget_ms = 1500;
    EtcdClient client(c);
    auto r = client.get("/shmipam-test/tls");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kUnavailable) << r.error().msg;
}

// etcd's own authentication (ipam.etcd.username / password): a member with auth enabled (by
// etcdctl, as an operator does) and simple tokens that expire after a second.
class EtcdAuth : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ETCD();
        if (::access("/usr/bin/etcdctl", X_OK) != 0) {
            if (std::getenv("CI") != nullptr) FAIL() << "etcdctl is not installed";
            GTEST_SKIP() << "etcdctl is not installed (scripts/install-deps.sh installs it)";
        }
        etcd =
            std::make_unique<EtcdCluster>(1, false, std::vector<std::string>{"--auth-token-ttl=1"});
        ASSERT_TRUE(etcd->ready()) << etcd->why_not_ready();
        for (const std::vector<std::string>& cmd :
             {std::vector<std::string>{"user", "add", "root:rootpw"},
              {"role", "add", "root"},
              {"user", "grant-role", "root", "root"},
              {"user", "add", "node:nodepw"},
              {"role", "add", "shmipam"},
              {"role", "grant-permission", "shmipam", "--prefix=true", "readwrite", "/shmipam/"},
              {"user", "grant-role", "node", "shmipam"},
              {"auth", "enable"}}) {
            std::vector<std::string> argv{"/usr/bin/etcdctl", "--endpoints=" + etcd->client_url(0)};
            argv.insert(argv.end(), cmd.begin(), cmd.end());
            auto r = testing::run_process(argv, {{"ETCDCTL_API", "3"}}, "");
            ASSERT_EQ(r.exit_code, 0) << cmd[0] << " " << cmd[1] << ": " << r.out << r.err;
        }
    }
    EtcdConfig config(const std::string& user, const std::string& password) const {
        EtcdConfig c;
        c.endpoints = etcd->client_urls();
        c.username = user;
        c.password = password;
        c.budget_ms = kAnswerBudgetMs;
        return c;
    }
    std::unique_ptr<EtcdCluster> etcd;
};

TEST_F(EtcdAuth, AUserWithAPasswordIsServedAndATokenThatExpiredIsRenewed) {
    EtcdClient client(config("node", "nodepw"));
    auto r = client.create_if_absent("/shmipam/v1/auth-test", "node-a");
    ASSERT_TRUE(r) << r.error().msg << " " << r.error().details;
    EXPECT_TRUE(r->created);
    // The simple token lives a second: the next call gets 401 and authenticates again.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    auto again = client.get("/shmipam/v1/auth-test");
    ASSERT_TRUE(again) << again.error().msg << " " << again.error().details;
    ASSERT_TRUE(*again);
    EXPECT_EQ((*again)->value, "node-a");
}

TEST_F(EtcdAuth, AWrongPasswordOrNoUserFailsClearlyAndAtOnce) {
    EtcdClient wrong(config("node", "not-the-password"));
    const auto t0 = Clock::now();
    auto r = wrong.get("/shmipam/v1/auth-test");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().msg.find("cannot authenticate as node"), std::string::npos)
        << r.error().msg;
    EXPECT_NE(r.error().msg.find("invalid user ID or password"), std::string::npos)
        << r.error().msg;
    EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(),
              int64_t(kAnswerBudgetMs / 2))
        << "not retried for the whole budget";
    EtcdClient anonymous(config("", ""));
    auto a = anonymous.get("/shmipam/v1/auth-test");
    ASSERT_FALSE(a);
    EXPECT_NE(a.error().msg.find("user name is empty"), std::string::npos) << a.error().msg;
    // Outside the prefix the role grants: refused, not retried.
    EtcdClient node(config("node", "nodepw"));
    auto outside = node.get("/elsewhere");
    ASSERT_FALSE(outside);
    EXPECT_NE(outside.error().msg.find("permission denied"), std::string::npos)
        << outside.error().msg;
}

}  // namespace
}  // namespace shmipam::cluster
