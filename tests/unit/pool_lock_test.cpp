// The wait for a lock file (base/file_lock.h, the pool lock of cluster/node_files.h among them):
// blocked in the kernel, bounded by a timer of the waiting thread, and leaving the process's
// SIGALRM as it found it, with two threads waiting at once too; and the revision floor's lock
// waited for within its bound.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

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

// Two threads waiting at once share SIGALRM's action: the first to stop waiting put the default
// action back while the other's timer still ticked, and that tick ended the process.
TEST(FileLock, TwoThreadsWaitingAtOnceLeaveSigalrmAsFoundAndTheProcessAlive) {
    testing::TempDir dir;
    const std::string path = dir.sub("shared.lock");
    auto holder = base::FileLock::try_acquire(path);
    ASSERT_TRUE(holder);
    const base::LockHolders holders{"the test", ""};
    Expected<base::FileLock> shorter = make_error(Code::kInternal, "not run");
    Expected<base::FileLock> longer = make_error(Code::kInternal, "not run");
    testing::OpenWatch opened(path);
    ASSERT_TRUE(opened.watching());
    // The shorter wait first, so that it is the first to stop, while the other's timer ticks.
    std::thread a([&] { shorter = base::FileLock::acquire(path, 250, holders); });
    ASSERT_TRUE(opened.wait_opens(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // its handler in place
    std::thread b([&] { longer = base::FileLock::acquire(path, 1'500, holders); });
    a.join();
    b.join();
    ASSERT_FALSE(shorter);
    ASSERT_FALSE(longer);
    EXPECT_EQ(shorter.error().code, Code::kTryAgainLater);
    EXPECT_EQ(longer.error().code, Code::kTryAgainLater);
    struct sigaction after {};
    ASSERT_EQ(::sigaction(SIGALRM, nullptr, &after), 0);
    EXPECT_EQ(after.sa_handler, SIG_DFL);
}

// An uninstall removes the installers' lock file last, holding it. A waiter then got the lock
// of the removed file and worked beside an installer that had made the file anew and locked it.
TEST(FileLock, AWaiterWhoseFileWasRemovedLocksTheOneAtThePathNow) {
    testing::TempDir dir;
    const std::string path = dir.sub("install.lock");
    auto holder = base::FileLock::try_acquire(path);
    ASSERT_TRUE(holder);
    testing::OpenWatch opened(path);
    ASSERT_TRUE(opened.watching());
    Expected<base::FileLock> got = make_error(Code::kInternal, "not run");
    std::thread waiter([&] { got = base::FileLock::acquire(path, kLongWaitMs, {"the test", ""}); });
    ASSERT_TRUE(opened.wait_opens(1));  // the waiter has the file open
    ASSERT_EQ(::unlink(path.c_str()), 0);
    holder.reset();  // the removed file's lock goes
    waiter.join();
    ASSERT_TRUE(got) << got.error().msg;
    struct stat held {
    }, named{};
    ASSERT_EQ(::fstat(got->fd(), &held), 0);
    ASSERT_EQ(::stat(path.c_str(), &named), 0) << "the waiter made the file anew";
    EXPECT_EQ(held.st_ino, named.st_ino) << "the lock held is the one at the path";
    EXPECT_FALSE(base::FileLock::try_acquire(path)) << "and it is held";
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
