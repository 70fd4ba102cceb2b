// In-process micro-benchmarks of the claim path (Google Benchmark).
//   BM_AddDel          a full engine ADD + DEL (lease, dead-lease scan, index, next-fit, publish)
//   BM_SlotClaimPublishRelease  the slot transitions alone: the floor of the lock-free claim
//   BM_AddDelNearlyFull         ADD + DEL in a /24 with one address left
//   BM_AddDelThreads / BM_AddDelProcesses  N threads / N forked processes on one arena
//   BM_DelLookupAmong65536, BM_OpenNetwork, BM_JournalAppend (without and with fdatasync)
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "engine/state/network_store.h"
#include "engine/slots/slot_ops.h"
#include "base/clock.h"
#include "shm/journal.h"
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
        store = std::move(*engine::open_network(cfg, shm::current_process()));
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

// N threads, each with its own mapping (as processes have), claiming and releasing on one /16.
// Reports total throughput (items/s) and the CAS retries the claims lost to each other.
Net& shared_net() {
    static Net net("10.33.0.0/16");  // one network for every run and thread of the benchmark
    return net;
}

void BM_AddDelThreads(benchmark::State& state) {
    static std::mutex mu;
    engine::NetworkConfig cfg;
    {
        std::lock_guard<std::mutex> g(mu);
        cfg = shared_net().cfg;
    }
    // Every thread opens its own view of the same network.
    auto opened = engine::open_network(cfg, shm::current_process());
    if (!opened) {
        state.SkipWithError(opened.error().msg.c_str());
        return;
    }
    auto store = std::move(*opened);
    engine::Allocator alloc(*store, cfg);
    engine::AddRequest req;
    req.key = {"t" + std::to_string(state.thread_index()), "eth0"};
    for (auto _ : state) {
        if (!alloc.add(req)) state.SkipWithError("add failed");
        if (!alloc.del(req.key)) state.SkipWithError("del failed");
    }
    state.SetItemsProcessed(state.iterations());
    if (state.thread_index() == 0) {
        uint64_t retries = 0;
        auto blocks = store->all_blocks();  // keep it alive: the loop refers into it
        if (blocks) {
            for (auto* b : *blocks) retries += b->header().cas_retries;
        }
        state.counters["cas_retries"] = double(retries);
    }
}
BENCHMARK(BM_AddDelThreads)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

// N forked processes on one arena, each ADD+DEL in a loop for a fixed time: the real deployment
// shape (separate address spaces, real pids in the lease table). Reports total ops/s, ops/s per
// process and the CAS retries the claims lost.
void BM_AddDelProcesses(benchmark::State& state) {
    const int n = int(state.range(0));
    constexpr double kSeconds = 0.5;
    Net net("10.34.0.0/16");
    for (auto _ : state) {
        int fds[2];
        if (::pipe(fds) != 0) state.SkipWithError("pipe");
        std::vector<pid_t> kids;
        const auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < n; ++k) {
            const pid_t pid = ::fork();
            if (pid == 0) {
                ::close(fds[0]);
                auto store = engine::open_network(net.cfg, shm::current_process());
                uint64_t ops = 0;
                if (store) {
                    engine::Allocator alloc(**store, net.cfg);
                    engine::AddRequest req;
                    req.key = {"p" + std::to_string(k), "eth0"};
                    const auto end = t0 + std::chrono::duration<double>(kSeconds);
                    while (std::chrono::steady_clock::now() < end) {
                        if (!alloc.add(req) || !alloc.del(req.key)) break;
                        ++ops;
                    }
                }
                (void)!::write(fds[1], &ops, sizeof ops);
                ::_exit(0);
            }
            kids.push_back(pid);
        }
        ::close(fds[1]);
        uint64_t total = 0, ops = 0;
        while (::read(fds[0], &ops, sizeof ops) == ssize_t(sizeof ops)) total += ops;
        ::close(fds[0]);
        for (pid_t pid : kids) ::waitpid(pid, nullptr, 0);
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state.SetIterationTime(secs);
        state.counters["ops_per_s"] = double(total) / kSeconds;
        state.counters["ops_per_s_per_process"] = double(total) / kSeconds / n;
    }
    uint64_t retries = 0;
    auto blocks = net.store->all_blocks();  // keep it alive: the loop refers into it
    if (blocks) {
        for (auto* b : *blocks) retries += b->header().cas_retries;
    }
    state.counters["cas_retries"] = double(retries);
}
BENCHMARK(BM_AddDelProcesses)->Arg(1)->Arg(2)->Arg(4)->Iterations(1)->UseManualTime();

// DEL's lookup among 65,536 live attachments: the index finds the attachment in O(1) probes.
void BM_DelLookupAmong65536(benchmark::State& state) {
    Net net("10.34.0.0/15");
    for (int i = 0; i < 65536; ++i) {
        engine::AddRequest r;
        r.key = {"live" + std::to_string(i), "eth0"};
        if (!net.alloc->add(r)) {
            state.SkipWithError("fill failed");
            return;
        }
    }
    int i = 0;
    for (auto _ : state) {
        const std::string id = "live" + std::to_string(i++ % 65536);
        auto held = net.alloc->addresses_of({id, "eth0"});
        benchmark::DoNotOptimize(held);
    }
}
BENCHMARK(BM_DelLookupAmong65536)->Iterations(200000);

// What every invocation pays to map a network: the index and one block (a /24 network).
void BM_OpenNetwork(benchmark::State& state) {
    Net net("10.35.0.0/24");
    engine::AddRequest r;
    r.key = {"x", "eth0"};
    (void)net.alloc->add(r);
    for (auto _ : state) {
        auto s = engine::open_network(net.cfg, shm::current_process());
        auto b = (*s)->block_for(*engine::IpAddress::parse("10.35.0.2"), false);
        benchmark::DoNotOptimize(b);
    }
}
BENCHMARK(BM_OpenNetwork);

// One journal append of two records (a dual-stack ADD), without and with fdatasync, on the
// directory given by SHMIPAM_BENCH_DISK (default /var/tmp: a disk here).
void BM_JournalAppend(benchmark::State& state) {
    const bool sync = state.range(0) != 0;
    const char* base = std::getenv("SHMIPAM_BENCH_DISK");
    std::string dir = std::string(base ? base : "/var/tmp") + "/shmipam-bench-journal-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) {
        state.SkipWithError("mkdtemp failed");
        return;
    }
    shm::Journal j(dir, sync ? shm::SyncMode::kFdatasync : shm::SyncMode::kNone);
    uint64_t tail = 0;
    format::JournalRecord recs[2] = {};
    for (auto& r : recs) {
        r.op = 1;
        r.family = 4;
    }
    for (auto _ : state) {
        if (tail + 2 >= format::kJournalRecordsPerSegment * 8) tail = 0;  // stay in 8 segments
        if (!j.append(tail, recs, {})) state.SkipWithError("append failed");
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}
BENCHMARK(BM_JournalAppend)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
