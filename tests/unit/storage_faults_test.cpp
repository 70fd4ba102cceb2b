// The storage failing under the engine, through the file-system seam (shm/file_system.h): a full
// disk, an I/O error on a sync, a read-only file system, a failed unlink; and power cuts at every
// call of a run that crosses a journal segment and compacts. Each failed operation answers a
// clear error and leaves a state that verifies clean; no answered operation is lost and no
// address has two owners.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "base/clock.h"
#include "engine/recovery/recovery.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_compaction.h"
#include "engine/state/journal_records.h"
#include "tests/support/faulty_file_system.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using testing::FsCall;

using testing::InstalledFaultyFs;

NetworkConfig two_stack_config(const testing::TempDir& dir) {
    NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.90.0.0/24", "", "", ""}}),
                                      testing::range_set({{"fd90::/120", "", "", ""}})});
    cfg.durability = NetworkConfig::Durability::kFsync;
    return cfg;
}

std::vector<std::string> held_by(Allocator& alloc, const std::string& cid) {
    std::vector<std::string> out;
    if (auto a = alloc.addresses_of({cid, "eth0"})) {
        for (const auto& x : *a) out.push_back(x.address.to_string());
    }
    return out;
}

size_t allocated_slots(NetworkStore& store) {
    auto d = dump(store);
    EXPECT_TRUE(d) << d.error().msg;
    size_t n = 0;
    if (d) {
        for (const auto& s : d->slots) n += s.state == "allocated";
    }
    return n;
}

std::vector<std::string> printed(const AddOutcome& out) {
    std::vector<std::string> v;
    for (const auto& a : out.addresses) v.push_back(a.address.to_string());
    return v;
}

class StorageFaults : public ::testing::Test {
  protected:
    void SetUp() override {
        cfg = two_stack_config(dir);
        store = testing::open_store(cfg);
        ASSERT_NE(store, nullptr);
        alloc = std::make_unique<Allocator>(*store, cfg);
    }
    testing::TempDir dir;
    InstalledFaultyFs faulty{dir.sub("kept")};
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> alloc;
};

TEST_F(StorageFaults, AFullRunDirectoryFailsTheAddWithAClearErrorAndHoldsNothing) {
    // The first ADD must create the block file of its addresses: the tmpfs is full.
    faulty.fs.fail(FsCall::kAllocate, 1, ENOSPC, /*from_then_on=*/true);
    auto out = alloc->add(testing::add_request("a"));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kIo);
    EXPECT_NE(out.error().msg.find("No space left on device"), std::string::npos)
        << out.error().msg;
    EXPECT_NE(out.error().msg.find(cfg.state_dir()), std::string::npos) << out.error().msg;
    EXPECT_TRUE(held_by(*alloc, "a").empty());
    testing::expect_verify_clean(*store);
    // Space again: the same ADD succeeds, and it is the only holder of addresses.
    faulty.fs.restore();
    auto again = alloc->add(testing::add_request("a"));
    ASSERT_TRUE(again) << again.error().msg;
    EXPECT_EQ(allocated_slots(*store), 2u);
    testing::expect_verify_clean(*store);
}

TEST_F(StorageFaults, AnIoErrorOnTheJournalSyncFailsTheAddAndHoldsNothing) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    faulty.fs.fail(FsCall::kSync, 1, EIO);
    auto out = alloc->add(testing::add_request("b"));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kIo);
    EXPECT_NE(out.error().msg.find("Input/output error"), std::string::npos) << out.error().msg;
    EXPECT_TRUE(held_by(*alloc, "b").empty());
    testing::expect_verify_clean(*store);
    // The runtime DELs the failed attachment and tries again: it gets addresses no one holds.
    ASSERT_TRUE(alloc->del({"b", "eth0"}));
    auto again = alloc->add(testing::add_request("b"));
    ASSERT_TRUE(again) << again.error().msg;
    EXPECT_NE(printed(*again), held_by(*alloc, "a"));
    testing::expect_verify_clean(*store);
}

TEST_F(StorageFaults, AFullDiskWhenTheJournalNeedsANewSegmentFailsTheAddAndHoldsNothing) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));
    // The next ADD's two records straddle segments 1 and 2 (a new index appends from segment
    // 1), and the disk is full.
    store->index().header().journal_tail = 2 * format::kJournalRecordsPerSegment - 1;
    faulty.fs.fail(FsCall::kAllocate, 1, ENOSPC, /*from_then_on=*/true);
    auto out = alloc->add(testing::add_request("b"));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kIo);
    EXPECT_NE(out.error().msg.find("No space left on device"), std::string::npos)
        << out.error().msg;
    EXPECT_NE(out.error().msg.find(shm::Journal::segment_name(2)), std::string::npos)
        << out.error().msg;
    EXPECT_TRUE(held_by(*alloc, "b").empty());
    testing::expect_verify_clean(*store);
    EXPECT_EQ(held_by(*alloc, "a").size(), 2u);
    EXPECT_EQ(allocated_slots(*store), 2u);
}

TEST_F(StorageFaults, AReadOnlyDataDirectoryFailsTheFirstOpenWithAClearError) {
    NetworkConfig fresh = cfg;
    fresh.name = "fresh";
    fresh.data_dir = dir.sub("ro/data");
    faulty.fs.fail(FsCall::kMkdir, 1, EROFS, /*from_then_on=*/true);
    auto opened = open_network(fresh);
    ASSERT_FALSE(opened);
    EXPECT_EQ(opened.error().code, Code::kIo);
    EXPECT_NE(opened.error().msg.find("Read-only file system"), std::string::npos)
        << opened.error().msg;
    EXPECT_FALSE(std::filesystem::exists(dir.sub("ro")));
}

TEST(StorageFaultsJournal, AnUnlinkThatFailsDuringCompactionLeavesAReadableJournal) {
    testing::TempDir dir;
    InstalledFaultyFs faulty{dir.sub("kept")};
    const std::string j = dir.sub("journal");
    std::filesystem::create_directories(j);
    shm::Journal journal(j, shm::SyncMode::kFdatasync);
    uint64_t tail = 0;
    std::vector<format::JournalRecord> recs(1);
    recs[0].op = uint8_t(format::JournalOp::kAlloc);
    recs[0].family = 4;
    recs[0].address[0] = 10;
    ASSERT_TRUE(journal.append(tail, recs, {}));
    tail = 2 * format::kJournalRecordsPerSegment;
    recs[0].address[3] = 7;
    ASSERT_TRUE(journal.append(tail, recs, {}));
    auto before = shm::Journal::scan(j);
    ASSERT_TRUE(before);
    ASSERT_EQ(before->records.size(), 2u);
    // Compaction below segment 2 writes a checkpoint, then cannot remove segment 0.
    faulty.fs.fail(FsCall::kUnlink, 1, EIO, /*from_then_on=*/true);
    ASSERT_TRUE(shm::Journal::compact(j, 2 * format::kJournalRecordsPerSegment,
                                      shm::Journal::newest_per_address({before->records[0]}), true,
                                      0));
    EXPECT_TRUE(std::filesystem::exists(j + "/" + shm::Journal::segment_name(0)));
    auto after = shm::Journal::scan(j);
    ASSERT_TRUE(after) << after.error().msg;
    // Segment 0 is read as well as the checkpoint that covers it: the same newest records.
    const auto newest = shm::Journal::newest_per_address(after->records);
    ASSERT_EQ(newest.size(), 2u);
    EXPECT_EQ(newest[0].address[3], 0);
    EXPECT_EQ(newest[1].address[3], 7);
}

// A DEL whose process dies after journaling its releases and cooling one slot leaves the other
// slot RELEASING. A healer that cannot journal never undoes that release: recommitting the entry
// would leave it a ref to the COOLING slot, which any ADD may take, and CHECK and a repeated ADD
// of `a` would answer the address an ADD of `b` gets: two owners.
TEST_F(StorageFaults, AHealerThatCannotJournalNeverRecommitsAPartlyCooledRelease) {
    auto a = alloc->add(testing::add_request("a"));
    ASSERT_TRUE(a);
    const IpAddress x1 = a->addresses[0].address, x2 = a->addresses[1].address;
    // What the dead DEL left: the entry RELEASING in its lease's name, both RELEASE records
    // durable (a release is journaled before any slot cools), x1 COOLING, x2 RELEASING.
    AttachmentIndex idx(store->index(), nullptr);
    const Fingerprint fp = fingerprint("a", "eth0");
    const EntryRef e = idx.find(fp).at(0);
    auto lease = *store->index().leases().acquire(store->self());
    store->index().leases().set_target(lease, e.index, shm::EntryWord::decode(e.word).gen);
    uint64_t releasing_entry = 0;
    ASSERT_TRUE(idx.begin_release(e, lease, &releasing_entry));
    const shm::EntryWord ew = shm::EntryWord::decode(releasing_entry);
    std::vector<format::JournalRecord> records;
    uint64_t releasing_slot[2] = {};
    for (int k = 0; k < 2; ++k) {
        const IpAddress& x = k == 0 ? x1 : x2;
        shm::BlockFile& b = **store->block_for(x, false);
        const uint64_t i = store->slot_of(x);
        const uint64_t w = slot_ops::load_state(b, i);
        ASSERT_TRUE(
            slot_ops::begin_release(b, i, w, ew.lease_index, ew.lease_gen, &releasing_slot[k]));
        records.push_back(make_record(format::JournalOp::kRelease, x, store->block_prefix(x.family),
                                      size_t(k), shm::SlotWord::decode(w).gen + 2, fp,
                                      {"a", "eth0", "", 0, 1}, store->boot_id(), 1));
    }
    ASSERT_TRUE(store->append_journal(records));
    ASSERT_TRUE(slot_ops::finish_release(**store->block_for(x1, false), store->slot_of(x1),
                                         releasing_slot[0], base::boot_ns()));
    store->index().leases().release(lease);  // the DEL's process is gone
    // A healer finds it, and the journal cannot be written.
    faulty.fs.fail(FsCall::kWrite, 1, EIO, /*from_then_on=*/true);
    heal_entry_if_orphaned(*store, e.index, releasing_entry);
    EXPECT_FALSE(alloc->addresses_of({"a", "eth0"})) << "the release was undone: a recommitted";
    // The disk works again. b asks for x1, which a's DEL released durably: b gets it, and a
    // holds nothing (its release is completed by whoever comes next).
    faulty.fs.restore();
    auto b = alloc->add(testing::add_request("b", "eth0", {x1.to_string()}));
    ASSERT_TRUE(b) << b.error().msg;
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    EXPECT_FALSE(alloc->addresses_of({"a", "eth0"}));
    testing::expect_verify_clean(*store);
}

// The owner's side of the same rule: a live DEL that cannot journal undoes its own release
// whole (every slot still RELEASING in its name), so the attachment keeps both addresses and
// the runtime's retry of the DEL finds it.
TEST_F(StorageFaults, ADelThatCannotJournalKeepsTheAttachmentWhole) {
    auto a = alloc->add(testing::add_request("a"));
    ASSERT_TRUE(a);
    faulty.fs.fail(FsCall::kWrite, 1, EIO, /*from_then_on=*/true);
    auto del = alloc->del({"a", "eth0"});
    ASSERT_FALSE(del);
    EXPECT_EQ(del.error().code, Code::kIo);
    faulty.fs.restore();
    EXPECT_EQ(held_by(*alloc, "a"), printed(*a));
    testing::expect_verify_clean(*store);
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    EXPECT_TRUE(held_by(*alloc, "a").empty());
    testing::expect_verify_clean(*store);
}

// An index being replaced is a state in transition, never an I/O failure: a first ADD that finds
// it gone between its looks answers 11, not 5 ("cannot stat .../index: No such file or
// directory"). Here every publication of a new index "loses" to one that is gone by the time it
// is mapped.
TEST_F(StorageFaults, AnIndexThatVanishesWhileItIsOpenedIsTryAgainNotAnIoError) {
    NetworkConfig fresh = cfg;
    fresh.name = "fresh";
    faulty.fs.fail_links_to(shm::IndexFile::kFileName, EEXIST);
    auto opened = open_network(fresh);
    ASSERT_FALSE(opened);
    EXPECT_EQ(opened.error().code, Code::kTryAgainLater) << opened.error().msg;
    faulty.fs.restore();
    auto again = open_network(fresh);
    ASSERT_TRUE(again) << again.error().msg;
}

// Power cuts: one run of ADDs and DELs that crosses into a new journal segment and compacts the
// journal (journalMaxSegments 1), cut at each of its file-system calls in turn. At the cut the
// operation in flight fails (its process would never answer), what was not synced is dropped and
// the arena is lost. The state rebuilt from the journal holds every attachment whose last
// operation answered as it answered, and gives no address twice.
struct ScriptOp {
    bool add;
    std::string id;
};
const std::vector<ScriptOp> kScript = {{true, "a"},  {true, "b"},  {true, "c"}, {false, "a"},
                                       {true, "d"},  {false, "b"}, {true, "e"}, {true, "f"},
                                       {false, "e"}, {true, "g"}};

// Where the run starts: a few records short of what it must cross.
struct CutScenario {
    const char* name;
    uint64_t start_tail;      // the journal's tail when the script starts
    const char* must_create;  // a file name prefix the run creates in the journal directory
};

class PowerCutInProcess : public ::testing::TestWithParam<CutScenario> {
  protected:
    // The network with its journal filled (without syncs) up to the scenario's start, built once
    // and put back before every run. An arena knows its data directory, so every run uses the
    // same directory.
    void SetUp() override {
        NetworkConfig cfg = config(work);
        cfg.durability = NetworkConfig::Durability::kNone;
        {
            auto store = testing::open_store(cfg);
            ASSERT_NE(store, nullptr);
            Allocator alloc(*store, cfg);
            for (int i = 0; store->index().header().journal_tail < GetParam().start_tail; ++i) {
                const std::string id = "fill" + std::to_string(i);
                ASSERT_TRUE(alloc.add(testing::add_request(id)));
                ASSERT_TRUE(alloc.del({id, "eth0"}));
            }
        }
        std::filesystem::copy(work.path(), stash.path(), std::filesystem::copy_options::recursive);
    }
    static NetworkConfig config(const testing::TempDir& dir) {
        NetworkConfig cfg = two_stack_config(dir);
        cfg.journal_max_segments = 1;
        return cfg;
    }
    void put_back_template() {
        for (const auto& f : std::filesystem::directory_iterator(work.path())) {
            std::filesystem::remove_all(f.path());
        }
        std::filesystem::copy(stash.path(), work.path(), std::filesystem::copy_options::recursive);
    }
    std::set<std::string> journal_files(const std::string& prefix) {
        std::set<std::string> names;
        for (const auto& f : std::filesystem::directory_iterator(config(work).journal_dir())) {
            const std::string n = f.path().filename().string();
            if (n.rfind(prefix, 0) == 0) names.insert(n);
        }
        return names;
    }

    struct Outcome {
        int calls = 0;               // file-system calls the run made
        bool cut = false;            // the power went during it
        testing::PowerCutLoss loss;  // what the cut took
        std::map<std::string, std::optional<std::vector<std::string>>> answered;
        size_t answered_ops = 0;
    };
    // Runs the script on the template put back, the power going at call `cut_at` (0: never).
    Outcome run(int cut_at) {
        put_back_template();
        InstalledFaultyFs faulty{work.sub("kept")};
        const NetworkConfig cfg = config(work);
        Outcome out;
        auto count_calls = [&] {
            int n = 0;
            for (FsCall k : {FsCall::kOpen, FsCall::kWrite, FsCall::kRead, FsCall::kAllocate,
                             FsCall::kSync, FsCall::kSyncDir, FsCall::kLink, FsCall::kRename,
                             FsCall::kUnlink, FsCall::kMkdir}) {
                n += faulty.fs.calls(k);
            }
            return n;
        };
        {
            if (cut_at > 0) faulty.fs.lose_power_after(cut_at);
            auto opened = open_network(cfg);
            if (!opened && cut_at == 0) ADD_FAILURE() << opened.error().msg;
            if (opened) {
                Allocator alloc(**opened, cfg);
                for (const ScriptOp& op : kScript) {
                    if (op.add) {
                        auto r = alloc.add(testing::add_request(op.id));
                        if (!r && cut_at == 0) ADD_FAILURE() << r.error().msg;
                        if (!r) break;  // never answered: the power is gone
                        out.answered[op.id] = printed(*r);
                    } else {
                        if (!alloc.del({op.id, "eth0"})) break;
                        out.answered[op.id] = std::nullopt;
                    }
                    ++out.answered_ops;
                    compact_journal_if_due(**opened);  // what the plugin does after answering
                }
            }
        }
        out.calls = count_calls();
        out.cut = faulty.fs.power_lost();
        if (cut_at > 0) out.loss = faulty.fs.drop_unsynced();
        faulty.fs.restore();
        std::filesystem::remove_all(cfg.state_dir());  // the arena was on tmpfs
        return out;
    }

    testing::TempDir work, stash;
};

TEST_P(PowerCutInProcess, EveryAnsweredOperationSurvivesACutAtAnyCall) {
    // The whole run once, uncut: how many calls there are to cut at, and that it creates what
    // the scenario is about (so that its name, contents and unlinks are at stake).
    int total = 0;
    {
        const std::set<std::string> before = journal_files(GetParam().must_create);
        const Outcome whole = run(0);
        ASSERT_EQ(whole.answered_ops, kScript.size());
        total = whole.calls;
        bool created = false;
        for (const std::string& n : journal_files(GetParam().must_create)) {
            created = created || before.count(n) == 0;
        }
        ASSERT_TRUE(created) << "the run must create a " << GetParam().must_create << " file";
    }
    ASSERT_GT(total, 20);
    testing::PowerCutLoss lost;
    for (int cut = 1; cut <= total; ++cut) {
        SCOPED_TRACE("power cut at call " + std::to_string(cut) + " of " + std::to_string(total));
        const Outcome o = run(cut);
        ASSERT_TRUE(o.cut);
        lost.writes_undone += o.loss.writes_undone;
        lost.names_lost += o.loss.names_lost;
        lost.contents_lost += o.loss.contents_lost;
        lost.unlinks_undone += o.loss.unlinks_undone;
        const NetworkConfig cfg = config(work);
        auto store = testing::open_store(cfg);
        ASSERT_NE(store, nullptr);
        Allocator alloc(*store, cfg);
        testing::expect_verify_clean(*store);
        for (const auto& [id, addrs] : o.answered) {
            if (addrs) {
                EXPECT_EQ(held_by(alloc, id), *addrs) << id << " answered its ADD";
            } else {
                EXPECT_TRUE(held_by(alloc, id).empty()) << id << " answered its DEL";
            }
        }
        if (HasFailure()) return;
    }
    std::printf(
        "[ cut      ] %s, %d cuts: %zu unsynced writes undone, %zu names and %zu contents "
        "lost, %zu unlinks undone\n",
        GetParam().name, total, lost.writes_undone, lost.names_lost, lost.contents_lost,
        lost.unlinks_undone);
    // The cuts landed where something was pending, not only between operations.
    EXPECT_GT(lost.writes_undone + lost.names_lost + lost.unlinks_undone, 0u);
}

constexpr uint64_t kSegment = format::kJournalRecordsPerSegment;
INSTANTIATE_TEST_SUITE_P(
    Scenarios, PowerCutInProcess,
    ::testing::Values(
        // Crosses into a new segment: created aside, linked, synced with its directory.
        CutScenario{"new_segment", 2 * kSegment - 10, format::kJournalPrefix},
        // Crosses a compaction check: a checkpoint written and published, segments unlinked.
        CutScenario{"compaction", 2 * kSegment + shm::Journal::kCompactionCheckOffset - 10,
                    format::kCheckpointPrefix}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace shmipam::engine
