// The pools directory's stamp, checked without listing the directory (stamp_holds), and the
// directory listing every layer uses (base::for_each_entry).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "base/directory.h"
#include "pools/pool_dir.h"
#include "tests/support/temp_dir.h"

namespace shmipam::pools {
namespace {

using testing::TempDir;
using testing::write_file;

// Times an hour old: outside the racy window, and unlike any time a change made now sets (a
// change within one timestamp tick of the stamp could go unseen; snapshots are never written
// from a racy stamp, see directory_stamp).
void backdate(const std::string& path) {
    const struct timespec old[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), old, 0), 0) << path;
}

class Stamp : public ::testing::Test {
  protected:
    void SetUp() override {
        ::mkdir(dir.sub("pools").c_str(), 0755);
        write_file(pools("a.yaml"), "kind: List\nitems: []\n");
        write_file(pools("b.json"), "{}");
        backdate(pools("a.yaml"));
        backdate(pools("b.json"));
        backdate(dir.sub("pools"));
        bool racy = false;
        auto s = directory_stamp(dir.sub("pools"), &racy);
        ASSERT_TRUE(bool(s));
        stamp = *s;
        ASSERT_TRUE(stamp_holds(dir.sub("pools"), stamp));
    }
    std::string pools(const std::string& name) const { return dir.sub("pools") + "/" + name; }
    TempDir dir;
    std::string stamp;
};

TEST_F(Stamp, AFileAddedToThePoolsDirectoryIsSeenWithoutListingIt) {
    write_file(pools("c.yaml"), "{}");
    EXPECT_FALSE(stamp_holds(dir.sub("pools"), stamp));
}

TEST_F(Stamp, AFileRemovedFromThePoolsDirectoryIsSeen) {
    ASSERT_EQ(::unlink(pools("b.json").c_str()), 0);
    EXPECT_FALSE(stamp_holds(dir.sub("pools"), stamp));
}

TEST_F(Stamp, AFileRenamedOverAnotherIsSeen) {
    // As deploy/sync-pools.sh and a ConfigMap update do: written aside, renamed over.
    write_file(pools(".a.yaml.tmp"), "kind: List\nitems: []\n");
    ASSERT_EQ(::rename(pools(".a.yaml.tmp").c_str(), pools("a.yaml").c_str()), 0);
    EXPECT_FALSE(stamp_holds(dir.sub("pools"), stamp));
}

TEST_F(Stamp, AFileEditedInPlaceWithTheSameSizeIsSeen) {
    // Rewriting a file's bytes changes neither the directory nor the file's size.
    write_file(pools("a.yaml"), "kind: List\nitems: {}\n");
    EXPECT_FALSE(stamp_holds(dir.sub("pools"), stamp));
}

TEST_F(Stamp, AnotherDirectoryOrADamagedStampNeverHolds) {
    EXPECT_FALSE(stamp_holds(dir.sub("other"), stamp));
    EXPECT_FALSE(stamp_holds(dir.sub("pools"), stamp.substr(0, stamp.size() - 3)));
    EXPECT_FALSE(stamp_holds(dir.sub("pools"), ""));
}

TEST_F(Stamp, AChangeWithinTwoSecondsMakesTheStampRacy) {
    write_file(pools("c.yaml"), "{}");
    bool racy = false;
    ASSERT_TRUE(bool(directory_stamp(dir.sub("pools"), &racy)));
    EXPECT_TRUE(racy);
}

TEST(ForEachEntry, VisitsEveryEntryButDotAndDotDotAcrossManyReads) {
    TempDir dir;
    // More names than one 4 KiB read of entries holds.
    std::vector<std::string> want;
    for (int i = 0; i < 300; ++i) {
        want.push_back("entry-with-a-longish-name-" + std::to_string(i));
        write_file(dir.sub(want.back()), "");
    }
    std::vector<std::string> seen;
    EXPECT_EQ(base::for_each_entry(dir.path(), [&](std::string_view n) { seen.emplace_back(n); }),
              0);
    std::sort(want.begin(), want.end());
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, want);
}

TEST(ForEachEntry, AMissingDirectoryIsItsErrno) {
    TempDir dir;
    int visited = 0;
    EXPECT_EQ(base::for_each_entry(dir.sub("missing"), [&](std::string_view) { ++visited; }),
              ENOENT);
    write_file(dir.sub("file"), "");
    EXPECT_EQ(base::for_each_entry(dir.sub("file"), [&](std::string_view) { ++visited; }), ENOTDIR);
    EXPECT_EQ(visited, 0);
}

}  // namespace
}  // namespace shmipam::pools
