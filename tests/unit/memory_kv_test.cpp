// The in-memory store the cluster logic's unit tests run over answers as etcd does: the same
// assertions tests/cluster/etcd_client_test.cpp runs against a real etcd, and the test hooks.
#include "tests/support/memory_kv.h"

#include <gtest/gtest.h>

#include "tests/support/kv_contract.h"

namespace shmipam::testing {
namespace {

TEST(MemoryKv, AnswersAsTheRealEtcdOfTheClusterTestsDoes) {
    MemoryEtcd etcd;
    MemoryKv kv(etcd);
    expect_etcd_semantics(kv, "/contract/");
}

TEST(MemoryKv, EachClientRemembersItsOwnHighestRevisionAndARestoreGoesBack) {
    MemoryEtcd etcd;
    MemoryKv a(etcd), b(etcd);
    const MemoryEtcd::State before = etcd.state();
    ASSERT_TRUE(a.put("/k", "1"));
    ASSERT_TRUE(a.put("/k", "2"));
    EXPECT_EQ(a.highest_revision(), etcd.revision());
    EXPECT_EQ(b.highest_revision(), 0) << "b has had no answer yet";
    etcd.restore(before);
    auto k = b.get("/k");
    ASSERT_TRUE(k);
    EXPECT_FALSE(*k) << "the restored store lacks what came after";
    EXPECT_LT(b.last_header().revision, a.highest_revision());
}

TEST(MemoryKv, APlantedFailureAnswersCodeFiftyAndTheHookRunsBetweenCalls) {
    MemoryEtcd etcd;
    MemoryKv kv(etcd), other(etcd);
    etcd.fail_calls(1);
    auto failed = kv.put("/k", "1");
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code, Code::kUnavailable);
    // The other actor's write lands between this one's read and its create.
    int hooked = 0;
    etcd.before_call = [&](const std::string& call, const std::string& key) {
        if (call == "create_if_absent" && key == "/k" && hooked++ == 0) {
            ASSERT_TRUE(other.put("/k", "theirs"));
        }
    };
    auto read = kv.get("/k");
    ASSERT_TRUE(read);
    EXPECT_FALSE(*read);
    auto made = kv.create_if_absent("/k", "mine");
    ASSERT_TRUE(made);
    EXPECT_FALSE(made->created);
    EXPECT_EQ(made->held->value, "theirs");
    EXPECT_EQ(hooked, 1) << "the hook is not re-entered by the other actor's own call";
}

}  // namespace
}  // namespace shmipam::testing
