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

namespace shmipam {
namespace {

void plant_temp(const std::string& path) {
    std::ofstream(path) << "half-built";
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
    EXPECT_LT(waited_ms, 1000u) << "waited for a creator that is gone";
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
    std::thread creator([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::filesystem::copy_file(temp, dir.sub("blockfile"));  // it publishes
    });
    auto made = shm::create_published(dir.path(), "blockfile", 4096,
                                      [](std::span<std::byte>) -> Status { return Ok{}; });
    creator.join();
    ASSERT_TRUE(made);
    EXPECT_EQ(*made, shm::Publish::kAlreadyExisted) << "did not wait for the live creator";
    EXPECT_TRUE(std::filesystem::exists(temp)) << "removed a live creator's file";
    ::close(fd);
}

}  // namespace
}  // namespace shmipam
