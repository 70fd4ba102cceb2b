// The arena lost (reboot, deleted run directory, retired state): the next open rebuilds it
// from the journal.
#include "engine/recovery/rebuild.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>

#include "engine/state/journal_records.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

class RebuildTest : public ::testing::Test {
  protected:
    void SetUp() override {
        testing::write_file(dir.sub("boot_id"), "11111111-2222-3333-4444-555555555555\n");
        cfg = testing::network_config(dir,
                                      {testing::range_set({{"10.60.0.0/24", "", "", ""}}),
                                       testing::range_set({{"fd60::/120", "", "", ""}})},
                                      30'000);
        cfg.boot_id_path = dir.sub("boot_id");
        open();
    }
    void open() {
        alloc.reset();
        store = testing::open_store(cfg);
        alloc = std::make_unique<Allocator>(*store, cfg);
    }
    void lose_arena() {
        alloc.reset();
        store.reset();
        std::filesystem::remove_all(cfg.state_dir());
    }
    void reboot() {
        lose_arena();
        testing::write_file(dir.sub("boot_id"), "99999999-2222-3333-4444-555555555555\n");
    }
    // The kinds of violation verify reports.
    std::set<std::string> kinds() {
        std::set<std::string> out;
        auto rep = verify(*store);
        EXPECT_TRUE(rep);
        if (rep) {
            for (const auto& v : rep->violations) out.insert(v.kind);
        }
        return out;
    }
    std::vector<std::string> addresses(const std::string& cid) {
        std::vector<std::string> out;
        auto a = alloc->addresses_of({cid, "eth0"});
        if (a) {
            for (const auto& x : *a) out.push_back(x.address.to_string());
        }
        return out;
    }

    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> alloc;
};

TEST_F(RebuildTest, ALostArenaComesBackFromTheJournal) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    ASSERT_TRUE(alloc->add(testing::add_request("b")));
    ASSERT_TRUE(alloc->add(testing::add_request("c")));
    ASSERT_TRUE(alloc->del({"b", "eth0"}));
    const auto a = addresses("a"), c = addresses("c");
    lose_arena();
    open();
    EXPECT_TRUE(store->creation().rebuilt);
    EXPECT_EQ(addresses("a"), a);
    EXPECT_EQ(addresses("c"), c);
    EXPECT_TRUE(addresses("b").empty());
    testing::expect_verify_clean(*store);
    // b's address is still cooling and the cursor carries on after c: the next ADD gets a new one.
    auto d = alloc->add(testing::add_request("d"));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->addresses[0].address.to_string(), "10.60.0.5");
    // What was rebuilt can be released, and the release is journaled again.
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    lose_arena();
    open();
    EXPECT_TRUE(addresses("a").empty());
    EXPECT_EQ(addresses("c"), c);
    testing::expect_verify_clean(*store);
}

TEST_F(RebuildTest, AfterARebootOrdinaryAllocationsAreReclaimedAndCoolDownsKept) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));  // .2
    ASSERT_TRUE(alloc->add(testing::add_request("b")));  // .3
    ASSERT_TRUE(alloc->del({"b", "eth0"}));
    reboot();
    open();
    EXPECT_EQ(store->creation().reclaimed_after_reboot, 2u) << "a's IPv4 and IPv6 addresses";
    EXPECT_TRUE(addresses("a").empty());
    testing::expect_verify_clean(*store);
    auto d = dump(*store);
    size_t cooling = 0;
    for (const auto& s : d->slots) cooling += s.state == "cooling";
    EXPECT_EQ(cooling, 2u) << "b's addresses were released 0 s ago with a 30 s cool-down";
}

// A claim is held for a name, not for a sandbox: a reboot ends every sandbox but not the name.
TEST_F(RebuildTest, AfterARebootClaimsAreKeptAndOrdinaryAllocationsReclaimed) {
    AddRequest claim = testing::add_request("c1");
    claim.claim = engine::ClaimSpec{"sts:shop/db-0"};
    ASSERT_TRUE(alloc->add(claim));                      // .2
    ASSERT_TRUE(alloc->add(testing::add_request("a")));  // .3
    const auto claimed = addresses("sts:shop/db-0");
    reboot();
    open();
    EXPECT_EQ(store->creation().reclaimed_after_reboot, 2u) << "a's IPv4 and IPv6 addresses";
    EXPECT_TRUE(addresses("a").empty());
    EXPECT_EQ(addresses("sts:shop/db-0"), claimed);
    testing::expect_verify_clean(*store);
    // Still a claim, in the rebuilt entry and in what the next rebuild reads.
    auto d = dump(*store);
    size_t claims = 0;
    for (const auto& s : d->slots) claims += s.claim;
    EXPECT_EQ(claims, 2u);
    reboot();
    open();
    EXPECT_EQ(addresses("sts:shop/db-0"), claimed);
    // The next ADD does not get the claimed addresses.
    auto b = alloc->add(testing::add_request("b"));
    ASSERT_TRUE(b);
    EXPECT_NE(b->addresses[0].address.to_string(), claimed[0]);
}

TEST_F(RebuildTest, ReclaimOnRebootFalseKeepsAllocations) {
    cfg.reclaim_on_reboot = false;
    open();
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    const auto a = addresses("a");
    reboot();
    open();
    EXPECT_EQ(addresses("a"), a);
    testing::expect_verify_clean(*store);
}

TEST_F(RebuildTest, AStaleRecordNeverWinsOverANewerOne) {
    // Many generations of one address, journaled in a shuffled order: the newest one wins.
    ASSERT_TRUE(alloc->add(testing::add_request("x", "eth0", {"10.60.0.9", "fd60::9"})));
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(alloc->del({"x", "eth0"}));
        ASSERT_TRUE(alloc->add(testing::add_request("x", "eth0", {"10.60.0.9", "fd60::9"})));
    }
    ASSERT_TRUE(alloc->del({"x", "eth0"}));
    ASSERT_TRUE(alloc->add(testing::add_request("y", "eth0", {"10.60.0.9", "fd60::9"})));
    lose_arena();
    open();
    EXPECT_TRUE(addresses("x").empty());
    EXPECT_EQ(addresses("y"), (std::vector<std::string>{"10.60.0.9", "fd60::9"}));
    testing::expect_verify_clean(*store);
    // And generations carry on past the journal's: one more cycle, one more rebuild.
    ASSERT_TRUE(alloc->del({"y", "eth0"}));
    lose_arena();
    open();
    EXPECT_TRUE(addresses("y").empty());
}

TEST_F(RebuildTest, HostLocalFilesAreImportedOnceThenTheJournalRules) {
    lose_arena();
    std::filesystem::remove_all(cfg.journal_dir());
    testing::write_file(cfg.host_local_dir() + "/10.60.0.40", "hl\r\neth0");
    open();
    EXPECT_EQ(store->creation().imported, 1u);
    EXPECT_EQ(addresses("hl"), std::vector<std::string>{"10.60.0.40"});
    ASSERT_TRUE(alloc->del({"hl", "eth0"}));
    lose_arena();
    open();  // host-local's file is still there: it must not come back
    EXPECT_TRUE(store->creation().rebuilt);
    EXPECT_TRUE(addresses("hl").empty());
}

TEST_F(RebuildTest, AnAttachmentThatLostSomeRecordsIsKeptFlaggedAndRefusedOnRepeat) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    ASSERT_TRUE(alloc->add(testing::add_request("b")));
    lose_arena();
    // a's IPv6 record never reached the disk.
    auto scan = shm::Journal::scan(cfg.journal_dir());
    ASSERT_TRUE(scan);
    for (const auto& r : scan->records) {
        if (std::string(r.container_id) == "a" && r.family == 6) {
            const std::string seg =
                cfg.journal_dir() + "/" +
                shm::Journal::segment_name(r.sequence / format::kJournalRecordsPerSegment);
            std::string bytes = testing::read_file(seg);
            const size_t off = (r.sequence % format::kJournalRecordsPerSegment) * sizeof r;
            std::fill(bytes.begin() + off, bytes.begin() + off + sizeof r, '\0');
            testing::write_file(seg, bytes);
        }
    }
    open();
    testing::expect_verify_clean(*store);
    EXPECT_EQ(addresses("a"), std::vector<std::string>{"10.60.0.2"});
    auto again = alloc->add(testing::add_request("a"));
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, Code::kAttachmentIncomplete);
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    auto fresh = alloc->add(testing::add_request("a"));
    ASSERT_TRUE(fresh);
    EXPECT_EQ(fresh->addresses.size(), 2u);
    EXPECT_EQ(addresses("b").size(), 2u);
}

TEST_F(RebuildTest, ARebuildCompactsTheJournalAndLaterRebuildsReadTheCheckpoint) {
    // Enough churn to fill two segments, then a lost arena.
    ASSERT_TRUE(alloc->add(testing::add_request("keep")));
    for (int i = 0; i < 2100; ++i) {
        const std::string id = "churn" + std::to_string(i % 50);
        ASSERT_TRUE(alloc->add(testing::add_request(id)));
        ASSERT_TRUE(alloc->del({id, "eth0"}));
    }
    ASSERT_TRUE(alloc->add(testing::add_request("late")));
    const auto keep = addresses("keep"), late = addresses("late");
    auto segments = [&] {
        size_t n = 0;
        for (const auto& f : std::filesystem::directory_iterator(cfg.journal_dir())) {
            n += f.path().filename().string().rfind(format::kJournalPrefix, 0) == 0;
        }
        return n;
    };
    const size_t before = segments();
    ASSERT_GE(before, 3u);
    lose_arena();
    open();
    EXPECT_TRUE(store->creation().compacted);
    EXPECT_LT(segments(), before) << "segments wholly covered by the checkpoint are dropped";
    EXPECT_EQ(addresses("keep"), keep);
    EXPECT_EQ(addresses("late"), late);
    // More work, then another loss: checkpoint + remaining segments give the same state.
    ASSERT_TRUE(alloc->add(testing::add_request("after")));
    ASSERT_TRUE(alloc->del({"keep", "eth0"}));
    const auto after = addresses("after");
    lose_arena();
    open();
    EXPECT_TRUE(addresses("keep").empty());
    EXPECT_EQ(addresses("late"), late);
    EXPECT_EQ(addresses("after"), after);
    testing::expect_verify_clean(*store);
}

// verify lists a journal file it cannot read and still checks everything else; a rebuild
// refuses to go on without it (it could hold the only record of an allocation).
TEST_F(RebuildTest, AnUnreadableJournalSegmentIsListedByVerifyAndStopsARebuild) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    const std::string planted = cfg.journal_dir() + "/" + shm::Journal::segment_name(7);
    std::filesystem::create_directory(planted);

    auto rep = verify(*store);
    ASSERT_TRUE(rep) << rep.error().msg;
    ASSERT_EQ(rep->violations.size(), 1u);
    EXPECT_EQ(rep->violations[0].kind, "damaged-journal-file");
    EXPECT_NE(rep->violations[0].detail.find(planted), std::string::npos);
    EXPECT_EQ(rep->journal_records, 2u) << "the readable segment was still checked";
    EXPECT_GT(rep->slots_checked, 0u);

    lose_arena();
    auto reopened = open_network(cfg);
    ASSERT_FALSE(reopened) << "a rebuild without the unreadable file could lose an allocation";
    EXPECT_EQ(reopened.error().code, Code::kIo);
    std::filesystem::remove(planted);
    open();
    EXPECT_EQ(addresses("a").size(), 2u);
}

// A rebuild says what it skipped: the damaged records it could not use are counted in the
// index it built (shmipamctl stats, metrics and dump show them).
TEST_F(RebuildTest, ARebuildCountsTheDamagedRecordsItSkipped) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    ASSERT_TRUE(alloc->add(testing::add_request("b")));
    // A new index appends from segment 1.
    const std::string seg = cfg.journal_dir() + "/" + shm::Journal::segment_name(1);
    std::string bytes = testing::read_file(seg);
    bytes[3 * sizeof(format::JournalRecord) + 100] ^= 0x20;  // b's second record
    testing::write_file(seg, bytes);
    lose_arena();
    open();
    auto d = dump(*store);
    ASSERT_TRUE(d) << d.error().msg;
    EXPECT_EQ(d->rebuild_skipped_records, 1u);
    EXPECT_EQ(addresses("a").size(), 2u) << "undamaged records still rebuild";
}

// An invocation that cannot read the boot id (a missing file, EMFILE, an LSM denial, a typo in
// bootIdFile) fails; it never takes zeros for another boot's id, which would retire the live
// state, have the rebuild reclaim every allocation, and give the next ADD a live pod's address.
TEST_F(RebuildTest, AnUnreadableBootIdNeverRetiresOrReclaims) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    const auto a = addresses("a");
    alloc.reset();
    store.reset();
    NetworkConfig unreadable = cfg;
    unreadable.boot_id_path = dir.sub("no-such-boot-id");
    auto opened = open_network(unreadable);
    ASSERT_FALSE(opened) << "an invocation without a boot id must not touch the state";
    EXPECT_EQ(opened.error().code, Code::kIo);
    EXPECT_NE(opened.error().msg.find("boot id"), std::string::npos) << opened.error().msg;
    EXPECT_NE(opened.error().msg.find(unreadable.boot_id_path), std::string::npos);
    open();
    EXPECT_FALSE(store->creation().rebuilt) << "the live state was retired";
    EXPECT_EQ(addresses("a"), a);
    auto b = alloc->add(testing::add_request("b"));
    ASSERT_TRUE(b);
    EXPECT_NE(b->addresses[0].address.to_string(), a[0]);
    testing::expect_verify_clean(*store);
}

// The same with a file that is there but does not hold a boot id as the kernel writes it (a
// bootIdFile naming the wrong file, a truncated copy): the partial parse read it as some other
// boot's id.
TEST_F(RebuildTest, AMalformedBootIdNeverRetiresOrReclaims) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    const auto a = addresses("a");
    alloc.reset();
    store.reset();
    for (const char* text :
         {"", "11111111-2222\n", "not a boot id\n", "11111111-2222-3333-4444-5555555555550\n",
          "11111111x2222-3333-4444-555555555555\n",
          "11111111-2222-3333-4444-555555555555\nmore\n"}) {
        SCOPED_TRACE(std::string("boot id file: \"") + text + "\"");
        NetworkConfig malformed = cfg;
        malformed.boot_id_path = dir.sub("malformed-boot-id");
        testing::write_file(malformed.boot_id_path, text);
        auto opened = open_network(malformed);
        ASSERT_FALSE(opened);
        EXPECT_EQ(opened.error().code, Code::kIo);
        EXPECT_NE(opened.error().msg.find("boot id"), std::string::npos) << opened.error().msg;
    }
    open();
    EXPECT_FALSE(store->creation().rebuilt) << "the live state was retired";
    EXPECT_EQ(addresses("a"), a);
}

// An ADD's ALLOC is written and its ROLLBACK is not (the append fails); the runtime's retry gets
// another address. A rebuild keeps the newest ALLOC per attachment and range set, not the lower
// address: otherwise CHECK would answer the address the pod no longer uses, DEL would release
// that one, and the newer would stay allocated to an attachment that is gone.
TEST_F(RebuildTest, AReplayedAttachmentKeepsItsNewestAddressPerRangeSet) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    const auto first = addresses("a");
    ASSERT_EQ(first[0], "10.60.0.2");
    // The retry's ALLOC, newer in the journal, of another address in range set 0.
    const IpAddress retry = *IpAddress::parse("10.60.0.5");
    format::JournalRecord r =
        make_record(format::JournalOp::kAlloc, retry, 24, 0, 1, fingerprint("a", "eth0"),
                    {"a", "eth0", "", 0, 1}, store->boot_id(), 2);
    ASSERT_TRUE(store->append_journal({&r, 1}));
    lose_arena();
    open();
    EXPECT_EQ(addresses("a"), (std::vector<std::string>{"10.60.0.5", first[1]}));
    testing::expect_verify_clean(*store);
    // The superseded address is free, and stays free through the next rebuilds: DEL a, and
    // nothing comes back.
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    lose_arena();
    open();
    EXPECT_TRUE(addresses("a").empty());
    auto d = dump(*store);
    ASSERT_TRUE(d);
    for (const auto& slot : d->slots)
        EXPECT_NE(slot.state, "allocated") << slot.address.to_string();
    testing::expect_verify_clean(*store);
}

// Processes P and Q both map a retired index E1. P unlinks it and a rebuild publishes E2; Q, late,
// never unlinks "index" by name, which is E2 by then: the next invocation would build E3 while
// processes holding E2 went on allocating there, one address handed out from two arenas. The
// block variant: a creator whose E1 has been replaced never removes "blocks of other epochs",
// which are E2's, with every allocation in them.
TEST_F(RebuildTest, ALateRemoverNeverUnlinksANewerIndex) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    alloc.reset();
    std::unique_ptr<NetworkStore> late = std::move(store);
    const std::string index_path = cfg.state_dir() + "/" + shm::IndexFile::kFileName;
    late->index().retire();
    ASSERT_EQ(::unlink(index_path.c_str()), 0);  // P, on time
    open();                                      // E2, rebuilt
    ASSERT_TRUE(store->creation().rebuilt);
    auto p = alloc->add(testing::add_request("p"));
    ASSERT_TRUE(p);
    (void)late->retire("late");  // Q, late
    EXPECT_TRUE(std::filesystem::exists(index_path)) << "the late remover unlinked E2";
    EXPECT_FALSE(store->retired());
    late->remove_blocks_of_other_epochs();  // a stale creator's cleanup
    // A newcomer maps E2, with its blocks: p is held, and q gets another address.
    auto newcomer = testing::open_store(cfg);
    ASSERT_NE(newcomer, nullptr);
    EXPECT_FALSE(newcomer->creation().created) << "E3 was built beside E2";
    Allocator other(*newcomer, cfg);
    auto held = other.addresses_of({"p", "eth0"});
    ASSERT_TRUE(held) << held.error().msg;
    EXPECT_EQ(held->at(0).address, p->addresses[0].address);
    auto q = other.add(testing::add_request("q"));
    ASSERT_TRUE(q);
    EXPECT_NE(q->addresses[0].address, p->addresses[0].address);
    testing::expect_verify_clean(*newcomer);
}

// A rebuilt index never hands out again a sequence that a writer of the retired index reserved
// and has not written yet (its tail is not one past the newest valid record): that writer's late
// pwrite would overwrite a live ALLOC, and the next rebuild would give the address away again.
TEST_F(RebuildTest, AStrayRecordOfARetiredIndexNeverOverwritesANewOne) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    alloc.reset();
    std::unique_ptr<NetworkStore> late = std::move(store);
    // W, on E1, reserves one record and is preempted before writing it.
    const uint64_t reserved =
        std::atomic_ref<uint64_t>(late->index().header().journal_tail).fetch_add(1);
    late->index().retire();
    ASSERT_EQ(::unlink((cfg.state_dir() + "/" + shm::IndexFile::kFileName).c_str()), 0);
    open();  // E2, rebuilt
    ASSERT_TRUE(store->creation().rebuilt);
    auto b = alloc->add(testing::add_request("b"));
    ASSERT_TRUE(b) << b.error().msg;
    const IpAddress b_v4 = b->addresses[0].address;
    // W wakes up and writes its record where it reserved it: an ALLOC of b's address for
    // another attachment, with a generation that would win replay.
    uint64_t w_tail = reserved;
    std::vector<format::JournalRecord> w{
        make_record(format::JournalOp::kAlloc, b_v4, store->block_prefix(b_v4.family), 0, 1000,
                    fingerprint("w", "eth0"), {"w", "eth0", "", 0, 1}, store->boot_id(), 1)};
    ASSERT_TRUE(late->journal().append(w_tail, w, {}));
    // E2 lost too: E3 rebuilds from the journal.
    late.reset();
    lose_arena();
    open();
    ASSERT_TRUE(store->creation().rebuilt);
    EXPECT_EQ(addresses("b").size(), 2u) << "b lost an address to the late write";
    EXPECT_TRUE(addresses("w").empty()) << "the late writer's attachment was replayed";
    if (!addresses("b").empty()) EXPECT_EQ(addresses("b")[0], b_v4.to_string());
    testing::expect_verify_clean(*store);
}

// Verify reads the journal's view as well as the arena: an arena rebuilt after a live allocation
// was reclaimed is consistent with itself, and only the journal shows an address allocated again
// in the same boot while still allocated to another attachment, or an allocation the journal
// keeps but the arena does not hold.
TEST_F(RebuildTest, VerifyReadsTheJournalsViewNotOnlyTheArenas) {
    ASSERT_TRUE(kinds().empty());
    const IpAddress x = *IpAddress::parse("10.60.0.9");
    auto alloc_of = [&](const std::string& cid, uint32_t gen) {
        return make_record(format::JournalOp::kAlloc, x, store->block_prefix(x.family), 0, gen,
                           fingerprint(cid, "eth0"), {cid, "eth0", "", 0, 1}, store->boot_id(), 1);
    };
    std::vector<format::JournalRecord> p{alloc_of("p", 2)};
    ASSERT_TRUE(store->append_journal(p));
    EXPECT_EQ(kinds(), std::set<std::string>{"unapplied-journal-allocation"});
    std::vector<format::JournalRecord> q{alloc_of("q", 4)};
    ASSERT_TRUE(store->append_journal(q));
    EXPECT_EQ(kinds(),
              (std::set<std::string>{"journal-duplicate", "unapplied-journal-allocation"}));
}

// A claim's ALLOC from an earlier boot is live (a rebuild keeps it): the journal giving its address
// to somebody else, or the arena not holding it, is what verify must see.
TEST_F(RebuildTest, VerifyCountsAClaimOfAnEarlierBootAsLive) {
    const IpAddress x = *IpAddress::parse("10.60.0.9");
    std::array<uint8_t, 16> earlier = store->boot_id();
    earlier[0] ^= 0xff;
    auto alloc_of = [&](const std::string& cid, uint32_t gen, uint8_t flags,
                        const std::array<uint8_t, 16>& boot) {
        return make_record(format::JournalOp::kAlloc, x, store->block_prefix(x.family), 0, gen,
                           fingerprint(cid, "eth0"), {cid, "eth0", "", flags, 1}, boot, 1);
    };
    std::vector<format::JournalRecord> claim{
        alloc_of("sts:shop/db-0", 2, format::kEntryFlagClaim, earlier)};
    ASSERT_TRUE(store->append_journal(claim));
    EXPECT_EQ(kinds(), std::set<std::string>{"unapplied-journal-allocation"});
    std::vector<format::JournalRecord> q{alloc_of("q", 4, 0, store->boot_id())};
    ASSERT_TRUE(store->append_journal(q));
    EXPECT_EQ(kinds(),
              (std::set<std::string>{"journal-duplicate", "unapplied-journal-allocation"}));
}

}  // namespace
}  // namespace shmipam::engine
