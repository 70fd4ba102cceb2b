// The storage failing under the engine, through the file-system seam (shm/file_system.h): a full
// disk, an I/O error on a sync, a read-only file system, a failed unlink; and power cuts at every
// call of a run that crosses a journal segment and compacts. Each failed operation answers a
// clear error and leaves a state that verifies clean; no answered operation is lost and no
// address has two owners.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>

#include "engine/state/journal_compaction.h"
#include "tests/support/faulty_file_system.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using testing::FsCall;

// The faulty file system, installed for the test's lifetime.
struct InstalledFaultyFs {
    explicit InstalledFaultyFs(const std::string& scratch) : fs(scratch) {
        std::filesystem::create_directories(scratch);
        shm::install_file_system(&fs);
    }
    ~InstalledFaultyFs() { shm::install_file_system(nullptr); }
    testing::FaultyFileSystem fs;
};

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
    // The next ADD's two records straddle segments 0 and 1, and the disk is full.
    store->index().header().journal_tail = format::kJournalRecordsPerSegment - 1;
    faulty.fs.fail(FsCall::kAllocate, 1, ENOSPC, /*from_then_on=*/true);
    auto out = alloc->add(testing::add_request("b"));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kIo);
    EXPECT_NE(out.error().msg.find("No space left on device"), std::string::npos)
        << out.error().msg;
    EXPECT_NE(out.error().msg.find(shm::Journal::segment_name(1)), std::string::npos)
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
                                      shm::Journal::newest_per_address({before->records[0]}),
                                      true));
    EXPECT_TRUE(std::filesystem::exists(j + "/" + shm::Journal::segment_name(0)));
    auto after = shm::Journal::scan(j);
    ASSERT_TRUE(after) << after.error().msg;
    // Segment 0 is read as well as the checkpoint that covers it: the same newest records.
    const auto newest = shm::Journal::newest_per_address(after->records);
    ASSERT_EQ(newest.size(), 2u);
    EXPECT_EQ(newest[0].address[3], 0);
    EXPECT_EQ(newest[1].address[3], 7);
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
    size_t journal_files(const std::string& prefix) {
        size_t n = 0;
        for (const auto& f : std::filesystem::directory_iterator(config(work).journal_dir())) {
            n += f.path().filename().string().rfind(prefix, 0) == 0;
        }
        return n;
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
        const size_t before = journal_files(GetParam().must_create);
        const Outcome whole = run(0);
        ASSERT_EQ(whole.answered_ops, kScript.size());
        total = whole.calls;
        ASSERT_GT(journal_files(GetParam().must_create), before)
            << "the run must create a " << GetParam().must_create << " file";
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
