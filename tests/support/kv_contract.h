// What cluster mode relies on of its store (cluster/kv_store.h), as assertions one test runs
// against a real etcd (tests/cluster/etcd_client_test.cpp) and another against the in-memory
// store (tests/unit/memory_kv_test.cpp): the in-process tests of cluster logic prove something
// only while the stand-in answers as etcd does. Revisions are compared with each other, never
// with numbers: a real store's counter starts wherever earlier tests left it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/kv_store.h"

namespace shmipam::testing {

// `p`: a prefix no other test writes under (ending in '/').
inline void expect_etcd_semantics(cluster::KvStore& kv, const std::string& p) {
    using Target = cluster::KvStore::Compare::Target;
    // A put raises the store's revision; a key keeps its create revision and version counts.
    auto first = kv.put(p + "a", "1");
    ASSERT_TRUE(first);
    auto second = kv.put(p + "a", "2");
    ASSERT_TRUE(second);
    EXPECT_GT(*second, *first);
    auto a = kv.get(p + "a");
    ASSERT_TRUE(a && *a);
    EXPECT_EQ((*a)->value, "2");
    EXPECT_EQ((*a)->create_revision, *first);
    EXPECT_EQ((*a)->mod_revision, *second);
    EXPECT_EQ((*a)->version, 2);
    EXPECT_EQ(kv.last_header().revision, *second) << "a read answers at the store's revision";
    EXPECT_GE(kv.highest_revision(), *second);
    EXPECT_NE(kv.last_header().cluster_id, 0u);

    // create_if_absent: one winner; a loser reads the holder; our own value again is ours (an
    // attempt retried after its commit).
    auto won = kv.create_if_absent(p + "b", "mine");
    ASSERT_TRUE(won);
    EXPECT_TRUE(won->created);
    EXPECT_GT(won->revision, *second);
    auto lost = kv.create_if_absent(p + "b", "theirs");
    ASSERT_TRUE(lost);
    EXPECT_FALSE(lost->created);
    ASSERT_TRUE(lost->held);
    EXPECT_EQ(lost->held->value, "mine");
    auto again = kv.create_if_absent(p + "b", "mine");
    ASSERT_TRUE(again);
    EXPECT_TRUE(again->created);
    EXPECT_EQ(again->revision, won->revision);

    // delete_at: only at the revision read.
    auto stale = kv.delete_at(p + "b", won->revision - 1);
    ASSERT_TRUE(stale);
    EXPECT_FALSE(*stale);
    auto kept = kv.get(p + "b");
    ASSERT_TRUE(kept);
    EXPECT_TRUE(*kept);
    auto deleted = kv.delete_at(p + "b", won->revision);
    ASSERT_TRUE(deleted);
    EXPECT_TRUE(*deleted);
    auto gone = kv.get(p + "b");
    ASSERT_TRUE(gone);
    EXPECT_FALSE(*gone);
    auto twice = kv.delete_at(p + "b", won->revision);
    ASSERT_TRUE(twice);
    EXPECT_FALSE(*twice);

    // A prefix in key order; a key that merely starts alike is not under it.
    ASSERT_TRUE(kv.put(p + "c/2", "x"));
    ASSERT_TRUE(kv.put(p + "c/1", "x"));
    ASSERT_TRUE(kv.put(p + "cx", "x"));
    auto listed = kv.get_prefix(p + "c/");
    ASSERT_TRUE(listed);
    std::vector<std::string> keys;
    for (const auto& kv_read : *listed) keys.push_back(kv_read.key);
    EXPECT_EQ(keys, (std::vector<std::string>{p + "c/1", p + "c/2"}));
    auto any = kv.any_under(p + "c/");
    ASSERT_TRUE(any);
    EXPECT_TRUE(*any);
    auto none = kv.any_under(p + "d/");
    ASSERT_TRUE(none);
    EXPECT_FALSE(*none);

    // A transaction: all its writes or none of them.
    auto refused = kv.txn({{p + "a", Target::kMod, *second}, {p + "c/1", Target::kCreate, 0}},
                          {{p + "e", std::string("x")}});
    ASSERT_TRUE(refused);
    EXPECT_FALSE(*refused) << "one compare failed";
    auto e = kv.get(p + "e");
    ASSERT_TRUE(e);
    EXPECT_FALSE(*e) << "nothing of a refused transaction is written";
    // A compare over a prefix with no key under it holds ("nothing there"); every write of one
    // transaction shares one revision.
    auto applied =
        kv.txn({{p + "none/", Target::kCreate, 0, true}, {p + "a", Target::kMod, *second}},
               {{p + "e", std::string("x")}, {p + "f", std::string("y")}});
    ASSERT_TRUE(applied);
    EXPECT_TRUE(*applied);
    auto ef = kv.get_prefix(p + "e");
    auto f = kv.get(p + "f");
    ASSERT_TRUE(ef && f && *f);
    ASSERT_EQ(ef->size(), 1u);
    EXPECT_EQ(ef->front().mod_revision, (*f)->mod_revision);
    // Over a prefix with keys, it holds only when every key does.
    auto some = kv.txn({{p + "c/", Target::kCreate, 0, true}}, {{p + "g", std::string("x")}});
    ASSERT_TRUE(some);
    EXPECT_FALSE(*some);
    // A delete of a whole prefix leaves a key that merely starts alike.
    auto cleared = kv.txn({}, {{p + "c/", std::nullopt, true}});
    ASSERT_TRUE(cleared);
    EXPECT_TRUE(*cleared);
    auto after = kv.get_prefix(p + "c");
    ASSERT_TRUE(after);
    ASSERT_EQ(after->size(), 1u);
    EXPECT_EQ(after->front().key, p + "cx");
}

}  // namespace shmipam::testing
