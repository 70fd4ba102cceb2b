// In-process micro-benchmarks of the claim path (Google Benchmark).
//   BM_AddDel          a full engine ADD + DEL (lease, dead-lease scan, index, next-fit, publish)
//   BM_SlotClaimPublishRelease  the slot transitions alone: the floor of the lock-free claim
//   BM_AddDelNearlyFull         ADD + DEL in a /24 with one address left
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/allocator.h"
#include "engine/network_store.h"
#include "engine/slot_ops.h"
#include "shm/clock.h"
#include "shm/process_identity.h"

using namespace shmipam;

namespace {

struct Net {
    std::string dir;
    engine::NetworkConfig cfg;
    std::unique_ptr<engine::NetworkStore> store;
    std::unique_ptr<engine::Allocator> alloc;

    explicit Net(const std::string& subnet) {
        char tmpl[] = "/dev/shm/shmipam-bench-XXXXXX";
        dir = ::mkdtemp(tmpl) ? tmpl : "/tmp";
        cfg.name = "bench";
        cfg.run_dir = dir + "/run";
        cfg.data_dir = dir + "/data";
        cfg.reuse_delay_ms = 0;
        cfg.range_sets.push_back(*engine::make_range_set({{subnet, "", "", ""}}));
        store = std::move(*engine::NetworkStore::open(cfg, shm::current_process()));
        alloc = std::make_unique<engine::Allocator>(*store, cfg);
    }
    ~Net() {
        alloc.reset();
        store.reset();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

void BM_AddDel(benchmark::State& state) {
    Net net("10.30.0.0/16");
    engine::AddRequest req;
    req.key = {"bench-container", "eth0"};
    for (auto _ : state) {
        auto out = net.alloc->add(req);
        if (!out) state.SkipWithError(out.error().msg.c_str());
        benchmark::DoNotOptimize(out);
        if (!net.alloc->del(req.key)) state.SkipWithError("del failed");
    }
}
BENCHMARK(BM_AddDel);

void BM_AddDelNearlyFull(benchmark::State& state) {
    Net net("10.31.0.0/24");
    for (int i = 0; i < 252; ++i) {
        engine::AddRequest fill;
        fill.key = {"fill" + std::to_string(i), "eth0"};
        (void)net.alloc->add(fill);
    }
    engine::AddRequest req;
    req.key = {"last", "eth0"};
    for (auto _ : state) {
        auto out = net.alloc->add(req);
        if (!out) state.SkipWithError(out.error().msg.c_str());
        if (!net.alloc->del(req.key)) state.SkipWithError("del failed");
    }
}
BENCHMARK(BM_AddDelNearlyFull);

void BM_SlotClaimPublishRelease(benchmark::State& state) {
    Net net("10.32.0.0/24");
    auto lease = *net.store->index().leases().acquire(net.store->self());
    shm::BlockFile& b = **net.store->block_for(*engine::IpAddress::parse("10.32.0.7"), true);
    for (auto _ : state) {
        const uint64_t w = engine::slot_ops::load_state(b, 7);
        uint64_t claimed = 0, releasing = 0;
        engine::slot_ops::claim(b, 7, w, lease, &claimed);
        engine::slot_ops::publish(b, 7, claimed, 0, 0, 1, 1, 0);
        engine::slot_ops::begin_release(b, 7, engine::slot_ops::load_state(b, 7), 0, 0, &releasing);
        engine::slot_ops::finish_release(b, 7, releasing, 0);
    }
    net.store->index().leases().release(lease);
}
BENCHMARK(BM_SlotClaimPublishRelease);

}  // namespace

BENCHMARK_MAIN();
