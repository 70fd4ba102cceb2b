// A node's cluster files (its block cache, cluster id and revision floor: cluster/block_cache.h,
// cluster_identity.h, revision_floor.h) go through the file-system seam like every state file,
// so a power cut can be played at each call of their write (tests/support/faulty_file_system.h:
// the power goes at that call, then what no sync covered is lost). Each must come back as the old
// file or the new one, whole, and as the new one when its write said so: a cache that lost a
// block the store gives the node, or a floor that went down, would hide what the guards need.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "cluster/block_cache.h"
#include "cluster/cluster_identity.h"
#include "cluster/revision_floor.h"
#include "tests/support/faulty_file_system.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

// More calls than one write makes (open, write, sync, close, rename, directory sync): the last
// cuts fall after the write ended.
constexpr int kCallsCut = 12;

// For each cut: `write_old` on a working disk, then `write_new` with the power lost at that
// call and the unsynced changes dropped; `check(wrote_new)` reads the file back. Returns how
// many cuts landed inside the write (at least one must, or the test proved nothing).
int cut_at_every_call(const std::function<void(const TempDir&)>& write_old,
                      const std::function<Status(const TempDir&)>& write_new,
                      const std::function<void(const TempDir&, bool)>& check) {
    int landed = 0;
    for (int cut = 1; cut <= kCallsCut; ++cut) {
        TempDir dir;
        write_old(dir);
        bool wrote_new = false;
        {
            InstalledFaultyFs faulty{dir.sub("kept")};
            faulty.fs.lose_power_after(cut);
            wrote_new = bool(write_new(dir));
            landed += faulty.fs.power_lost() ? 1 : 0;
            faulty.fs.drop_unsynced();
            faulty.fs.restore();
        }
        SCOPED_TRACE("power cut at call " + std::to_string(cut));
        check(dir, wrote_new);
    }
    return landed;
}

std::set<std::string> cached(const std::string& path) {
    auto blocks = cluster::read_block_cache(path);
    EXPECT_TRUE(blocks) << "a torn block cache: " << blocks.error().msg;
    std::set<std::string> out;
    if (blocks) {
        for (const auto& b : *blocks) out.insert(b.cidr.to_string());
    }
    return out;
}

TEST(ClusterFilesPowerCut, ABlockCacheCutAtAnyCallIsTheOldListOrTheNewOneWhole) {
    const std::vector<cluster::OwnedBlock> old_list{{*engine::Cidr::parse("10.1.0.0/26"), 5}};
    const std::vector<cluster::OwnedBlock> new_list{{*engine::Cidr::parse("10.1.0.0/26"), 5},
                                                    {*engine::Cidr::parse("10.1.0.64/26"), 9}};
    const std::set<std::string> old_set{"10.1.0.0/26"}, new_set{"10.1.0.0/26", "10.1.0.64/26"};
    const auto path = [](const TempDir& d) { return cluster::block_cache_path(d.path(), "p"); };
    const int landed = cut_at_every_call(
        [&](const TempDir& d) { ASSERT_TRUE(cluster::write_block_cache(path(d), old_list)); },
        [&](const TempDir& d) { return cluster::write_block_cache(path(d), new_list); },
        [&](const TempDir& d, bool wrote_new) {
            const auto now = cached(path(d));
            if (wrote_new) {
                EXPECT_EQ(now, new_set) << "the write said done, and the new block is gone";
            } else {
                EXPECT_TRUE(now == old_set || now == new_set);
            }
        });
    EXPECT_GT(landed, 2);
}

TEST(ClusterFilesPowerCut, ARevisionFloorCutAtAnyCallNeverGoesDown) {
    const int landed = cut_at_every_call(
        [](const TempDir& d) { ASSERT_TRUE(cluster::raise_revision_floor(d.path(), 100)); },
        [](const TempDir& d) { return cluster::raise_revision_floor(d.path(), 200); },
        [](const TempDir& d, bool wrote_new) {
            auto floor = cluster::remembered_revision(d.path());
            ASSERT_TRUE(floor) << "a damaged floor: " << floor.error().msg;
            if (wrote_new) {
                EXPECT_EQ(*floor, 200);
            } else {
                EXPECT_TRUE(*floor == 100 || *floor == 200) << *floor;
            }
        });
    EXPECT_GT(landed, 2);
}

TEST(ClusterFilesPowerCut, AClusterIdCutAtAnyCallIsTheOldIdOrTheNewOne) {
    const int landed = cut_at_every_call(
        [](const TempDir& d) { ASSERT_TRUE(cluster::replace_cluster_id(d.path(), 0xaaaa)); },
        [](const TempDir& d) { return cluster::replace_cluster_id(d.path(), 0xbbbb); },
        [](const TempDir& d, bool wrote_new) {
            // Asked first: a check finding no id would write the one it is given.
            ASSERT_TRUE(cluster::has_cluster_id(d.path())) << "the id file is gone";
            const bool old_id = bool(cluster::check_cluster_id(d.path(), 0xaaaa));
            const bool new_id = bool(cluster::check_cluster_id(d.path(), 0xbbbb));
            if (wrote_new) {
                EXPECT_TRUE(new_id) << "the write said done, and the old id came back";
            } else {
                EXPECT_TRUE(old_id || new_id) << "neither id: a damaged file";
            }
        });
    EXPECT_GT(landed, 2);
}

}  // namespace
}  // namespace shmipam::testing
