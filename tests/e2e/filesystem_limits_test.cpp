// The journal on a full filesystem and on a read-only one (real tmpfs mounts: root). Journal
// segments are allocated whole when created, so appends into an existing segment need no new
// space: ADDs keep working until a new segment is needed; that ADD fails with code 5 and leaves
// nothing half-written and nothing claimed.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>

#include "engine/inspect/inspect.h"
#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "engine/state/network_store.h"
#include "shm/atomic_word.h"
#include "shm/process_identity.h"
#include "tests/e2e/e2e_support.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

class FilesystemLimits : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ROOT();
        std::filesystem::create_directories(dir.sub("data"));
        // Room for one 1 MiB journal segment, not two.
        ASSERT_EQ(::mount("tmpfs", dir.sub("data").c_str(), "tmpfs", 0, "size=1400k"), 0)
            << std::strerror(errno);
        mounted = true;
        cfg.name = "fs";
        cfg.run_dir = dir.sub("run");
        cfg.data_dir = dir.sub("data");
        cfg.reuse_delay_ms = 0;
        cfg.durability = engine::NetworkConfig::Durability::kFsync;
        cfg.range_sets.push_back(*engine::make_range_set({{"10.80.0.0/24", "", "", ""}}));
    }
    void TearDown() override {
        alloc.reset();
        store.reset();
        if (mounted) ::umount2(dir.sub("data").c_str(), MNT_DETACH);
    }
    void open() {
        auto s = engine::open_network(cfg, shm::current_process());
        ASSERT_TRUE(s) << s.error().msg;
        store = std::move(*s);
        alloc = std::make_unique<engine::Allocator>(*store, cfg);
    }
    size_t allocated() {
        size_t n = 0;
        auto d = engine::dump(*store);  // kept: a range-for over a temporary's member dangles
        EXPECT_TRUE(d);
        for (const auto& s : d->slots) n += s.state == "allocated";
        return n;
    }
    void expect_clean() {
        auto rep = engine::verify(*store);
        ASSERT_TRUE(rep);
        EXPECT_TRUE(rep->violations.empty());
    }

    TempDir dir;
    bool mounted = false;
    engine::NetworkConfig cfg;
    std::unique_ptr<engine::NetworkStore> store;
    std::unique_ptr<engine::Allocator> alloc;
};

engine::AddRequest add(const std::string& id) {
    engine::AddRequest r;
    r.key = {id, "eth0"};
    return r;
}

TEST_F(FilesystemLimits, AFullFilesystemOnlyFailsTheAddThatNeedsANewSegment) {
    open();
    ASSERT_TRUE(alloc->add(add("a")));
    // Jump to the last record of the first segment (as after ~4000 operations); a new network
    // appends from segment 1, behind its checkpoint.
    shm::store_word(store->index().header().journal_tail,
                    2 * format::kJournalRecordsPerSegment - 1);
    ASSERT_TRUE(alloc->add(add("b"))) << "the last record still fits in the existing segment";
    auto c = alloc->add(add("c"));
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, Code::kIo) << c.error().msg;
    EXPECT_NE(c.error().msg.find(format::kJournalPrefix), std::string::npos) << c.error().msg;
    EXPECT_EQ(allocated(), 2u) << "the failed ADD holds nothing";
    expect_clean();
    for (const auto& f : std::filesystem::directory_iterator(dir.sub("data/fs"))) {
        EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos)
            << "half-written file left: " << f.path();
    }
    // DEL needs no new segment either? It does here (the segment is full): it must fail cleanly
    // too, and a's address stays allocated rather than half released.
    auto del = alloc->del({"a", "eth0"});
    ASSERT_FALSE(del);
    EXPECT_EQ(del.error().code, Code::kIo);
    EXPECT_TRUE(alloc->addresses_of({"a", "eth0"})) << "an unjournaled release is undone";
    expect_clean();
}

TEST_F(FilesystemLimits, AReadOnlyJournalFailsAddsCleanly) {
    open();
    ASSERT_TRUE(alloc->add(add("a")));
    alloc.reset();
    store.reset();
    ASSERT_EQ(::mount(nullptr, dir.sub("data").c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr),
              0)
        << std::strerror(errno);
    open();
    auto b = alloc->add(add("b"));
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error().code, Code::kIo) << b.error().msg;
    EXPECT_EQ(allocated(), 1u);
    expect_clean();
}

}  // namespace
}  // namespace shmipam::testing
