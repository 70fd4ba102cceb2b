// What the index shows of the configuration that last opened it (shmipamctl ls).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/atomic_word.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

// A writer of the ranges text killed between its seqlock's odd and even stores never wedges the
// display (readers showing nothing, no writer ever writing again): the next writer takes over.
TEST(ConfigDisplay, AWriterKilledMidUpdateNeverWedgesTheDisplay) {
    testing::TempDir dir;
    NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.30.0.0/24", "", "", ""}})});
    auto store = testing::open_store(cfg);
    ASSERT_NE(store, nullptr);
    const std::string before = store->ranges_text();
    ASSERT_NE(before.find("10.30.0.0/24"), std::string::npos) << before;
    // A writer that died mid-update: the sequence odd, naming a process that is gone.
    const pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    ASSERT_GT(gone, 0);
    ::waitpid(gone, nullptr, 0);
    auto& h = store->index().header();
    shm::store_word(h.ranges_seq, (uint64_t(7) << 32) | (uint64_t(gone) << 1) | 1);
    store.reset();
    // The next open with other ranges shows them.
    cfg.range_sets = {testing::range_set({{"10.30.0.0/25", "", "", ""}})};
    store = testing::open_store(cfg);
    ASSERT_NE(store, nullptr);
    EXPECT_NE(store->ranges_text().find("10.30.0.0/25"), std::string::npos)
        << "the display stayed wedged: \"" << store->ranges_text() << "\"";
}

// A live writer is never overtaken: its update is its own to finish.
TEST(ConfigDisplay, AnUpdateInProgressByALiveWriterIsLeftToIt) {
    testing::TempDir dir;
    NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.31.0.0/24", "", "", ""}})});
    auto store = testing::open_store(cfg);
    ASSERT_NE(store, nullptr);
    auto& h = store->index().header();
    const uint64_t live = (uint64_t(7) << 32) | (uint64_t(::getpid()) << 1) | 1;
    shm::store_word(h.ranges_seq, live);
    store.reset();
    cfg.range_sets = {testing::range_set({{"10.31.0.0/25", "", "", ""}})};
    store = testing::open_store(cfg);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(shm::load_word(store->index().header().ranges_seq), live);
}

}  // namespace
}  // namespace shmipam::engine
