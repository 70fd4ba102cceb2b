// Creating a state file aside and publishing it (shm/mapped_file.h).
#include "shm/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/clock.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace shmipam {
namespace {

void plant_temp(const std::string& path, const std::string& content = "half-built") {
    std::ofstream(path) << content;
    const auto old = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(5);
    std::filesystem::last_write_time(path, old);
}

// A creator's liveness is its flock on its temp file, never the pid in the file's name: a pid
// reused by another process (or one of another pid namespace, here pid 1) always looks alive and
// would make every creation wait its whole bound. A dead creator's file is not locked, whatever
// its pid: it is removed at once.
TEST(CreatePublished, AnAbandonedTempFileOfAReusedPidIsNotWaitedFor) {
    testing::TempDir dir;
    const std::string temp = dir.sub(".blockfile.tmp.1.12345");
    plant_temp(temp);
    const uint64_t start = base::boot_ns();
    auto made = shm::create_published(dir.path(), "blockfile", 4096,
                                      [](std::span<std::byte>) -> Status { return Ok{}; });
    const uint64_t waited_ms = (base::boot_ns() - start) / 1'000'000;
    ASSERT_TRUE(made) << made.error().msg;
    EXPECT_EQ(*made, shm::Publish::kCreated);
    // A creator that looks alive is waited for 2 s (shm/mapped_file.cpp, kCreatorWaitNs); not
    // waiting takes about a millisecond: half the wait tells them apart on any machine.
    constexpr uint64_t kHalfTheCreatorWaitMs = 1000;
    EXPECT_LT(waited_ms, kHalfTheCreatorWaitMs) << "waited for a creator that is gone";
    EXPECT_FALSE(std::filesystem::exists(temp)) << "the abandoned temp file was left";
}

// A creator at work holds its lock: its file is left alone, and the waiter takes its result.
TEST(CreatePublished, ALiveCreatorsTempFileIsLeftAlone) {
    testing::TempDir dir;
    const std::string temp = dir.sub(".blockfile.tmp.1.777");
    plant_temp(temp);
    const int fd = ::open(temp.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // "the creator", at work (an old file)
    // The waiter looks at the creator's file (it opens it to probe the lock) until the final
    // file appears: the creator publishes once the waiter has looked, so the waiter is seen to
    // wait rather than find the file already there.
    testing::OpenWatch looked_at(temp);
    ASSERT_TRUE(looked_at.watching());
    bool waiter_looked = false;
    std::thread creator([&] {
        waiter_looked = looked_at.wait_opens(1);
        std::error_code ec;  // (a waiter that did not wait has published its own file)
        std::filesystem::copy_file(temp, dir.sub("blockfile"), ec);  // it publishes
    });
    auto made = shm::create_published(dir.path(), "blockfile", 4096,
                                      [](std::span<std::byte>) -> Status { return Ok{}; });
    creator.join();
    EXPECT_TRUE(waiter_looked) << "the waiter never looked at the creator's file";
    ASSERT_TRUE(made);
    EXPECT_EQ(*made, shm::Publish::kAlreadyExisted) << "did not wait for the live creator";
    EXPECT_TRUE(std::filesystem::exists(temp)) << "removed a live creator's file";
    ::close(fd);
}

// A creator makes its temp file, then locks it: a loaded node can deschedule it in between for
// longer than any fixed grace (seconds, with hundreds of invocations starting at once). Its file
// is then unlocked and empty (pages are allocated only under the lock), and another creator that
// removed it as abandoned made the first one's publish fail with code 11. An empty unlocked file
// is left alone and waited for; the waiter takes the creator's result.
TEST(CreatePublished, ACreatorDescheduledBeforeItLocksItsFileDoesNotHaveItRemoved) {
    testing::TempDir dir;
    const std::string temp = dir.sub(".blockfile.tmp.1.888");
    plant_temp(temp, "");  // created 5 s ago, not locked yet
    testing::OpenWatch looked_at(temp);
    ASSERT_TRUE(looked_at.watching());
    bool waiter_looked = false;
    std::thread creator([&] {
        waiter_looked = looked_at.wait_opens(1);
        std::error_code ec;
        std::filesystem::copy_file(temp, dir.sub("blockfile"), ec);  // it publishes
    });
    auto made = shm::create_published(dir.path(), "blockfile", 4096,
                                      [](std::span<std::byte>) -> Status { return Ok{}; });
    creator.join();
    EXPECT_TRUE(waiter_looked) << "the waiter never looked at the creator's file";
    ASSERT_TRUE(made) << made.error().msg;
    EXPECT_EQ(*made, shm::Publish::kAlreadyExisted) << "did not wait for the creator";
    EXPECT_TRUE(std::filesystem::exists(temp)) << "removed the file of a creator not yet locked";
}

}  // namespace
}  // namespace shmipam
