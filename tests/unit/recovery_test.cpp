// A process that dies at each step of a claim or a release leaves work that the next one heals:
// claims roll back, releases roll forward. The dying process is a real forked child that stops
// with _exit at the step under test (no destructors, no lease release: as a SIGKILL would).
#include "engine/recovery/recovery.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "base/clock.h"
#include "engine/ops/open_network.h"
#include "engine/policy/next_fit.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using format::SlotState;

enum class Step {
    kAfterLease,
    kAfterEntryClaim,
    kAfterSlotClaim,
    kAfterPublish,
    kAfterEntryRelease,
    kAfterSlotRelease,
};

class RecoveryTest : public ::testing::TestWithParam<Step> {
  protected:
    void SetUp() override {
        cfg = testing::network_config(dir, {testing::range_set({{"10.3.0.0/24", "", "", ""}})});
        store = testing::open_store(cfg);
    }

    // Runs fn in a child process with its own mapping and identity, which then dies.
    void in_dying_child(const std::function<void(NetworkStore&)>& fn) {
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            auto s = open_network(cfg, shm::current_process());
            if (s) fn(**s);
            ::_exit(0);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);  // reaped: a dead pid, as after a runtime's wait
    }

    SlotState state_of(const std::string& addr) {
        auto a = *IpAddress::parse(addr);
        auto* b = *store->block_for(a, true);
        return shm::SlotWord::decode(slot_ops::load_state(*b, store->slot_of(a))).state;
    }

    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
};

// A partial ADD (or, for the release steps, a full ADD then a partial DEL) that stops at `step`.
void partial_operation(NetworkStore& s, const NetworkConfig& cfg, Step step) {
    const Fingerprint fp = fingerprint("victim", "eth0");
    auto lease = *s.index().leases().acquire(s.self());
    if (step == Step::kAfterLease) return;
    AttachmentIndex idx(s.index(), nullptr);
    EntryClaim claim = idx.claim(fp, lease);
    if (claim.kind != ClaimKind::kClaimed) return;
    format::Entry& ent = s.index().entry(claim.entry.index);
    ent.ref_count = 1;
    if (step == Step::kAfterEntryClaim) return;
    ArenaScanner scanner(s, lease, slot_healer(s));
    ClaimContext ctx{scanner, s.index().header().cursor, 0, base::boot_ns(),
                     [&](const IpAddress& a) {
                         auto b = a.to_bytes();
                         std::copy(b.begin(), b.end(), ent.refs[0].address);
                         ent.refs[0].family = 4;
                         ent.refs[0].block_prefix = 24;
                     }};
    auto got = claim_next(ctx, cfg.range_sets[0], 0);
    if (!got || step == Step::kAfterSlotClaim) return;
    const uint16_t tenancy = shm::EntryWord::decode(claim.entry.word).gen;
    slot_ops::publish(*got->block, got->slot, got->word, claim.entry.index, 0, tenancy, fp.fp1,
                      base::unix_ns());
    if (step == Step::kAfterPublish) return;
    idx.commit(claim.entry, fp);
    // Now release it, dying midway.
    const uint64_t committed = shm::load_word(ent.state);
    s.index().leases().set_target(lease, claim.entry.index, tenancy);
    uint64_t releasing = 0;
    idx.begin_release({claim.entry.index, committed}, lease, &releasing);
    if (step == Step::kAfterEntryRelease) return;
    uint64_t w = slot_ops::load_state(*got->block, got->slot);
    uint64_t slot_releasing = 0;
    const auto ew = shm::EntryWord::decode(releasing);
    slot_ops::begin_release(*got->block, got->slot, w, ew.lease_index, ew.lease_gen,
                            &slot_releasing);
}

TEST_P(RecoveryTest, TheNextInvocationHealsWhatADeadOneLeft) {
    const Step step = GetParam();
    in_dying_child([&](NetworkStore& s) { partial_operation(s, cfg, step); });

    auto before = verify(*store);
    ASSERT_TRUE(before);
    EXPECT_FALSE(before->violations.empty()) << "the dead lease must show up in verify";

    // Any ADD or DEL heals it: here an unrelated DEL.
    Allocator alloc(*store, cfg);
    ASSERT_TRUE(alloc.del({"someone-else", "eth0"}));
    testing::expect_verify_clean(*store);
    EXPECT_EQ(store->index().header().dead_leases_reaped, 1u);

    const bool released = step == Step::kAfterEntryRelease || step == Step::kAfterSlotRelease;
    const SlotState s = state_of("10.3.0.2");
    if (released) {
        EXPECT_EQ(s, SlotState::kCooling) << "a release rolls forward";
    } else {
        EXPECT_EQ(s, SlotState::kFree) << "a claim rolls back";
    }
    // The runtime's follow-up DEL of the dead ADD, then the network is empty and whole.
    ASSERT_TRUE(alloc.del({"victim", "eth0"}));
    EXPECT_FALSE(alloc.addresses_of({"victim", "eth0"}));
    // Next-fit: once the dead claimer had moved the cursor past .2, allocation goes on at .3.
    auto again = alloc.add(testing::add_request("victim"));
    const bool cursor_moved = step != Step::kAfterLease && step != Step::kAfterEntryClaim;
    EXPECT_EQ(testing::first_address(again), cursor_moved ? "10.3.0.3" : "10.3.0.2");
    testing::expect_verify_clean(*store);
}

INSTANTIATE_TEST_SUITE_P(EveryStep, RecoveryTest,
                         ::testing::Values(Step::kAfterLease, Step::kAfterEntryClaim,
                                           Step::kAfterSlotClaim, Step::kAfterPublish,
                                           Step::kAfterEntryRelease, Step::kAfterSlotRelease));

// Liveness is the kernel's: a lease's byte lock (F_OFD_SETLK), held from before the acquiring
// CAS until after the freeing one, dropped only when its holder dies, so a recycled pid never
// passes for a live holder and a live one is never judged dead.
class LeaseJudge : public ::testing::Test {
  protected:
    void SetUp() override {
        cfg = testing::network_config(dir, {testing::range_set({{"10.3.0.0/24", "", "", ""}})});
        store = testing::open_store(cfg);
        observer = testing::open_store(cfg);  // another open file description, as a process has
    }
    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store, observer;
};

TEST_F(LeaseJudge, OwnLeasesAreAliveAndFreeWordsFree) {
    auto& leases = store->index().leases();
    auto h = leases.acquire(store->self());
    ASSERT_TRUE(h);
    EXPECT_EQ(leases.judge(h->index, h->word, store->self()), shm::Holder::kAlive);
    EXPECT_EQ(observer->index().leases().judge(h->index, h->word, observer->self()),
              shm::Holder::kAlive);
    leases.release(*h);
    EXPECT_EQ(leases.judge(5, 0, store->self()), shm::Holder::kFree);
}

// A live holder is alive whatever its side fields say: neither another pid namespace nor an age
// of hours gets it judged dead and reaped under it while it still runs.
TEST_F(LeaseJudge, ALiveHolderIsNeverJudgedDeadHoweverOldOrForeign) {
    auto& leases = store->index().leases();
    auto h = leases.acquire(store->self());
    ASSERT_TRUE(h);
    // Its side fields say: acquired at boot (hours ago), in another pid namespace.
    format::LeaseSide& side = store->index().leases().side(h->index);
    shm::store_word(side.acquired_boot_ms, shm::stamp::pack(h->gen16(), 1));
    shm::store_word(side.tag, shm::stamp::pack(h->gen16(), 12345));
    shm::ProcessIdentity elsewhere = observer->self();
    elsewhere.pidns_tag ^= 0xF0F0;  // the judge, in yet another namespace
    EXPECT_EQ(observer->index().leases().judge(h->index, h->word, elsewhere), shm::Holder::kAlive)
        << "a live holder was judged dead";
    leases.release(*h);
}

// A word that says "held by pid 1" (alive forever: a reused pid, or one of another namespace)
// with nobody holding its lock: its holder is gone. By pid it looked alive for good.
TEST_F(LeaseJudge, AHeldWordWhoseLockIsGoneIsDeadWhateverItsPid) {
    const uint64_t word = shm::LeaseTable::make_word(1, 77, store->self().pidns_tag, 0);
    EXPECT_EQ(observer->index().leases().judge(5, word, observer->self()), shm::Holder::kDead);
}

TEST_F(LeaseJudge, AHolderThatDiedIsDead) {
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        auto s = open_network(cfg, shm::current_process());
        auto h = s ? (*s)->index().leases().acquire((*s)->self()) : make_error(Code::kIo, "");
        const uint64_t msg[2] = {h ? h->index : ~0u, h ? h->word : 0};
        (void)!::write(pipefd[1], msg, sizeof msg);
        ::_exit(0);  // dies holding it
    }
    uint64_t msg[2] = {};
    ASSERT_EQ(::read(pipefd[0], msg, sizeof msg), ssize_t(sizeof msg));
    ::waitpid(child, nullptr, 0);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    ASSERT_NE(msg[0], ~0ull);
    EXPECT_EQ(observer->index().leases().judge(uint32_t(msg[0]), msg[1], observer->self()),
              shm::Holder::kDead);
}

}  // namespace
}  // namespace shmipam::engine
