// Many threads (each with its own mapping, as separate processes would have) claiming and
// releasing on one arena. Built with TSan in CI.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

TEST(Concurrency, ThreadsNeverShareAnAddressAndLeaveTheArenaEmpty) {
    testing::TempDir dir;
    auto cfg = testing::network_config(dir, {testing::range_set({{"10.4.0.0/24", "", "", ""}})});
    { auto warm = testing::open_store(cfg); }
    constexpr int kThreads = 8;
    constexpr int kRounds = 150;
    std::mutex mu;
    std::map<std::string, std::string> holder;  // address -> attachment
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            auto store = testing::open_store(cfg);
            Allocator alloc(*store, cfg);
            for (int r = 0; r < kRounds; ++r) {
                const std::string cid = "t" + std::to_string(t) + "r" + std::to_string(r);
                auto out = alloc.add(testing::add_request(cid));
                if (!out) {
                    ++failures;
                    continue;
                }
                const std::string a = out->addresses[0].address.to_string();
                {
                    std::lock_guard<std::mutex> g(mu);
                    if (!holder.emplace(a, cid).second) ++failures;  // duplicate!
                }
                {
                    std::lock_guard<std::mutex> g(mu);
                    holder.erase(a);
                }
                if (!alloc.del({cid, "eth0"})) ++failures;
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    auto store = testing::open_store(cfg);
    testing::expect_verify_clean(*store);
    auto d = dump(*store);
    for (const auto& s : d->slots) EXPECT_NE(s.state, "allocated") << s.address.to_string();
    EXPECT_EQ(d->adds, uint64_t(kThreads * kRounds));
    EXPECT_EQ(d->dels, uint64_t(kThreads * kRounds));
}

TEST(Concurrency, ConcurrentAddsForOneAttachmentTakeOneAddress) {
    testing::TempDir dir;
    auto cfg = testing::network_config(dir, {testing::range_set({{"10.4.0.0/24", "", "", ""}})});
    { auto warm = testing::open_store(cfg); }
    for (int round = 0; round < 20; ++round) {
        const std::string cid = "same" + std::to_string(round);
        std::atomic<int> ok{0}, busy{0};
        std::mutex mu;
        std::set<std::string> addrs;
        std::vector<std::thread> threads;
        for (int t = 0; t < 6; ++t) {
            threads.emplace_back([&] {
                auto store = testing::open_store(cfg);
                Allocator alloc(*store, cfg);
                auto out = alloc.add(testing::add_request(cid));
                if (out) {
                    ++ok;
                    std::lock_guard<std::mutex> g(mu);
                    addrs.insert(out->addresses[0].address.to_string());
                } else {
                    EXPECT_EQ(out.error().code, Code::kTryAgainLater) << out.error().msg;
                    ++busy;
                }
            });
        }
        for (auto& th : threads) th.join();
        EXPECT_GE(ok.load(), 1);
        EXPECT_EQ(addrs.size(), 1u) << "every successful ADD must report the one address";
    }
    auto store = testing::open_store(cfg);
    testing::expect_verify_clean(*store);
    auto d = dump(*store);
    EXPECT_EQ(d->slots.size(), 20u) << "20 attachments, one address each";
}

}  // namespace
}  // namespace shmipam::engine
