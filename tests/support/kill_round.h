// One round of concurrent plugin processes with random SIGKILLs, as the power-loss tests run
// them: every operation spawned at once, a killer thread SIGKILLing the ones it was told to after
// a random delay, then every result collected.
#pragma once

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/plugin_runner.h"

namespace shmipam::testing {

struct RoundOp {
    std::string cmd, id;
};

// n operations: every third a DEL of one of `live` (in random order) while there are some, the
// others ADDs of new attachments named prefix + a running number.
inline std::vector<RoundOp> mixed_ops(std::vector<std::string> live, size_t n,
                                      const std::string& prefix, int& next, std::mt19937& rng) {
    std::shuffle(live.begin(), live.end(), rng);
    std::vector<RoundOp> ops;
    for (size_t i = 0; i < n; ++i) {
        if (i % 3 == 2 && !live.empty()) {
            ops.push_back({"DEL", live.back()});
            live.pop_back();
        } else {
            ops.push_back({"ADD", prefix + std::to_string(next++)});
        }
    }
    return ops;
}

// Runs the round; `kill(i)` says whether op i is SIGKILLed, at a random moment up to `window`
// after it started (callers scale the window to a measured ADD time: tests/support/op_timing.h).
// The results come back in the order of `ops`.
inline std::vector<ProcessResult> run_kill_round(
    const std::vector<RoundOp>& ops, const std::string& config,
    const std::map<std::string, std::string>& extra_env, const std::function<bool(size_t)>& kill,
    std::chrono::microseconds window, std::mt19937& rng) {
    const auto window_us = uint64_t(std::max<int64_t>(window.count(), 1));
    std::vector<std::unique_ptr<Child>> children(ops.size());
    std::vector<std::atomic<pid_t>> pids(ops.size());
    std::thread killer([&] {
        for (size_t i = 0; i < ops.size(); ++i) {
            if (!kill(i)) continue;
            while (pids[i].load() == 0) std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % window_us));
            ::kill(pids[i].load(), SIGKILL);
        }
    });
    for (size_t i = 0; i < ops.size(); ++i) {
        auto env = cni_env(ops[i].cmd, ops[i].id);
        for (const auto& [k, v] : extra_env) env[k] = v;
        children[i] =
            std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH}, env, config);
        pids[i].store(children[i]->pid());
    }
    killer.join();
    std::vector<ProcessResult> out;
    for (auto& c : children) out.push_back(c->wait());
    return out;
}

}  // namespace shmipam::testing
