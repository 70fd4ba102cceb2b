// The wait for a lock file (base/file_lock.h, the pool lock of cluster/node_files.h among them):
// blocked in the kernel, bounded by a timer of the waiting thread, and leaving the process's
// SIGALRM as it found it; and every lock of the node waited for within a bound.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <future>
#include <thread>

#include "cluster/node_files.h"
#include "cluster/revision_floor.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace shmipam {
namespace {

using Clock = std::chrono::steady_clock;

// The wait's bound in these tests: far past anything the holder does in them.
constexpr uint64_t kLongWaitMs = 60'000;

TEST(PoolLock, AWaiterGetsTheLockWhenTheHolderLetsGo) {
    testing::TempDir dir;
    const std::string path = dir.sub("_cluster/p.lock");
    auto holder = cluster::PoolLock::try_acquire(path);
    ASSERT_TRUE(holder);
    testing::OpenWatch opened(path);
    ASSERT_TRUE(opened.watching());
    Expected<cluster::PoolLock> got = make_error(Code::kInternal, "not run");
    std::thread waiter([&] { got = cluster::PoolLock::acquire(path, kLongWaitMs); });
    ASSERT_TRUE(opened.wait_opens(1));  // the waiter is at the lock
    EXPECT_FALSE(cluster::PoolLock::try_acquire(path)) << "the holder's lock was not held";
    holder.reset();
    waiter.join();
    ASSERT_TRUE(got) << got.error().msg;
    EXPECT_FALSE(cluster::PoolLock::try_acquire(path)) << "the waiter does not hold the lock";
}

TEST(PoolLock, AWaitPastItsBoundIsTryAgainLaterNamingTheFileAndNeverShorter) {
    testing::TempDir dir;
    const std::string path = dir.sub("_cluster/p.lock");
    auto holder = cluster::PoolLock::try_acquire(path);
    ASSERT_TRUE(holder);
    constexpr uint64_t kBoundMs = 300;
    const auto start = Clock::now();
    auto got = cluster::PoolLock::acquire(path, kBoundMs);
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code, Code::kTryAgainLater);
    EXPECT_NE(got.error().msg.find(path), std::string::npos) << got.error().msg;
    EXPECT_GE(waited, int64_t(kBoundMs));
}

// The wait's timer and handler are gone with it: SIGALRM's action is the default again (which
// ends the process: a tick left behind would kill it), the mask as it was.
TEST(PoolLock, AWaitLeavesSigalrmAsItFoundIt) {
    testing::TempDir dir;
    const std::string path = dir.sub("_cluster/p.lock");
    struct sigaction before {};
    ASSERT_EQ(::sigaction(SIGALRM, nullptr, &before), 0);
    ASSERT_EQ(before.sa_handler, SIG_DFL);
    sigset_t mask_before;
    ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &mask_before), 0);
    auto holder = cluster::PoolLock::try_acquire(path);
    ASSERT_TRUE(holder);
    ASSERT_FALSE(cluster::PoolLock::acquire(path, 250));  // a few ticks
    struct sigaction after {};
    ASSERT_EQ(::sigaction(SIGALRM, nullptr, &after), 0);
    EXPECT_EQ(after.sa_handler, SIG_DFL);
    sigset_t mask_after;
    ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &mask_after), 0);
    EXPECT_EQ(sigismember(&mask_after, SIGALRM), sigismember(&mask_before, SIGALRM));
    // Longer than several ticks: this process is still here.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    SUCCEED();
}

// The revision floor's lock was waited for without a bound: a process of the node stopped while
// raising its floor (a debugger, a stalled disk) left every cluster helper of the node waiting
// until its runtime killed it, with no word of why.
TEST(FileLock, ARevisionFloorLockHeldByAStuckProcessIsTryAgainLaterNotAWaitWithoutEnd) {
    testing::TempDir dir;
    ASSERT_TRUE(cluster::raise_revision_floor(dir.path(), 5));
    auto stuck = base::FileLock::try_acquire(cluster::revision_floor_path(dir.path()) + ".lock");
    ASSERT_TRUE(stuck);
    const auto start = Clock::now();
    auto raised = std::async(std::launch::async,
                             [&] { return cluster::raise_revision_floor(dir.path(), 9); });
    // Far past the bound: a wait without one is reported, not waited out.
    constexpr auto kPastTheBound = std::chrono::seconds(60);
    if (raised.wait_for(kPastTheBound) != std::future_status::ready) {
        ADD_FAILURE() << "still waiting for the floor's lock after " << kPastTheBound.count()
                      << " s";
        std::quick_exit(1);  // the waiter cannot be stopped
    }
    const Status st = raised.get();
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, Code::kTryAgainLater);
    EXPECT_NE(st.error().msg.find("store-revision"), std::string::npos) << st.error().msg;
    EXPECT_LT(Clock::now() - start, kPastTheBound);
    stuck.reset();
    EXPECT_TRUE(cluster::raise_revision_floor(dir.path(), 9)) << "free again once let go";
    EXPECT_EQ(*cluster::remembered_revision(dir.path()), 9);
}

}  // namespace
}  // namespace shmipam
