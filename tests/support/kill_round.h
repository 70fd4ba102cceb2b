// One round of concurrent plugin processes with random SIGKILLs, as the storms and the
// power-loss tests run them: every operation spawned at once, a killer thread SIGKILLing the
// ones it was told to after a random delay, then every result collected.
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
    std::map<std::string, std::string> env = {};  // on top of the round's extra_env
    std::string config = {};                      // empty: the round's
};

// n operations: every `del_every`th a DEL of one of `live` (in random order) while there are
// some, the others ADDs of new attachments named prefix + a running number.
inline std::vector<RoundOp> mixed_ops(std::vector<std::string> live, size_t n,
                                      const std::string& prefix, int& next, std::mt19937& rng,
                                      size_t del_every = 3) {
    std::shuffle(live.begin(), live.end(), rng);
    std::vector<RoundOp> ops;
    for (size_t i = 0; i < n; ++i) {
        if (i % del_every == del_every - 1 && !live.empty()) {
            ops.push_back({"DEL", live.back()});
            live.pop_back();
        } else {
            ops.push_back({"ADD", prefix + std::to_string(next++)});
        }
    }
    return ops;
}

// Runs the round; `kill(i)` says whether op i is SIGKILLed, at a random moment up to `window`
// after its own spawn (callers scale the window to a measured ADD time: tests/support/op_timing.h).
// A killer thread runs while the rest are still being spawned, each kill at its own deadline.
// The results come back in the order of `ops`.
inline std::vector<ProcessResult> run_kill_round(
    const std::vector<RoundOp>& ops, const std::string& config,
    const std::map<std::string, std::string>& extra_env, const std::function<bool(size_t)>& kill,
    std::chrono::microseconds window, std::mt19937& rng) {
    using Clock = std::chrono::steady_clock;
    const auto window_us = uint64_t(std::max<int64_t>(window.count(), 1));
    std::vector<int64_t> delay_us(ops.size(), -1);  // -1: not killed
    size_t to_kill = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
        if (kill(i)) delay_us[i] = int64_t(rng() % window_us), ++to_kill;
    }
    std::vector<std::unique_ptr<Child>> children(ops.size());
    std::vector<Clock::time_point> spawned(ops.size());
    std::vector<std::atomic<pid_t>> pids(ops.size());  // set after spawned[i]: publishes it
    std::thread killer([&] {
        std::vector<bool> done(ops.size());
        while (to_kill > 0) {
            const auto now = Clock::now();
            auto next = now + std::chrono::milliseconds(1);  // new spawns are looked at by then
            for (size_t i = 0; i < ops.size(); ++i) {
                if (delay_us[i] < 0 || done[i] || pids[i].load() == 0) continue;
                const auto due = spawned[i] + std::chrono::microseconds(delay_us[i]);
                if (due <= now) {
                    ::kill(pids[i].load(), SIGKILL);
                    done[i] = true;
                    --to_kill;
                } else {
                    next = std::min(next, due);
                }
            }
            std::this_thread::sleep_until(next);
        }
    });
    for (size_t i = 0; i < ops.size(); ++i) {
        auto env = cni_env(ops[i].cmd, ops[i].id);
        for (const auto& [k, v] : extra_env) env[k] = v;
        for (const auto& [k, v] : ops[i].env) env[k] = v;
        spawned[i] = Clock::now();
        children[i] = std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH}, env,
                                              ops[i].config.empty() ? config : ops[i].config);
        pids[i].store(children[i]->pid());
    }
    killer.join();
    std::vector<ProcessResult> out;
    for (auto& c : children) out.push_back(c->wait());
    return out;
}

}  // namespace shmipam::testing
