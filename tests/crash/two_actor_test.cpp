// Two actors, one interleaving each, driven deterministically: the first actor's operation runs
// until a chosen fault point, where the second actor's whole operation happens (in the same
// process, through faults::set_actor), then the first goes on. Each test is a race the kill
// storms cannot be relied on to hit, named after what went wrong (docs/testing.md).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "base/clock.h"
#include "base/fault_point.h"
#include "engine/recovery/recovery.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_compaction.h"
#include "shm/atomic_word.h"
#include "tests/support/at_point.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using testing::AtPoint;

class TwoActors : public ::testing::TestWithParam<const char*> {
  protected:
    void SetUp() override {
        cfg = testing::network_config(dir, {testing::range_set({{"10.70.0.0/24", "", "", ""}})});
    }
    // The state as the next invocation sees it: the run directory lost, rebuilt from the journal.
    std::unique_ptr<NetworkStore> rebuilt() {
        std::filesystem::remove_all(cfg.state_dir());
        return testing::open_store(cfg);
    }
    static std::optional<std::string> held(NetworkStore& s, const NetworkConfig& cfg,
                                           const std::string& cid) {
        Allocator a(s, cfg);
        auto got = a.addresses_of({cid, "eth0"});
        if (!got || got->empty()) return std::nullopt;
        return got->at(0).address.to_string();
    }

    testing::TempDir dir;
    NetworkConfig cfg;
};

// Found black-box after the review: ADD w has claimed an address on the index (and, at the
// later points, reserved or even written its record) when `rm -rf <runDir>/<network>` happens;
// ADD b rebuilds the state and gets the same address; w then answered it too, since nothing had
// flagged its index retired. The commit point now notices that its index is no longer the one
// the name points to, and answers 11; the runtime's retry finds the new state.
TEST_P(TwoActors, ARunDirectoryRemovedUnderAnAddNeverGivesItsAddressTwice) {
    auto first = testing::open_store(cfg);
    ASSERT_NE(first, nullptr);
    Allocator w_alloc(*first, cfg);
    ASSERT_EQ(testing::first_address(w_alloc.add(testing::add_request("a"))), "10.70.0.2");
    std::optional<std::string> b_address;
    std::unique_ptr<NetworkStore> second;
    Expected<AddOutcome> w = make_error(Code::kInternal, "not run");
    {
        AtPoint at(GetParam(), [&] {
            second = rebuilt();
            ASSERT_NE(second, nullptr);
            Allocator b_alloc(*second, cfg);
            auto b = b_alloc.add(testing::add_request("b"));
            ASSERT_TRUE(b) << b.error().msg;
            b_address = b->addresses[0].address.to_string();
        });
        w = w_alloc.add(testing::add_request("w"));
        ASSERT_TRUE(at.reached()) << "the ADD never reached " << GetParam();
    }
    ASSERT_TRUE(b_address);
    ASSERT_FALSE(w) << "w answered " << w->addresses[0].address.to_string() << " beside b's "
                    << *b_address;
    EXPECT_EQ(w.error().code, Code::kTryAgainLater) << w.error().msg;
    EXPECT_EQ(held(*second, cfg, "b"), b_address);
    testing::expect_verify_clean(*second);
    // Lost and rebuilt once more: w's late records never displace b.
    first.reset();
    second.reset();
    auto third = rebuilt();
    ASSERT_NE(third, nullptr);
    EXPECT_EQ(held(*third, cfg, "b"), b_address);
    const auto w_now = held(*third, cfg, "w");
    if (w_now) EXPECT_NE(w_now, b_address);
    EXPECT_EQ(held(*third, cfg, "a"), "10.70.0.2");
    testing::expect_verify_clean(*third);
}

INSTANTIATE_TEST_SUITE_P(AtEveryStepBeforeTheCommit, TwoActors,
                         ::testing::Values("add.after_slot_claim", "journal.after_reserve",
                                           "add.before_superseded_check"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n) {
                                 if (c == '.') c = '_';
                             }
                             return n;
                         });

// The DEL side of the same race: a DEL journaled its RELEASE on an index whose run directory
// was removed and rebuilt meanwhile (the rebuild kept the attachment: the record came too late
// for it). It answered success, and the new state held the address for a sandbox the runtime
// had forgotten. It now answers 11, and the retry releases it in the new state.
TEST(TwoActorsDel, ADelOnARemovedRunDirectoryIsRetriedNotLost) {
    testing::TempDir dir;
    const NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.71.0.0/24", "", "", ""}})});
    auto first = testing::open_store(cfg);
    ASSERT_NE(first, nullptr);
    Allocator del_alloc(*first, cfg);
    ASSERT_TRUE(del_alloc.add(testing::add_request("a")));
    std::unique_ptr<NetworkStore> second;
    Status del = Ok{};
    {
        AtPoint at("del.after_entry_release", [&] {
            std::filesystem::remove_all(cfg.state_dir());
            second = testing::open_store(cfg);
        });
        del = del_alloc.del({"a", "eth0"});
        ASSERT_TRUE(at.reached());
    }
    ASSERT_NE(second, nullptr);
    Allocator retry(*second, cfg);
    ASSERT_TRUE(retry.addresses_of({"a", "eth0"})) << "the rebuild did not keep a";
    ASSERT_FALSE(del) << "the DEL answered success while the new state still holds a";
    EXPECT_EQ(del.error().code, Code::kTryAgainLater);
    ASSERT_TRUE(retry.del({"a", "eth0"}));
    auto gone = retry.addresses_of({"a", "eth0"});
    EXPECT_TRUE(!gone || gone->empty());
    testing::expect_verify_clean(*second);
}

// Two healers of one dead lease (the crash table's healer rows, with a second healer at each
// step of the first): a victim dies at `victim_point` (a real process, killed there by its fault
// point); healer 1 reaps it and, at `healer_point`, healer 2 (its own mapping) reaps the same
// lease whole. Then healer 1 goes on over work already done. Every step is a CAS from the word
// it judged, so the two agree: nothing leaks, nothing is freed twice, verify is clean.
struct HealerRace {
    const char* victim_op;  // "add" or "del"
    const char* victim_point;
    const char* healer_point;
};

class TwoHealers : public ::testing::TestWithParam<HealerRace> {
  protected:
    void SetUp() override {
        cfg = testing::network_config(dir, {testing::range_set({{"10.72.0.0/28", "", "", ""}})});
    }
    // The victim in a child process, which dies at its point (its lease's lock goes with it).
    void victim_dies() {
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            auto s = open_network(cfg, shm::current_process());
            if (!s) ::_exit(1);
            Allocator a(**s, cfg);
            const bool del = std::string(GetParam().victim_op) == "del";
            if (del && !a.add(testing::add_request("victim"))) ::_exit(1);
            faults::arm(GetParam().victim_point, faults::Mode::kExit, 0);
            if (del) {
                (void)a.del({"victim", "eth0"});
            } else {
                (void)a.add(testing::add_request("victim"));
            }
            ::_exit(2);  // never reached its point
        }
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        ASSERT_EQ(WEXITSTATUS(status), faults::kFaultExitCode) << "the victim did not die there";
    }

    testing::TempDir dir;
    NetworkConfig cfg;
};

TEST_P(TwoHealers, TwoHealersOfOneDeadLeaseAgree) {
    victim_dies();
    auto first = testing::open_store(cfg);
    auto second = testing::open_store(cfg);
    ASSERT_TRUE(first && second);
    {
        AtPoint at(GetParam().healer_point, [&] { reap_dead_leases(*second); });
        EXPECT_EQ(reap_dead_leases(*first), 1u);
        EXPECT_TRUE(at.reached()) << "healer 1 never reached " << GetParam().healer_point;
    }
    auto third = testing::open_store(cfg);
    ASSERT_NE(third, nullptr);
    EXPECT_EQ(reap_dead_leases(*third), 0u) << "a lease is still held by the dead victim";
    testing::expect_verify_clean(*third);
    Allocator a(*third, cfg);
    auto held = a.addresses_of({"victim", "eth0"});
    EXPECT_TRUE(!held || held->empty()) << "the victim's work was not undone or completed";
    // Not one address leaked: the /28 gives exactly its 13 usable addresses (.1 is the gateway).
    std::set<std::string> got;
    for (int i = 0; i < 20; ++i) {
        auto r = a.add(testing::add_request("fill" + std::to_string(i)));
        if (!r) break;
        got.insert(r->addresses[0].address.to_string());
    }
    EXPECT_EQ(got.size(), 13u);
    testing::expect_verify_clean(*third);
}

INSTANTIATE_TEST_SUITE_P(
    AtEveryHealingStep, TwoHealers,
    ::testing::Values(HealerRace{"add", "add.after_publish", "heal.after_retire"},
                      HealerRace{"add", "add.after_publish", "heal.after_slot_rollback"},
                      HealerRace{"add", "add.after_publish", "reap.before_free"},
                      HealerRace{"add", "add.after_slot_claim", "heal.after_retire"},
                      HealerRace{"del", "del.after_entry_release", "del.after_slot_releasing"},
                      HealerRace{"del", "del.after_entry_release", "del.after_slot_cooling"},
                      HealerRace{"del", "del.after_entry_release", "del.after_release"},
                      HealerRace{"del", "del.after_slot_releasing", "reap.before_free"}),
    [](const auto& info) {
        std::string n = std::string(info.param.victim_point) + "_" + info.param.healer_point;
        for (char& c : n) {
            if (c == '.') c = '_';
        }
        return n;
    });

// The ADD rows of the crash table with a live second actor instead of a crash: at each step of
// an ADD, the runtime's DEL of the same attachment (a timeout, a retried sandbox) runs whole.
// Whatever each answers, they must agree: a DEL never answers success while the attachment it
// was asked to delete goes on to hold an address (a leak the runtime never learns of), and an
// ADD never answers an address it does not hold.
class AddMeetsDel : public ::testing::TestWithParam<const char*> {};

TEST_P(AddMeetsDel, ADelDuringAnAddOfTheSameAttachmentNeverLeaksNorLies) {
    testing::TempDir dir;
    const NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.73.0.0/28", "", "", ""}}),
                                      testing::range_set({{"fd73::/124", "", "", ""}})});
    auto adder = testing::open_store(cfg);
    auto deleter = testing::open_store(cfg);
    ASSERT_TRUE(adder && deleter);
    Allocator add_alloc(*adder, cfg);
    std::optional<Status> del;
    Expected<AddOutcome> add = make_error(Code::kInternal, "not run");
    {
        AtPoint at(GetParam(), [&] {
            Allocator del_alloc(*deleter, cfg);
            del = del_alloc.del({"x", "eth0"});
        });
        add = add_alloc.add(testing::add_request("x"));
        ASSERT_TRUE(at.reached()) << "the ADD never reached " << GetParam();
    }
    ASSERT_TRUE(del.has_value());
    if (!*del) EXPECT_EQ(del->error().code, Code::kTryAgainLater) << del->error().msg;
    if (!add) EXPECT_EQ(add.error().code, Code::kTryAgainLater) << add.error().msg;
    auto observer = testing::open_store(cfg);
    Allocator look(*observer, cfg);
    auto held = look.addresses_of({"x", "eth0"});
    const bool holds = held && !held->empty();
    // The DEL answered success after the ADD had claimed the attachment's entry: from then on
    // it is the later of the two, and nothing may be left.
    const bool del_after_claim = std::string(GetParam()) != "lease.after_cas";
    if (*del && del_after_claim) EXPECT_FALSE(holds) << "the DEL answered success, x still holds";
    if (add && holds) {
        EXPECT_EQ(held->at(0).address, add->addresses[0].address) << "the ADD answered another";
    }
    if (!add) EXPECT_FALSE(holds) << "the ADD failed, yet x holds an address";
    testing::expect_verify_clean(*observer);
}

INSTANTIATE_TEST_SUITE_P(AtEveryAddStep, AddMeetsDel,
                         ::testing::Values("lease.after_cas", "add.after_entry_claim",
                                           "add.after_fingerprint", "add.before_slot_claim",
                                           "add.after_slot_claim", "add.before_superseded_check",
                                           "add.after_publish", "add.before_commit",
                                           "add.after_commit"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n) {
                                 if (c == '.') c = '_';
                             }
                             return n;
                         });

// The DEL rows with a live second actor: at each step of a DEL of x, the runtime's retried ADD
// of x, or a GC that keeps nothing, runs whole. The DEL always completes, nothing of x is left,
// an ADD that answered did so before the release (x's own address), and verify is clean.
struct DelRace {
    const char* del_point;
    const char* second;  // "add" or "gc"
};

class DelMeetsSecondActor : public ::testing::TestWithParam<DelRace> {};

TEST_P(DelMeetsSecondActor, ADelAlwaysCompletesWhateverRunsBesideIt) {
    testing::TempDir dir;
    const NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.74.0.0/28", "", "", ""}}),
                                      testing::range_set({{"fd74::/124", "", "", ""}})});
    auto deleter = testing::open_store(cfg);
    auto other = testing::open_store(cfg);
    ASSERT_TRUE(deleter && other);
    Allocator del_alloc(*deleter, cfg);
    auto x = del_alloc.add(testing::add_request("x"));
    ASSERT_TRUE(x) << x.error().msg;
    const bool second_is_add = std::string(GetParam().second) == "add";
    Expected<AddOutcome> add = make_error(Code::kInternal, "not run");
    Expected<GcOutcome> gc = make_error(Code::kInternal, "not run");
    Status del = Ok{};
    {
        AtPoint at(GetParam().del_point, [&] {
            Allocator a(*other, cfg);
            if (second_is_add) {
                add = a.add(testing::add_request("x"));
            } else {
                gc = a.gc({});
            }
        });
        del = del_alloc.del({"x", "eth0"});
        ASSERT_TRUE(at.reached()) << "the DEL never reached " << GetParam().del_point;
    }
    EXPECT_TRUE(del) << del.error().msg;
    if (second_is_add) {
        if (add) {
            EXPECT_TRUE(add->existing) << "a new attachment beside the one being deleted";
            EXPECT_EQ(add->addresses[0].address, x->addresses[0].address);
        } else {
            EXPECT_EQ(add.error().code, Code::kTryAgainLater) << add.error().msg;
        }
    } else {
        EXPECT_TRUE(gc) << gc.error().msg;
    }
    auto observer = testing::open_store(cfg);
    Allocator look(*observer, cfg);
    auto held = look.addresses_of({"x", "eth0"});
    EXPECT_TRUE(!held || held->empty()) << "x still holds an address after its DEL answered";
    testing::expect_verify_clean(*observer);
}

INSTANTIATE_TEST_SUITE_P(
    AtEveryDelStep, DelMeetsSecondActor,
    ::testing::Values(DelRace{"del.after_target", "add"}, DelRace{"del.after_entry_release", "add"},
                      DelRace{"del.after_slot_releasing", "add"},
                      DelRace{"del.after_slot_cooling", "add"}, DelRace{"del.after_release", "add"},
                      DelRace{"del.after_target", "gc"}, DelRace{"del.after_entry_release", "gc"},
                      DelRace{"del.after_slot_releasing", "gc"},
                      DelRace{"del.after_slot_cooling", "gc"}, DelRace{"del.after_release", "gc"}),
    [](const auto& info) {
        std::string n = std::string(info.param.del_point) + "_" + info.param.second;
        for (char& c : n) {
            if (c == '.') c = '_';
        }
        return n;
    });

// The compaction and index-building rows with a live second actor. A compactor paused after
// choosing its boundary, or after publishing its checkpoint, while another invocation ADDs and
// DELs: a rebuild afterwards holds exactly the live attachments. A creator paused before
// publishing its index (holding the directory's lock) while a second first invocation arrives:
// the second waits, answers 11, and never builds a second index beside it.
class CompactionMeetsAppender : public ::testing::TestWithParam<const char*> {};

TEST_P(CompactionMeetsAppender, NothingAnAppenderWroteIsCompactedAway) {
    testing::TempDir dir;
    NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.75.0.0/22", "", "", ""}})});
    cfg.durability = NetworkConfig::Durability::kNone;
    cfg.journal_max_segments = 1;
    auto compactor = testing::open_store(cfg);
    auto appender = testing::open_store(cfg);
    ASSERT_TRUE(compactor && appender);
    Allocator a(*appender, cfg);
    // Fill two segments with churn, keeping a few attachments.
    for (int i = 0; a.add(testing::add_request("keep0")) && i < 1; ++i) {
    }
    for (int i = 0; shm::load_word(appender->index().header().journal_tail) <
                    3 * format::kJournalRecordsPerSegment;
         ++i) {
        const std::string id = "churn" + std::to_string(i);
        ASSERT_TRUE(a.add(testing::add_request(id)));
        ASSERT_TRUE(a.del({id, "eth0"}));
    }
    std::vector<std::string> live{"keep0"};
    {
        AtPoint at(GetParam(), [&] {
            for (int i = 1; i <= 5; ++i) {
                const std::string id = "keep" + std::to_string(i);
                ASSERT_TRUE(a.add(testing::add_request(id)));
                live.push_back(id);
            }
            ASSERT_TRUE(a.del({"keep0", "eth0"}));
            live.erase(live.begin());
        });
        auto done = compact_journal(*compactor, 1);
        ASSERT_TRUE(done) << done.error().msg;
        ASSERT_TRUE(at.reached()) << "the compactor never reached " << GetParam();
    }
    compactor.reset();
    appender.reset();
    std::filesystem::remove_all(cfg.state_dir());
    auto rebuilt = testing::open_store(cfg);
    ASSERT_NE(rebuilt, nullptr);
    Allocator look(*rebuilt, cfg);
    for (const auto& id : live) {
        auto held = look.addresses_of({id, "eth0"});
        EXPECT_TRUE(held && !held->empty()) << id << " was compacted away";
    }
    auto gone = look.addresses_of({"keep0", "eth0"});
    EXPECT_TRUE(!gone || gone->empty()) << "keep0's release was compacted away";
    testing::expect_verify_clean(*rebuilt);
}

INSTANTIATE_TEST_SUITE_P(AtEveryCompactionStep, CompactionMeetsAppender,
                         ::testing::Values("compact.after_boundary", "checkpoint.after_publish"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n) {
                                 if (c == '.') c = '_';
                             }
                             return n;
                         });

// The wait is one bound for the whole open: a first version waited 10 s per attempt, 40 s in all.
TEST(CreatorMeetsCreator, ASecondFirstInvocationWaitsForTheIndexBeingBuiltWithinOneBound) {
    testing::TempDir dir;
    const NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.76.0.0/28", "", "", ""}})});
    std::optional<Expected<std::unique_ptr<NetworkStore>>> second;
    std::unique_ptr<NetworkStore> first;
    uint64_t waited_ms = 0;
    {
        // The creator's index file is built aside and about to be linked, lock held.
        bool armed = false;
        AtPoint at("create.before_publish", [&] {
            if (armed) return;
            armed = true;
            const uint64_t start = base::boot_ns();
            second = open_network(cfg, shm::current_process());
            waited_ms = (base::boot_ns() - start) / 1'000'000;
        });
        auto opened = open_network(cfg, shm::current_process());
        ASSERT_TRUE(opened) << opened.error().msg;
        first = std::move(*opened);
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(second.has_value());
    ASSERT_FALSE(*second) << "a second index was built while the first was being published";
    EXPECT_EQ(second->error().code, Code::kTryAgainLater) << second->error().msg;
    EXPECT_LT(waited_ms, 8000u) << "the wait for the creator is bounded by 5 s in all";
    EXPECT_TRUE(first->creation().created);
    auto later = testing::open_store(cfg);
    ASSERT_NE(later, nullptr);
    EXPECT_FALSE(later->creation().created);
    EXPECT_EQ(later->index().header().epoch, first->index().header().epoch);
    testing::expect_verify_clean(*later);
}

// A slot healer (an ADD's scan, a sweep) reads a slot CLAIMING by an ADD in flight and judges
// the holder only once that ADD has published, committed and freed its lease: a free lease
// looks like a holder gone. Journaled from the word read before, its ROLLBACK carried the
// generation of the ADD's allocation and, newer in the journal, displaced it: a rebuild would
// have lost the address (verify: unjournaled-allocation), and given it to a second pod. Seen in
// the cluster storm, where a node's ADDs fill a block together. The healer now reads the slot
// again after its judgement and leaves a slot that moved on.
TEST(SlotHealer, AHolderJudgedAfterItFinishedIsNotRolledBackFromTheWordReadBefore) {
    testing::TempDir dir;
    const NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.74.0.0/28", "", "", ""}})});
    auto store = testing::open_store(cfg);
    ASSERT_NE(store, nullptr);
    Allocator alloc(*store, cfg);
    struct Seen {
        shm::BlockFile* block = nullptr;
        uint64_t slot = 0, word = 0;
    };
    std::optional<Seen> seen;
    Expected<AddOutcome> added = make_error(Code::kInternal, "not run");
    {
        // The healer's read: the ADD's slot, CLAIMING.
        AtPoint at("add.after_slot_claim", [&] {
            auto blocks = store->all_blocks();
            ASSERT_TRUE(blocks);
            for (shm::BlockFile* b : *blocks) {
                for (uint64_t i = 0; i < b->slot_count(); ++i) {
                    const uint64_t w = slot_ops::load_state(*b, i);
                    if (shm::SlotWord::decode(w).state == format::SlotState::kClaiming)
                        seen = {b, i, w};
                }
            }
        });
        added = alloc.add(testing::add_request("x"));
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(added) << added.error().msg;
    ASSERT_TRUE(seen) << "no slot was CLAIMING at add.after_slot_claim";
    // The healer's judgement, after the ADD is done.
    EXPECT_FALSE(heal_slot_if_orphaned(*store, *seen->block, seen->slot, seen->word));
    testing::expect_verify_clean(*store);
    // Lost and rebuilt from the journal: x keeps its address.
    const std::string address = added->addresses[0].address.to_string();
    std::filesystem::remove_all(cfg.state_dir());
    auto rebuilt = testing::open_store(cfg);
    ASSERT_NE(rebuilt, nullptr);
    auto held = Allocator(*rebuilt, cfg).addresses_of({"x", "eth0"});
    ASSERT_TRUE(held && !held->empty()) << "the rebuild lost x's address";
    EXPECT_EQ(held->at(0).address.to_string(), address);
    testing::expect_verify_clean(*rebuilt);
}

}  // namespace
}  // namespace shmipam::engine
